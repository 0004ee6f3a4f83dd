"""GuideLoom 1.1's ``guideloom.io``: the file-reading backends, defined in guideloom.storage.io."""

from guideloom.storage.io import MmapIO, PosixPreadIO, SeekIO

__all__ = ["MmapIO", "PosixPreadIO", "SeekIO"]
