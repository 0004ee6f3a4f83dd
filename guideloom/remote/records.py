"""Reading view records from zip members (or loose ``.h5`` files) of a remote release
(:class:`RemoteLocation`).

:class:`~guideloom.records.RecordReader` hands remote locations here. A stored member is
read by :mod:`guideloom.h5native`:

1. The member's local header and its first :data:`NATIVE_FIRST_READ` bytes (superblock,
   root group and, in files h5py writes, most object headers) come in one range; once a
   member of the view has been read, as far as its reads reached (:func:`first_read_size`),
   so the chunks usually come along and a record costs one round trip.
2. The native reader parses the metadata of the view's datasets from those bytes (a
   structure outside them costs one more range), and the chunks (or contiguous data) the
   view needs are fetched in one coalesced, concurrent ``read_ranges`` call.
3. Where the data starts and the parsed ``FileMeta`` are kept in the local cache
   (:mod:`guideloom.remote.cache`): a later pass fetches the chunks and nothing else.

A deflated member, ``verify_crc``, a feature the native reader lacks or any error goes to
h5py instead (counted in :func:`guideloom.records.native_stats`): it reads HDF5 metadata
through :class:`RemoteMemberFile` in :data:`BLOCK`-sized blocks, remembered per member and
cached, then the needed chunks in one ``read_ranges`` call, and words the errors. Errors
name the experiment, the archive URL and the member, as for local archives.
"""

from __future__ import annotations

import base64
import bisect
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import h5py
import numpy as np

from guideloom import h5native as _native
from guideloom.caches import BoundedCache, cache
from guideloom.errors import CorruptDataError, ExperimentReadError, NativeDamageError
from guideloom.h5native.stats import NATIVE_STATS
from guideloom.remote.cache import process_cache
from guideloom.remote.locations import RemoteLocation, location_source
from guideloom.remote.zipdir import LOCAL_HEADER
from guideloom.sources import (
    DEFLATE_MAX_RATIO,
    DEFLATE_SLACK,
    MemberFile,
    MemoryFile,
    SeekableReader,
    checked_data_offset,
    file_access,
    inflate_budget,
)
from guideloom.sources import raise_corrupt as _corrupt
from guideloom.zipcrc import crc32

BLOCK = 4 << 10  # granularity of HDF5 metadata reads (and of what the cache keeps)
FIRST_READ = 8 << 10  # member bytes fetched with the local header (superblock, root group)
NATIVE_FIRST_READ = 16 << 10  # ... for the native reader (its first metadata block)
NAME_SLACK = 64  # bytes for the local header's extra field (its length is learnt with it)
RECORD_MAX = 4 * BLOCK  # a read this large during metadata is data: not kept
META_KIND = "h5-metadata"
NATIVE_KIND = "h5native-meta"
CRC_BLOCK = 4 << 20
SPECULATE_MAX = 256 << 10  # member bytes a first read may take to bring a view's data along
REACH_MARGIN = 0.125  # ... and this share more (compressed chunks differ in size)
_verified: BoundedCache[str, bool] = cache("remote_crc_verdicts")
_reach: BoundedCache[tuple[str, ...], int] = cache("remote_view_reach")


class MemberMeta:
    """What is known of one member's bytes: where its data starts and metadata blocks."""

    def __init__(self, data_start: int, blocks: dict[int, bytes] | None = None):
        self.data_start = data_start
        self.blocks: dict[int, bytes] = blocks or {}
        self.changed = False

    def to_json(self) -> dict[str, Any]:
        return {"data_start": self.data_start, "block": BLOCK,
                "blocks": {str(i): base64.b64encode(b).decode() for i, b in
                           sorted(self.blocks.items())}}

    @classmethod
    def from_json(cls, doc: Any, loc: RemoteLocation) -> MemberMeta | None:
        """The cached entry, if it fits ``loc`` (else ``None``: it is refetched)."""
        try:
            start = doc["data_start"]
            lowest, highest = loc.data_bounds()
            if (doc["block"] != BLOCK or type(start) is not int or not lowest <= start <= highest
                    or start + loc.size > loc.archive_size):
                return None
            blocks = {}
            for key, text in doc["blocks"].items():
                i = int(key)
                data = base64.b64decode(text, validate=True)
                if not 0 <= i * BLOCK < loc.size or len(data) != min(BLOCK, loc.size - i * BLOCK):
                    return None
                blocks[i] = data
            return cls(start, blocks)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def _load_meta(loc: RemoteLocation) -> MemberMeta | None:
    return MemberMeta.from_json(process_cache().get(META_KIND, loc.cache_key()), loc)


