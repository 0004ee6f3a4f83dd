"""What the read layers use of a byte source and of a location, declared: :class:`ByteSource`
and :class:`Located`.

Every capability a layer relies on is a member of these protocols, so no layer asks an object
whether it has one (``tests/test_no_probes.py`` refuses a ``getattr``/``hasattr`` naming one
anywhere in ``guideloom/read/``):

- a byte source says ``high_latency`` (each request a round trip: read ahead, cache
  metadata), ``fd`` (the local descriptor the fast paths read directly, ``None`` for any
  other source), and has ``read_tail``, ``readinto``, ``view`` (bytes it holds in memory,
  handed out in place; ``None`` from any other source) and ``close``; a source that needs none
  of that inherits the defaults of :class:`SourceDefaults`.
- a location says ``is_local`` and ``held`` (its stored bytes read into memory once, a
  :class:`Held`, or ``None``) and carries ``archive_size``, ``validator``, ``file_size``,
  ``method``, ``headers``, ``options`` and ``next_header``/``next_member`` (zeros and empties
  for a local :class:`~guideloom.read.locations.Location`), and ``cache_key()`` (``None``
  when its metadata is not kept).

The location types themselves (:class:`guideloom.read.locations.Location` and
``RemoteLocation``) live with the code that scans a data root.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["ByteSource", "Held", "Located", "SourceDefaults"]


@runtime_checkable
class ByteSource(Protocol):
    """One file's bytes, read by offset."""

    @property
    def name(self) -> str:
        """The path or URL, for messages."""
        ...

    @property
    def high_latency(self) -> bool:
        """True when every request is a network round trip worth saving."""
        ...

    @property
    def fd(self) -> int | None:
        """The local file descriptor holding the bytes (read directly by the fast paths);
        ``None`` for a source that is not a local file."""
        ...

    def size(self) -> int:
        """The file's size in bytes."""
        ...

    def read(self, offset: int, size: int) -> bytes:
        """Exactly ``size`` bytes from ``offset``; raises ``OSError`` when fewer exist."""
        ...

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes of each ``(offset, size)`` range, in the order given (``read_many``)."""
        ...

    def read_tail(self, size: int) -> bytes:
        """The file's last ``size`` bytes (all of it when smaller)."""
        ...

    def readinto(self, buffer: Any, offset: int) -> int:
        """Bytes read into ``buffer`` from ``offset``."""
        ...

    def view(self, offset: int, size: int) -> memoryview | None:
        """The ``size`` bytes from ``offset`` in place (read-only, no copy) when the source
        holds them in memory; ``None`` when it does not (a file, a remote source). Raises
        ``OSError`` for a range it holds only in part. The view is valid while the record that
        asked for it is read: take no reference beyond that."""
        ...

    def close(self) -> None:
        """Release what the source holds (idempotent; a shared source may ignore it)."""
        ...


class SourceDefaults:
    """The defaults of a byte source that needs no more than ``size``/``read``: not high
    latency, no descriptor, the tail and ``readinto`` through ``read``, nothing to close."""

    high_latency = False
    fd: int | None = None

    def read_tail(self: ByteSource, size: int) -> bytes:
        total = self.size()
        n = max(0, min(size, total))
        return self.read(total - n, n)

    def readinto(self: ByteSource, buffer: Any, offset: int) -> int:
        """``len(buffer)`` bytes from ``offset`` through ``read`` (raises past the end)."""
        view = memoryview(buffer).cast("B")
        view[:] = self.read(offset, len(view))
        return len(view)

    def view(self, offset: int, size: int) -> memoryview | None:
        """``None``: the bytes are not held in memory."""
        return None

    def close(self) -> None:
        return None


@dataclass(frozen=True, eq=False)
class Held:
    """A local input's bytes read once into memory, by the export that hashed them for its
    content digest, so that the record is decoded from exactly the bytes hashed.

    Attributes:
        data: The file's bytes from offset ``base`` on (a loose file's from 0; for a zip
            member, the archive's from the member's local header to its data's end), read-only.
        base: The file offset of ``data[0]``.
        digest: The BLAKE3 digest (hex) of the input's stored bytes among them.
    """

    data: memoryview
    base: int
    digest: str


class Located(Protocol):
    """Where one experiment's HDF5 bytes are (see :class:`guideloom.read.locations.Location`)."""

    @property
    def sim_id(self) -> Any: ...

    @property
    def path(self) -> str: ...

    @property
    def member(self) -> str | None: ...

    @property
    def header_offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def stored(self) -> bool: ...

    @property
    def crc(self) -> int | None: ...

    @property
    def defect(self) -> str | None: ...

    @property
    def next_header(self) -> int | None:
        """Where the next member's local header is (``None``: none follows, or unknown)."""
        ...

    @property
    def next_member(self) -> str | None:
        """The name of the member at ``next_header``, for messages."""
        ...

    @property
    def is_local(self) -> bool:
        """True when the bytes are on this machine's file system (read with ``pread``)."""
        ...

    @property
    def held(self) -> Held | None:
        """The bytes read into memory for this record (served by
        :func:`~guideloom.read.byte_source.source_for`), ``None`` to read them from the file."""
        ...

    @property
    def archive_size(self) -> int:
        """The (remote) archive's size as listed; 0 when not known from a listing."""
        ...

    @property
    def validator(self) -> str:
        """The remote archive's ETag or Last-Modified ('' when none)."""
        ...

    @property
    def file_size(self) -> int:
        """The member's inflated size when the location carries it (else 0)."""
        ...

    @property
    def method(self) -> int:
        """The member's compression method when ``file_size`` is carried."""
        ...

    @property
    def headers(self) -> tuple[tuple[str, str], ...]:
        """HTTP headers for the remote file's requests."""
        ...

    @property
    def options(self) -> Mapping[str, Any]:
        """The root's fsspec storage options."""
        ...

    def cache_key(self) -> str | None:
        """The key of the member's cached HDF5 metadata; ``None`` when none is kept."""
        ...

    def describe(self) -> str:
        """``path`` or ``archive::member``, for messages."""
        ...
