"""Opening a local data file (a loose HDF5 file, a zip archive, the index table, the manifest,
a data folder's listing): the one place where "permission denied" becomes an error naming the
file, its owner and its mode, never "damaged" nor a bare ``[Errno 13]``.

Every local open of the read path goes through :func:`open_fd`, :func:`read_bytes` or the
context manager :func:`data_file` (h5py opening a loose file by name, ``os.scandir``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from guideloom.errors import NamedPermissionError, permission_denied

__all__ = ["data_file", "denied", "open_fd", "read_bytes"]

_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


def denied(path: str | os.PathLike[str], exc: PermissionError) -> PermissionError:
    """``exc`` (raised opening ``path``) as a :class:`PermissionError` whose message names
    ``path``, its owner and mode, and the user this process runs as."""
    if isinstance(exc, NamedPermissionError):
        return exc
    filename = exc.filename if isinstance(exc.filename, str) and exc.filename else path
    return permission_denied(PermissionError(exc.errno, exc.strerror, os.fspath(filename)))


@contextmanager
def data_file(path: str | os.PathLike[str]) -> Iterator[None]:
    """Within the block, a :class:`PermissionError` (h5py's ``errno = 13`` included) is
    re-raised by :func:`denied`, naming ``path``."""
    try:
        yield
    except PermissionError as exc:
        raise denied(path, exc) from exc


def open_fd(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor (close-on-exec) of ``path``.

    Raises:
        PermissionError: Naming the file, its owner and mode.
        OSError: Any other failure to open it.
    """
    with data_file(path):
        return os.open(os.fspath(path), _FLAGS)


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The whole (small) file ``path``.

    Raises:
        PermissionError: Naming the file, its owner and mode.
        OSError: Any other failure to read it.
    """
    with os.fdopen(open_fd(path), "rb") as f:
        return f.read()