def _save_meta(loc: RemoteLocation, meta: MemberMeta) -> None:
    if meta.changed:
        process_cache().put(META_KIND, loc.cache_key(), meta.to_json())
        meta.changed = False


class RemoteMemberFile(SeekableReader):
    """The member's bytes for h5py: metadata blocks from :class:`MemberMeta` (fetched and
    kept while :attr:`recording`), data from ranges fetched beforehand (:meth:`prefetch`) or,
    failing that, fetched as asked."""

    def __init__(self, loc: RemoteLocation, meta: MemberMeta):
        super().__init__()
        self.loc, self.meta = loc, meta
        self.source = location_source(loc)
        self._size, self._pos = loc.size, 0
        self.name = loc.describe()
        self.recording = True
        self.failure: ExperimentReadError | None = None  # a fetch failed (HDF5 hides why)
        self._data: list[tuple[int, bytes]] = []
        self._starts: list[int] = []

    def _block_len(self, i: int) -> int:
        return min(BLOCK, self._size - i * BLOCK)

    def _fetch(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        base = self.meta.data_start
        try:
            return self.source.read_ranges([(base + o, n) for o, n in ranges])
        except (OSError, ValueError) as exc:
            self.failure = ExperimentReadError(
                f"experiment {self.loc.sim_id}: {self.name}: reading from {self.loc.path} "
                f"failed ({exc}); check the connection and run again",
                sim_id=self.loc.sim_id, file=self.name)
            raise self.failure from exc

    def prefetch(self, ranges: list[tuple[int, int]]) -> None:
        """Fetch the member ranges ``(offset, size)`` h5py is about to read, in one call."""
        ranges = [(o, n) for o, n in ranges if n > 0 and 0 <= o and o + n <= self._size]
        if ranges:
            self._data = sorted(zip((o for o, _ in ranges), self._fetch(ranges), strict=True))
            self._starts = [o for o, _ in self._data]

    def readinto(self, buffer) -> int:  # noqa: ANN001 - any writable buffer
        n = min(len(buffer), self._size - self._pos)
        if n <= 0:
            return 0
        out = memoryview(buffer).cast("B")
        pos, end = self._pos, self._pos + n
        i = bisect.bisect_right(self._starts, pos) - 1
        if i >= 0:  # inside a prefetched data range?
            start, blob = self._data[i]
            if end <= start + len(blob):
                out[:n] = blob[pos - start:end - start]
                self._pos = end
                return n
        first, last = pos // BLOCK, (end - 1) // BLOCK
        blocks = self.meta.blocks
        missing = [i for i in range(first, last + 1) if i not in blocks]
        if missing and (not self.recording or n > RECORD_MAX):
            out[:n] = self._fetch([(pos, n)])[0]
            self._pos = end
            return n
        if missing:
            got = self._fetch([(i * BLOCK, self._block_len(i)) for i in missing])
            blocks.update(zip(missing, got, strict=True))
            self.meta.changed = True
        joined = b"".join(blocks[i] for i in range(first, last + 1))
        out[:n] = joined[pos - first * BLOCK:end - first * BLOCK]
        self._pos = end
        return n

    def close(self) -> None:
        if not self.closed:
            _save_meta(self.loc, self.meta)
        super().close()


def _first_read(loc: RemoteLocation, first: int = FIRST_READ) -> tuple[MemberMeta, bytes]:
    """The member's local header and its first ``first`` bytes, in one range; checked as
    locally. Returns what h5py's path keeps (whole blocks) and the member bytes read."""
    if loc.defect is not None:
        _corrupt(loc, loc.defect)
    src = location_source(loc)
    loose = loc.member is None  # a loose file: no local header, its bytes start at 0
    if not loose and loc.header_offset + LOCAL_HEADER.size > loc.archive_size:
        _corrupt(loc, "the central directory points past the end of the archive")
    head = 0 if loc.member is None else LOCAL_HEADER.size + len(loc.member.encode()) + NAME_SLACK
    want = min(head + first, loc.archive_size - loc.header_offset)
    try:
        blob = src.read(loc.header_offset, want)
        start = 0 if loose else checked_data_offset(loc, blob, lambda n: src.read(
            loc.header_offset + LOCAL_HEADER.size, n))
    except (OSError, ValueError) as exc:
        raise ExperimentReadError(
            f"experiment {loc.sim_id}: {loc.describe()}: reading from {loc.path} failed "
            f"({exc}); check the connection and run again",
            sim_id=loc.sim_id, file=loc.describe()) from exc
    if start + loc.size > loc.archive_size:
        _corrupt(loc, "the member's data runs past the end of the archive")
    meta = MemberMeta(start)
    have = blob[start - loc.header_offset:]
    for i in range(min(len(have), loc.size) // BLOCK + 1):  # complete blocks only
        piece = have[i * BLOCK:(i + 1) * BLOCK]
        if i * BLOCK < loc.size and len(piece) == min(BLOCK, loc.size - i * BLOCK):
            meta.blocks[i] = bytes(piece)
    meta.changed = True
    return meta, bytes(have[:loc.size])


def _verify_crc(loc: RemoteLocation, start: int) -> None:
    """The member's CRC-32 against the central directory's (a whole pass, once per process)."""
    key = loc.cache_key()
    if _verified.get(key):
        return
    src, crc = location_source(loc), 0
    for offset in range(0, loc.size, CRC_BLOCK):
        crc = crc32(src.read(start + offset, min(CRC_BLOCK, loc.size - offset)), crc)
    if (crc & 0xFFFFFFFF) != loc.crc:
        raise CorruptDataError(
            f"experiment {loc.sim_id}: {loc.describe()}: CRC-32 mismatch (the archive records "
            f"{loc.crc:08x}, the member's data gives {crc & 0xFFFFFFFF:08x}); the member is "
            "damaged", sim_id=loc.sim_id, file=loc.describe())
    _verified.put(key, True)


def _inflated(loc: RemoteLocation, start: int) -> MemoryFile:
    """A deflated member fetched whole and inflated (bounded as locally)."""
    declared = loc.file_size
    if declared > loc.size * DEFLATE_MAX_RATIO + DEFLATE_SLACK:
        _corrupt(loc, f"the member declares {declared} bytes from {loc.size} compressed ones, "
                      "more than deflate can produce (a zip bomb or a damaged header)")
    if declared > inflate_budget():
        _corrupt(loc, "the deflated member does not fit in the memory guideloom inflates in; "
                      "store it uncompressed")
    data = location_source(loc).read(start, loc.size)
    inflater = zlib.decompressobj(-15)
    try:
        out = inflater.decompress(data, declared + 1)
    except zlib.error as exc:
        _corrupt(loc, f"the member does not inflate ({exc})")
    if len(out) != declared or (loc.crc is not None and crc32(out) & 0xFFFFFFFF != loc.crc):
        _corrupt(loc, "the member inflates to other bytes than its header declares (size or "
                      "CRC-32)")
    return MemoryFile(memoryview(out))


def open_member(loc: RemoteLocation, verify_crc: bool = False,
                meta: MemberMeta | None = None) -> tuple[h5py.h5f.FileID, Any]:
    """Open the member at ``loc`` with h5py (low level) and return ``(fid, fileobj)``; keep
    ``fileobj`` until ``fid`` is closed, then close it (that saves learnt metadata).

    Raises:
        CorruptDataError: The member is damaged or not HDF5 (naming experiment and URL).
        ExperimentReadError: The server cannot be read.
    """
    meta = meta or _load_meta(loc) or _first_read(loc)[0]
    if verify_crc and loc.crc is not None:
        _verify_crc(loc, meta.data_start)
    fileobj: Any = RemoteMemberFile(loc, meta) if loc.stored else _inflated(loc, meta.data_start)
    fapl = file_access()
    fapl.set_fileobj_driver(h5py.h5fd.fileobj_driver, fileobj)
    try:
        fid = h5py.h5f.open(repr(fileobj).encode("ascii", "replace"), h5py.h5f.ACC_RDONLY,
                            fapl=fapl)
    except ExperimentReadError:
        fileobj.close()
        raise
    except (OSError, ValueError) as exc:
        fileobj.close()
        if getattr(fileobj, "failure", None) is not None:  # the network, not the bytes
            raise fileobj.failure from exc
        raise CorruptDataError(
            f"experiment {loc.sim_id}: {loc.describe()} is damaged or not an HDF5 file ({exc})",
            sim_id=loc.sim_id, file=loc.describe()) from exc
    return fid, fileobj


def open_remote(loc: RemoteLocation, verify_crc: bool = False) -> h5py.File:
    """The member as an ``h5py.File`` (closing it closes what this opened)."""
    fid, fileobj = open_member(loc, verify_crc)
    return MemberFile(fid, fileobj)


def _needed_ranges(fid: h5py.h5f.FileID, path: str, timesteps: Any) -> list[tuple[int, int]]:
    """The member byte ranges holding ``path``'s data (the chunks the steps touch); reading
    the chunk index here, while metadata is recorded, keeps it in the cache."""
    try:
        dsid = h5py.h5d.open(fid, path.encode())
    except (KeyError, ValueError, TypeError, OSError, RuntimeError):
        return []  # the record path words the error
    try:
        offset = dsid.get_offset()
        if offset is not None:
            return [(offset, dsid.get_storage_size())]
        dcpl = dsid.get_create_plist()
        if dcpl.get_layout() != h5py.h5d.CHUNKED:
            return []
        rows = _rows_of(timesteps, dsid.shape)
        step = dcpl.get_chunk()[0] if dsid.shape else 1
        out = []
        for i in range(dsid.get_num_chunks()):
            info = dsid.get_chunk_info(i)
            if info.byte_offset is None:
                continue
            first = info.chunk_offset[0] if info.chunk_offset else 0
            if rows is None or any(first <= r < first + step for r in rows):
                out.append((info.byte_offset, info.size))
        return out
    except (OSError, ValueError, RuntimeError):
        return []
    finally:
        dsid.close()


def _rows_of(timesteps: Any, shape: tuple[int, ...]) -> list[int] | None:
    if timesteps is None or not shape:
        return None
    n = shape[0]
    steps = [timesteps] if isinstance(timesteps, int) else list(timesteps)
    return [s % n for s in steps if -n <= s < n] if n else []


def read_remote_fields(reader: Any, loc: RemoteLocation, row: Mapping[str, Any],
                       into: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
    """The HDF5 fields of one record of ``reader``'s view from a remote member, as
    :meth:`RecordReader.read <guideloom.records.RecordReader.read>` reads them locally (the
    same checks and errors: this calls its field reader)."""
    record, learnt = _read_native(reader, loc, row, into)
    if record is not None:
        return record
    record = {}
    fid, fileobj = open_member(loc, reader.verify_crc, learnt)
    try:
        h5 = [vf for vf in reader.view.fields if vf.is_h5]
        if isinstance(fileobj, RemoteMemberFile):
            ranges = [r for vf in h5 for r in _needed_ranges(fid, vf.h5_path, vf.timesteps)]
            fileobj.recording = False
            fileobj.prefetch(ranges)
        fileno = fid.fileno
        for vf in h5:
            record[vf.alias] = reader._read_field(  # noqa: SLF001 - the same checks
                fid, fileno, None, vf, loc, row, None if into is None else into.get(vf.alias))
    except ExperimentReadError as exc:
        failure = getattr(fileobj, "failure", None)
        if failure is not None and exc is not failure:  # the network, not the bytes
            raise failure from exc
        raise
    finally:
        fid.close()
        fileobj.close()
    return record


def _view_key(reader: Any) -> tuple[str, ...]:
    """What a view reads from each member (its HDF5 paths and steps), as a key."""
    return tuple(f"{vf.h5_path}[{vf.timesteps!r}]" for vf in reader.view.fields if vf.is_h5)


def first_read_size(reader: Any, loc: RemoteLocation) -> int:
    """Member bytes to fetch with the local header when ``loc``'s metadata is not cached: the
    native reader's first block, or as far as the view's data reached in the members read
    before (at most :data:`SPECULATE_MAX`), plus :data:`REACH_MARGIN` of it for members whose
    chunks are somewhat larger, so that one range brings metadata and data (one round trip
    per record instead of two)."""
    reach = _reach.get(_view_key(reader))
    if reach is None:
        return NATIVE_FIRST_READ
    return max(NATIVE_FIRST_READ, min(reach + int(reach * REACH_MARGIN), loc.size))


def _learn_reach(reader: Any, reach: int) -> None:
    """Remember how far into a member the view's reads went (when small enough to fetch
    along with the metadata next time)."""
    if reach <= SPECULATE_MAX:
        key = _view_key(reader)
        _reach.put(key, max(reach, _reach.get(key) or 0))


class _Prefetched:
    """The archive's :class:`ByteSource` with the bytes of one earlier read served from
    memory (the member's first bytes, fetched with its local header); :attr:`reach` is the
    end of the furthest byte asked for, relative to ``start``."""

    def __init__(self, source: Any, start: int, blob: bytes):
        self.source, self.start, self.blob = source, start, blob
        self.name = source.name
        self.reach = 0

    def size(self) -> int:
        return self.source.size()

    def _held(self, offset: int, size: int) -> bytes | None:
        rel = offset - self.start
        self.reach = max(self.reach, rel + size)
        if 0 <= rel and rel + size <= len(self.blob):
            return self.blob[rel:rel + size]
        return None

    def read(self, offset: int, size: int) -> bytes:
        held = self._held(offset, size)
        return held if held is not None else self.source.read(offset, size)

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        out: list[bytes | None] = [self._held(o, n) for o, n in ranges]
        todo = [i for i, b in enumerate(out) if b is None]
        if todo:
            for i, blob in zip(todo, self.source.read_ranges([ranges[i] for i in todo]),
                               strict=True):
                out[i] = blob
        return out  # type: ignore[return-value]


def _native_entry(loc: RemoteLocation) -> tuple[int, Any] | None:
    """The cached ``(data_start, FileMeta)`` of ``loc``, when it fits the archive."""
    doc = process_cache().get(NATIVE_KIND, loc.cache_key())
    if doc is None:
        return None
    try:
        start = doc["data_start"]
        lowest, highest = loc.data_bounds()
        if (type(start) is not int or not lowest <= start <= highest
                or start + loc.size > loc.archive_size):
            return None
        return start, _native.FileMeta.from_json(doc["meta"])
    except (KeyError, TypeError, ValueError, _native.NativeError):
        return None


def _prefetch_fields(f: Any, fields: Any) -> None:
    """Every HDF5 field's metadata, then the chunks of those read whole, fetched together
    (:meth:`H5File.prefetch <guideloom.h5native.file.H5File.prefetch>`): a record costs as
    many round trips as its deepest field rather than the sum over its fields."""
    paths = [vf.h5_path for vf in fields if vf.is_h5]
    if len(paths) > 1:
        f.prefetch(paths, [vf.h5_path for vf in fields if vf.is_h5 and vf.timesteps is None])


def _read_native(reader: Any, loc: RemoteLocation, row: Mapping[str, Any],
                 into: Mapping[str, np.ndarray] | None) -> tuple[dict[str, Any] | None,
                                                                MemberMeta | None]:
    """The view's HDF5 fields through :mod:`guideloom.h5native`: ``(record, None)``, or
    ``(None, meta)`` to read with h5py (a deflated member, CRC checks, an unsupported
    feature or any error: h5py words those; ``meta`` is what the first read learnt, so h5py
    does not fetch it again). Counted in :func:`guideloom.records.native_stats`."""
    if not loc.stored or reader.verify_crc or loc.defect is not None or not reader.native:
        return None, None
    cached = _native_entry(loc)
    meta = None
    try:
        if cached is not None:
            start, file_meta = cached
            blob = b""  # nothing held: the wrapper only measures how far the reads reach
        else:
            meta, blob = _first_read(loc, first_read_size(reader, loc))
            start, file_meta = meta.data_start, None
        src = _Prefetched(location_source(loc), start, blob)
        f = _native.open_file(src, base=start, size=loc.size, meta=file_meta,
                              first_block=NATIVE_FIRST_READ)
        _prefetch_fields(f, reader.view.fields)
        record: dict[str, Any] = {}
        for vf in reader.view.fields:
            if vf.is_h5:
                record[vf.alias] = reader._native_field(  # noqa: SLF001 - the same checks
                    f, vf, loc, None if into is None else into.get(vf.alias))
    except ExperimentReadError:  # the network, the zip or guideloom's own checks: as locally
        raise
    except NativeDamageError as exc:  # h5py would read made-up values without an error
        _corrupt(loc, str(exc))
    except Exception as exc:  # noqa: BLE001 - NativeUnsupported and any surprise: h5py decides
        NATIVE_STATS.fell_back(exc)
        return None, meta
    _learn_reach(reader, src.reach)
    _keep_native(loc, start, file_meta, f)
    NATIVE_STATS.read_natively()
    return record, None


def _keep_native(loc: RemoteLocation, start: int, cached: Any, f: Any) -> None:
    """Cache what ``f`` parsed of ``loc``'s metadata, unless the cache already had it all."""
    if cached is None or len(f.meta.datasets) != len(cached.datasets):
        process_cache().put(NATIVE_KIND, loc.cache_key(),
                            {"data_start": start, "meta": f.meta.to_json()})


def native_datasets(reader: Any, loc: RemoteLocation
                    ) -> dict[str, tuple[tuple[int, ...], np.dtype]] | None:
    """``{h5_path: (shape, dtype)}`` of the view's HDF5 fields in the member at ``loc``, from
    its metadata read by :mod:`guideloom.h5native`: one range (local header and first block)
    instead of h5py's several, and the parsed metadata is cached, so the record's own read
    fetches only its data (for :meth:`RecordReader.shapes
    <guideloom.records.RecordReader.shapes>`, which checks them). ``None`` for h5py to
    describe it (a deflated member, CRC checks, an unsupported feature or any error: h5py
    words those)."""
    if not loc.stored or reader.verify_crc or loc.defect is not None or not reader.native:
        return None
    cached = _native_entry(loc)
    out: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    try:
        if cached is not None:
            start, file_meta = cached
            src: Any = location_source(loc)
        else:
            meta, blob = _first_read(loc, NATIVE_FIRST_READ)
            start, file_meta = meta.data_start, None
            src = _Prefetched(location_source(loc), start, blob)
        f = _native.open_file(src, base=start, size=loc.size, meta=file_meta,
                              first_block=NATIVE_FIRST_READ)
        for vf in reader.view.fields:
            if vf.h5_path is not None:
                info = f.dataset(vf.h5_path)
                out[vf.h5_path] = (tuple(info.shape), info.np_dtype)
    except ExperimentReadError:  # the network or the zip: as for h5py
        raise
    except Exception:  # noqa: BLE001 - unsupported, damaged, absent: h5py decides and words it
        return None
    _keep_native(loc, start, file_meta, f)
    return out
