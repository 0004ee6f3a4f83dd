"""What the read layers need of a location: the :class:`Located` protocol.

The location types themselves (:class:`guideloom.read.locations.Location` and the remote
``RemoteLocation``) live with the code that scans a data root; the read layers depend only on
these fields. A location may carry more (``archive_size``, ``validator``, ``headers``,
``options``, ``file_size``, ``cache_key()``): the byte layer and the HDF5 layer use those
when present.
"""

from __future__ import annotations

from typing import Any, Protocol


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

    def describe(self) -> str:
        """``path`` or ``archive::member``, for messages."""
        ...
