"""The training loader: seeded global order, rank striding, prefetch and exact resume.

Importing this package does not import torch; constructing a loader does (and raises an
``ImportError`` naming ``pip install "guideloom[torch]"`` when it is missing).
"""

from guideloom.loader.core import StatefulDataLoader, global_positions
from guideloom.loader.sample_sources import ExportSource, ReaderSource, SampleSource
from guideloom.loader.torch_adapter import default_collate, move_to_device

__all__ = [
    "ExportSource",
    "ReaderSource",
    "SampleSource",
    "StatefulDataLoader",
    "default_collate",
    "global_positions",
    "move_to_device",
]
