"""The native reader's exceptions."""

from __future__ import annotations


class NativeError(Exception):
    """The native reader cannot read this file or dataset; read it with h5py instead."""


class NativeUnsupported(NativeError):
    """The file uses an HDF5 feature the native reader does not handle (h5py does)."""


class NativeFormatError(NativeError):
    """The file's bytes are not valid HDF5 as far as the native reader can tell (truncated,
    out-of-range addresses, bad signatures or checksums, cycles). h5py then words the error."""
