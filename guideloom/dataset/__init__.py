# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's ``guideloom.dataset``: dataset views, defined in
:mod:`guideloom.storage.dataset`."""

from guideloom.storage.dataset import DocumentDataset, StreamDataset

__all__ = ["DocumentDataset", "StreamDataset"]
