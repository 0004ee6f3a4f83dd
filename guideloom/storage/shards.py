"""Shard files: naming, atomic writing, footer parsing and directory discovery.

One shard is one file ``shard-NNNNNN.gls``: named sections (the element or payload data first, at
offset 0, then small little-endian ``int64`` index arrays), each aligned to 64 bytes, then a UTF-8
JSON footer and a 16-byte trailer ``b"GLSHARD\\0" + uint32 LE version + uint32 LE footer length``.
The footer records the storage kind, the element dtype (``numpy.lib.format`` descr, explicit byte
order), the element/record counts and each section's ``[offset, nbytes]``.

A writer writes ``.shard-NNNNNN.gls.<pid>.<random>.tmp`` and renames it over the final name when it
closes, so readers see either the old shard or the new one, and writers of different shards never
touch the same file.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from guideloom.errors import StorageError
from guideloom.runtime.os_support import copy_range
from guideloom.storage.append_file import AppendFile
from guideloom.storage.types import FileReader, ReadInterface

MAGIC = b"GLSHARD\0"
VERSION = 1
TRAILER = struct.Struct("<8sII")
ALIGN = 64
INDEX_DTYPE = np.dtype("<i8")
_NAME = re.compile(r"^shard-(\d+)\.gls$")
_MAX_FOOTER = 1 << 24


def fsync_directory(directory: Path) -> None:
    """Make the names renamed into ``directory`` durable (where directories can be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows: a directory cannot be opened; its rename is durable
        return
    try:
        os.fsync(fd)
    except OSError:  # a file system that cannot sync a directory
        pass
    finally:
        os.close(fd)


def shard_name(shard: int) -> str:
    """Return the file name of shard ``shard``."""
    return f"shard-{shard:06d}.gls"


def check_shard_number(shard: Any) -> int:
    """Return ``shard`` as a non-negative ``int`` or raise ``TypeError``/``ValueError``."""
    try:
        number = int(shard.__index__())
    except (AttributeError, TypeError):
        raise TypeError(f"shard must be an integer, got {shard!r}") from None
    if number < 0:
        raise ValueError(f"shard must be >= 0, got {number}")
    return number


def dtype_to_json(dtype: np.dtype) -> Any:
    """Return a JSON-able description of ``dtype`` with explicit byte order."""
    descr = np.lib.format.dtype_to_descr(np.dtype(dtype))
    return descr if isinstance(descr, str) else _tuples_to_lists(descr)


def dtype_from_json(descr: Any) -> np.dtype:
    """Inverse of :func:`dtype_to_json`."""
    if not isinstance(descr, str):
        descr = _lists_to_tuples(descr)
    return np.lib.format.descr_to_dtype(descr)


def _tuples_to_lists(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_tuples_to_lists(v) for v in value]
    return value


def _lists_to_tuples(value: Any) -> Any:
    if isinstance(value, list):
        if value and all(isinstance(v, list) for v in value):
            return [_lists_to_tuples(v) for v in value]  # list of fields
        return tuple(_lists_to_tuples(v) if isinstance(v, list) else v for v in value)
    return value


class ShardFileWriter:
    """Writes one shard file under a temporary name; :meth:`commit` renames it into place.

    The bytes go through an :class:`~guideloom.storage.append_file.AppendFile`: gathered in
    an aligned buffer and written to the disk in whole blocks as it fills (direct I/O where
    the file system has it), so the one fsync of the commit has little left to write.
    """

    def __init__(self, directory: Path, shard: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.final_path = directory / shard_name(shard)
        self.temp_path = directory / f".{shard_name(shard)}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        self._file = AppendFile(self.temp_path)  # closed in publish/abort
        self._sections: dict[str, list[int]] = {}
        self.deferred = False  # commit() seals only; the writer publishes (a group commit)

    @property
    def _position(self) -> int:
        return self._file.position

    def write(self, data: Any) -> None:
        """Append bytes (any C-contiguous buffer) to the file."""
        self._file.write(data)

    def space(self) -> memoryview:
        """Free bytes of the write buffer to append into in place: fill their front, then
        :meth:`advance` (empty when full: :meth:`make_room`)."""
        return self._file.space()

    def advance(self, nbytes: int) -> None:
        """Count ``nbytes`` filled into :meth:`space` as appended."""
        self._file.advance(nbytes)

    def make_room(self) -> None:
        """Write out what the buffer holds (all but a partial block) to free its space."""
        self._file.drain()

    def copy_from(self, fd: int, offset: int, nbytes: int) -> None:
        """Append ``nbytes`` of the open file ``fd`` from ``offset`` (records of another shard),
        copied in the kernel where it can (:func:`guideloom.runtime.os_support.copy_range`)."""
        if not nbytes:
            return
        self._file.flush()  # what was written before lies at [0, position)
        copy_range(fd, self._file.fileno(), nbytes, offset, self._position,
                   fallback="storage:copy_file_range_refused")
        self._file.appended_by_kernel(nbytes)

    def begin_section(self, name: str) -> None:
        """Pad to the alignment and start section ``name`` at the current position."""
        pad = -self._position % ALIGN
        if pad:
            self.write(bytes(pad))
        self._sections[name] = [self._position, 0]

    def end_section(self, name: str) -> None:
        """Close section ``name`` at the current position."""
        self._sections[name][1] = self._position - self._sections[name][0]

    def write_section(self, name: str, data: Any) -> None:
        """Write a whole section at once."""
        self.begin_section(name)
        self.write(data)
        self.end_section(name)

    def write_file_section(self, name: str, source: Any) -> None:
        """Copy an open binary file (from its start) as section ``name``."""
        self.begin_section(name)
        source.seek(0)
        while chunk := source.read(1 << 22):
            self.write(chunk)
        self.end_section(name)

    def commit(self, footer: Mapping[str, Any]) -> None:
        """Write the footer and trailer, flush to disk and rename over the final name.

        With :attr:`deferred` set (a writer closing several shards at once, see
        :meth:`BaseWriter.close`), only :meth:`seal` runs here and the writer calls
        :meth:`publish` for every shard after all are sealed (a group commit).
        """
        self.seal(footer)
        if not self.deferred:
            self.publish()

    def seal(self, footer: Mapping[str, Any]) -> None:
        """Write the footer and trailer: every byte of the shard is in the file (its last
        partial block in the page cache), not yet waited for."""
        body = dict(footer)
        body["version"] = VERSION
        body["sections"] = self._sections
        encoded = json.dumps(body, separators=(",", ":")).encode()
        try:
            self.write(encoded)
            self.write(TRAILER.pack(MAGIC, VERSION, len(encoded)))
            self._file.flush()
        except BaseException:
            self.abort()
            raise

    def fileno(self) -> int:
        """The temporary file's descriptor (a writer fsyncs its sealed shards together)."""
        return self._file.fileno()

    def publish(self, synced: bool = False) -> None:
        """Wait until the sealed file is on disk (its one fsync; ``synced``: the caller's
        fsync of :meth:`fileno` returned after :meth:`seal`) and rename it over the final
        name (the directory entry is made durable by :func:`fsync_directory`, once per
        directory)."""
        try:
            if not synced:  # (sealed: every byte is in the file already)
                self._file.sync()
            self._file.close()
            os.replace(self.temp_path, self.final_path)
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Drop the temporary file; the final shard (if any) is left as it was."""
        if not self._file.closed:
            self._file.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.temp_path)


@dataclass
class OpenShard:
    """An opened, validated shard file."""

    number: int
    path: Any
    file: FileReader
    footer: dict[str, Any]
    dtype: np.dtype | None

    def section(self, name: str) -> tuple[int, int]:
        """Return ``(offset, nbytes)`` of section ``name``."""
        offset, nbytes = self.footer["sections"][name]
        return offset, nbytes

    def read_index(self, name: str) -> np.ndarray:
        """Read an ``int64`` index section as a native array."""
        offset, nbytes = self.section(name)
        if nbytes % INDEX_DTYPE.itemsize:
            raise StorageError(f"{self.path}: section {name!r} has a partial entry")
        raw = np.frombuffer(self.file.read(offset, nbytes), dtype=INDEX_DTYPE)
        return raw.astype(np.int64)


def _bad(path: Path, why: str) -> StorageError:
    return StorageError(f"{path}: not a complete GuideLoom shard ({why})")


def _parse_footer(path: Path, file: FileReader) -> dict[str, Any]:
    size = file.size()
    if size < TRAILER.size:
        raise _bad(path, f"{size} bytes, truncated")
    magic, version, length = TRAILER.unpack(file.read(size - TRAILER.size, TRAILER.size))
    if magic != MAGIC:
        raise _bad(path, "no trailer: truncated, still being written by a crashed writer, or "
                   "not a shard file")
    if version != VERSION:
        raise _bad(path, f"format version {version}, this guideloom reads version {VERSION}")
    body_end = size - TRAILER.size
    if length > min(body_end, _MAX_FOOTER):
        raise _bad(path, "footer length exceeds the file")
    try:
        footer = json.loads(file.read(body_end - length, length))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _bad(path, f"unreadable footer: {error}") from None
    if not isinstance(footer, dict) or not isinstance(footer.get("sections"), dict):
        raise _bad(path, "footer without sections")
    limit = body_end - length
    for name, span in footer["sections"].items():
        if (
            not isinstance(span, list)
            or len(span) != 2
            or not all(isinstance(v, int) and v >= 0 for v in span)
            or span[0] + span[1] > limit
        ):
            raise _bad(path, f"section {name!r} lies outside the file")
    return footer


#: Written by a writer session that appended nothing, so the storage opens as an empty one.
EMPTY_MARKER = "empty-storage.json"


def mark_empty(directory: Path, kind: str) -> None:
    """Record that ``directory`` is a storage of ``kind`` with no shards (unless it has some)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if any(_NAME.match(entry.name) for entry in os.scandir(directory)):
        return
    marker = directory / EMPTY_MARKER
    temp = directory / f".{EMPTY_MARKER}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    temp.write_text(json.dumps({"kind": kind, "shards": 0}))
    os.replace(temp, marker)


def _check_empty_marker(directory: Any, read_interface: ReadInterface, kind: str) -> None:
    path = read_interface.join(directory, EMPTY_MARKER)
    with read_interface.open(path) as file:
        try:
            body = json.loads(file.read(0, file.size()))
            found = body["kind"]
        except (ValueError, KeyError, TypeError):
            raise StorageError(f"{path}: not a GuideLoom empty-storage marker") from None
    if found != kind:
        raise StorageError(
            f"{path}: the directory is an empty {found!r} storage, not a {kind!r} storage"
        )


EXPORT_MANIFEST = "export.json"  # a guideloom export of a storage (guideloom.formats.layout)


def exported_shards(directory: Any, read_interface: ReadInterface) -> int | None:
    """How many shards the guideloom export at ``directory`` lists, or ``None`` when the
    directory is not a storage export (a plain storage, or its manifest unreadable)."""
    try:
        with read_interface.open(read_interface.join(directory, EXPORT_MANIFEST)) as file:
            manifest = json.loads(file.read(0, file.size()))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("kind") != "storage":
        return None
    count = manifest.get("n_partitions")
    return count if isinstance(count, int) and count >= 0 else None


def open_shards(
    directory: Any,
    kind: str,
    read_interface: ReadInterface,
    dtype: np.dtype | None,
    sections: tuple[str, ...],
) -> list[OpenShard]:
    """Open and validate every shard of ``directory``.

    Args:
        directory: The storage directory (a local path, or a URL for a remote read interface).
        kind: The storage kind every footer must name (``"stream"``, ``"document"``...).
        read_interface: Lists and opens the files.
        dtype: The element dtype the format expects (``None`` when the kind has none).
        sections: Section names every shard must have.

    Raises:
        FileNotFoundError: ``directory`` does not exist.
        StorageError: No shards (and no empty-storage marker from a writer that wrote
            nothing), a gap in the numbering, or a damaged or mismatched shard.
    """
    numbers: dict[int, str] = {}
    names = read_interface.list_names(directory)
    for name in names:
        match = _NAME.match(name)
        if match is None:
            continue
        number = int(match.group(1))
        if name != shard_name(number) or number in numbers:
            raise StorageError(f"{directory}: ambiguous shard file name {name!r}")
        numbers[number] = name
    if not numbers:
        if EMPTY_MARKER in names:
            _check_empty_marker(directory, read_interface, kind)
            return []
        raise StorageError(f"{directory} holds no shards (shard-000000.gls, ...)")
    listed = exported_shards(directory, read_interface) if EXPORT_MANIFEST in names else None
    if listed is not None and set(numbers) - set(range(listed)):
        extra = sorted(set(numbers) - set(range(listed)))
        raise StorageError(
            f"{directory}: {read_interface.join(directory, numbers[extra[0]])} (and "
            f"{len(extra) - 1} more) is not one of the {listed} shards its export.json lists; "
            "something added it: remove it, or export again"
        )
    missing = sorted(set(range(max(numbers) + 1)) - set(numbers))
    if missing:
        shown = ", ".join(str(m) for m in missing[:10]) + (", ..." if len(missing) > 10 else "")
        raise StorageError(
            f"{directory}: shards are numbered 0..{max(numbers)} but shard(s) {shown} are "
            f"missing (first missing: {read_interface.join(directory, shard_name(missing[0]))})"
        )
    shards: list[OpenShard] = []
    try:
        for number in range(len(numbers)):
            path = read_interface.join(directory, numbers[number])
            file = read_interface.open(path)
            try:
                shards.append(_validate(number, path, file, kind, dtype, sections))
            except BaseException:
                file.close()
                raise
    except BaseException:
        for shard in shards:
            shard.file.close()
        raise
    return shards


def _validate(
    number: int,
    path: Any,
    file: FileReader,
    kind: str,
    dtype: np.dtype | None,
    sections: tuple[str, ...],
) -> OpenShard:
    footer = _parse_footer(path, file)
    if footer.get("kind") != kind:
        raise StorageError(f"{path} holds a {footer.get('kind')!r} shard, not a {kind!r} shard")
    for name in sections:
        if name not in footer["sections"]:
            raise _bad(path, f"section {name!r} is missing")
    stored_dtype = None
    if dtype is not None:
        try:
            stored_dtype = dtype_from_json(footer["dtype"])
        except (KeyError, TypeError, ValueError) as error:
            raise _bad(path, f"unreadable dtype: {error}") from None
        if stored_dtype != dtype:
            raise StorageError(
                f"{path} stores elements of dtype {dtype_to_json(stored_dtype)}, but the format "
                f"declares {dtype_to_json(dtype)}"
            )
    for key in ("elements", "records"):
        if not isinstance(footer.get(key), int) or footer[key] < 0:
            raise _bad(path, f"bad {key!r} count")
    return OpenShard(number, path, file, footer, stored_dtype)


def close_shards(shards: list[OpenShard]) -> None:
    """Close every shard's file."""
    for shard in shards:
        shard.file.close()


def check_offsets(path: Path, name: str, offsets: np.ndarray, count: int, end: int) -> None:
    """Check a cumulative offsets array: ``count + 1`` entries from 0 to ``end``, non-decreasing."""
    if (
        len(offsets) != count + 1
        or offsets[0] != 0
        or offsets[-1] != end
        or (count and bool(np.any(np.diff(offsets) < 0)))
    ):
        raise _bad(path, f"inconsistent {name!r} index")
