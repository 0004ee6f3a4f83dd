# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's ``guideloom.io``: the file-reading backends, defined in
:mod:`guideloom.storage.io`."""

from guideloom.storage.io import MmapIO, PosixPreadIO, SeekIO

__all__ = ["MmapIO", "PosixPreadIO", "SeekIO"]
