"""The HDF5 layer: one experiment's HDF5 file opened natively or with h5py, over any byte source.

One place decides how an HDF5 span (:class:`~guideloom.read.zipmember.Span`) is read:

- :func:`open_native` reads it with :mod:`guideloom.h5native` (stored members and loose
  files; an inflated member goes to h5py);
- :func:`open_h5py` opens it with h5py: a whole local file by name (the sec2 driver, whose
  handle is the descriptor for the :mod:`guideloom.fastread` chunk path), a stored member
  in place through :class:`~guideloom.read.fileobj.SpanFile` (local: buffered ``pread`` and
  the fast chunk path on the archive's descriptor), an inflated member from memory.

On a source with ``high_latency`` (a network source) the same calls save round trips: the
member's data offset and parsed metadata are kept in the on-disk cache
(:mod:`guideloom.read.metacache`); the first read brings the local header, the first metadata
block and, once a view's reach is known, its data along (:func:`first_read_size`); h5py reads
metadata in cached blocks (:class:`~guideloom.read.wrappers.MetadataBlocks`) and the chunks in
one ``read_many`` call. The confinement checks (external links, external raw storage, virtual
datasets), the chunk index's shared bytes (:func:`check_chunks_apart`, the h5py half of the
native reader's check), the declared-size check and the timestep selection are here once, for
both readers.
"""

from __future__ import annotations

import io
import logging
import math
import os
import re
import threading
import zipfile
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
import psutil

from guideloom import h5native as native
from guideloom.errors import CorruptDataError, ExperimentReadError, MissingFieldError
from guideloom.fastread.chunks import Chunk, RawSource, chunk_index, first_overlap
from guideloom.read.access import data_file
from guideloom.read.byte_source import ByteSource, is_remote, source_for
from guideloom.read.fileobj import SpanFile
from guideloom.read.handles import ArchiveHandles
from guideloom.read.metacache import process_cache
from guideloom.read.wrappers import MemberMeta, MetadataBlocks, Prefetched
from guideloom.read.zipmember import Span, corrupt, data_bounds, open_span, verify_crc
from guideloom.runtime.caches import BoundedCache, cache, on_clear

if TYPE_CHECKING:
    from guideloom.read.types import Located as Location

logger = logging.getLogger(__name__)

FIRST_READ = 8 << 10  # member bytes fetched with the local header for h5py (superblock, root)
NATIVE_FIRST_READ = 16 << 10  # ... for the native reader (its first metadata block)
META_KIND = "h5-metadata"
NATIVE_KIND = "h5native-meta"
SPECULATE_MAX = 256 << 10  # member bytes a first read may take to bring a view's data along
REACH_MARGIN = 0.125  # ... and this share more (compressed chunks differ in size)
LARGE_FIELD_BYTES = 1 << 30  # fields this large are checked against the memory available
_MEMBER_BUFFER = 1 << 16  # a C-level read buffer before a local member: HDF5 reads small pieces
# HDF5's words for a name that is not there (as opposed to metadata it cannot decode)
_ABSENT = re.compile(r"doesn't exist|does not exist|not found", re.IGNORECASE)
_reach: BoundedCache[tuple[str, ...], int] = cache("remote_view_reach")

Steps = None | int | tuple[int, ...]


# --- the h5py.File that owns its file object -------------------------------------------------
class MemberFile(h5py.File):  # type: ignore[misc,unused-ignore]  # h5py: no hints (strict)
    """An ``h5py.File`` read from a file object that it owns: closing the File (``close()`` or
    the end of a ``with`` block) closes that file object too.

    Zip members are read through a :class:`~guideloom.read.fileobj.SpanFile` (or an in-memory
    copy of a deflated member); the archive's descriptor itself stays with
    :class:`~guideloom.read.handles.ArchiveHandles`.

    Attributes:
        fileobj: The file object the HDF5 bytes are read from.
    """

    def __init__(self, fid: h5py.h5f.FileID, fileobj: io.IOBase) -> None:
        super().__init__(fid)
        self.fileobj = fileobj

    def close(self) -> None:
        """Close the HDF5 file, then the file object it was read from."""
        try:
            super().close()
        finally:
            self.fileobj.close()

    def __exit__(self, *exc: object) -> None:
        self.close()


def file_access(driver: str | None = None) -> h5py.h5p.PropFAID:
    """A new file-access property list as ``h5py.File`` makes it (``sec2``: that driver)."""
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_EARLIEST, h5py.h5f.LIBVER_LATEST)  # as h5py.File
    if driver == "sec2":
        fapl.set_fapl_sec2()
    return fapl


_SEC2_ACCESS = file_access("sec2")  # sec2: the file's VFD handle is its descriptor
_BASE_ACCESS = file_access()


class _MemberAccess(threading.local):
    """One file-access list per thread, pointed at each member's file object in turn: HDF5
    copies the list when it opens a file, and copying our own costs more than re-pointing it."""

    def __init__(self) -> None:
        self.fapl = _BASE_ACCESS.copy()

    def pointed_at(self, fileobj: io.IOBase) -> h5py.h5p.PropFAID:
        self.fapl.set_fileobj_driver(h5py.h5fd.fileobj_driver, fileobj)
        return self.fapl


_MEMBER_ACCESS = _MemberAccess()


def _forget_member_access() -> None:
    """Drop every thread's file-access list: each still points at the last member it opened,
    keeping that member's archive descriptor in use (see :func:`guideloom.clear_caches`)."""
    global _MEMBER_ACCESS
    _MEMBER_ACCESS = _MemberAccess()


on_clear("member_file_access", _forget_member_access)


# --- the metadata a high-latency source keeps -----------------------------------------------
def _cache_key(loc: Location) -> str | None:
    return loc.cache_key()


def _archive_size(loc: Location, source: ByteSource) -> int:
    return loc.archive_size or source.size()


def _load_meta(loc: Location, source: ByteSource) -> MemberMeta | None:
    key = _cache_key(loc)
    if key is None:
        return None
    return MemberMeta.from_json(process_cache().get(META_KIND, key), data_bounds(loc), loc.size,
                                _archive_size(loc, source))


def _save_meta(loc: Location, meta: MemberMeta) -> None:
    key = _cache_key(loc)
    if meta.changed and key is not None:
        process_cache().put(META_KIND, key, meta.to_json())
        meta.changed = False


def native_entry(loc: Location, source: ByteSource) -> tuple[int, native.FileMeta] | None:
    """The cached ``(data_start, FileMeta)`` of ``loc``, when it fits the archive."""
    key = _cache_key(loc)
    doc = None if key is None else process_cache().get(NATIVE_KIND, key)
    if doc is None:
        return None
    try:
        start = doc["data_start"]
        lowest, highest = data_bounds(loc)
        if (type(start) is not int or not lowest <= start <= highest
                or start + loc.size > _archive_size(loc, source)):
            return None
        return start, native.FileMeta.from_json(doc["meta"])
    except (KeyError, TypeError, ValueError, native.NativeError):
        return None


def _keep_native(loc: Location, start: int, cached: Any, f: native.H5File) -> None:
    """Cache what ``f`` parsed of ``loc``'s metadata, unless the cache already had it all."""
    key = _cache_key(loc)
    if key is not None and (cached is None or len(f.meta.datasets) != len(cached.datasets)):
        process_cache().put(NATIVE_KIND, key, {"data_start": start, "meta": f.meta.to_json()})


def first_read_size(view_key: tuple[str, ...], loc: Location) -> int:
    """Member bytes to fetch with the local header when ``loc``'s metadata is not cached: the
    native reader's first block, or as far as the view's data reached in the members read
    before (at most :data:`SPECULATE_MAX`), plus :data:`REACH_MARGIN` of it for members whose
    chunks are somewhat larger, so that one range brings metadata and data (one round trip
    per record instead of two)."""
    reach: int | None = _reach.get(view_key)
    if reach is None:
        return NATIVE_FIRST_READ
    return max(NATIVE_FIRST_READ, min(reach + int(reach * REACH_MARGIN), loc.size))


def _learn_reach(view_key: tuple[str, ...], reach: int) -> None:
    """Remember how far into a member the view's reads went (when small enough to fetch
    along with the metadata next time)."""
    if reach <= SPECULATE_MAX:
        _reach.put(view_key, max(reach, _reach.get(view_key) or 0))


# --- native ---------------------------------------------------------------------------------
class NativeOpen:
    """One HDF5 file open with :mod:`guideloom.h5native` (:attr:`file`); :meth:`done` after a
    successful read keeps what it learnt, :meth:`close` always."""

    def __init__(self, loc: Location, span: Span, file: native.H5File, slow: bool,
                 cached: Any, reader_source: Any):
        self.loc, self.span, self.file, self.slow = loc, span, file, slow
        self._cached, self._source = cached, reader_source

    def learnt(self) -> MemberMeta | None:
        """What the first read brought, for the h5py path when the native one gives up."""
        if not self.slow or not self.span.held:
            return None
        meta = MemberMeta(self.span.base)
        meta.keep_first(self.span.held, self.loc.size)
        return meta

    def done(self, view_key: tuple[str, ...] | None) -> None:
        if self.slow:
            if view_key is not None:
                _learn_reach(view_key, self._source.reach)
            _keep_native(self.loc, self.span.base, self._cached, self.file)

    def close(self) -> None:
        self.span.close()


def open_native(loc: Location, handles: ArchiveHandles | None = None, *, verify: bool = False,
                view_key: tuple[str, ...] | None = None) -> NativeOpen | None:
    """``loc`` opened with the native reader; ``None`` for an inflated member, or a remote one
    whose CRC-32 is to be checked (h5py reads those).

    Raises:
        CorruptDataError: The zip member is damaged (local header, CRC-32, listed defect).
        OSError: The bytes cannot be read.
    """
    if not loc.stored:
        if loc.defect is not None:
            corrupt(loc, loc.defect)
        return None
    source = source_for(loc, handles)
    slow = source.high_latency
    if slow and verify:  # a remote member to check is read by h5py over cached blocks
        source.close()
        return None
    cached = native_entry(loc, source) if slow else None
    if cached is not None:
        span = open_span(loc, source, verify=verify, start=cached[0])
    else:
        first = first_read_size(view_key or (), loc) if slow else 0
        span = open_span(loc, source, verify=verify, first=first)
    try:
        if slow:
            reader_source: Any = Prefetched(span.source, span.base, span.held)
            f = native.open_file(reader_source, base=span.base, size=span.size,
                                 meta=None if cached is None else cached[1],
                                 first_block=NATIVE_FIRST_READ)
        else:
            reader_source = span.source
            f = native.open_file(reader_source, span.base, span.size)
    except BaseException:
        span.close()
        raise
    return NativeOpen(loc, span, f, slow, None if cached is None else cached[1], reader_source)


def prefetch_fields(f: native.H5File, paths: Sequence[str], whole: Sequence[str]) -> None:
    """Every field's metadata, then the chunks of those read whole, fetched together
    (:meth:`H5File.prefetch <guideloom.h5native.file.H5File.prefetch>`): a record costs as
    many round trips as its deepest field rather than the sum over its fields."""
    if len(paths) > 1:
        f.prefetch(list(paths), list(whole))


# --- h5py -----------------------------------------------------------------------------------
class H5pyOpen:
    """One HDF5 file open with h5py at the library level: :attr:`fid`, the fast-path
    :attr:`raw` source (``None`` when its bytes are not a local descriptor) and the file
    object h5py reads (``None`` for a whole file opened by name)."""

    def __init__(self, loc: Location, fid: h5py.h5f.FileID, raw: RawSource | None,
                 fileobj: io.IOBase | None, blocks: MetadataBlocks | None = None):
        self.loc, self.fid, self.raw, self.fileobj, self._blocks = loc, fid, raw, fileobj, blocks

    @property
    def failure(self) -> ExperimentReadError | None:
        """A read of the source that failed (HDF5 hides why), if one did."""
        return None if self._blocks is None else self._blocks.failure

    def prefetch(self, wanted: Iterable[tuple[str, Steps]]) -> None:
        """On a high-latency source: fetch the data of ``(h5_path, timesteps)`` in one call
        (reading the chunk indexes now, while metadata is recorded and kept)."""
        if self._blocks is not None:
            ranges = [r for path, steps in wanted for r in _needed_ranges(self.fid, path, steps)]
            self._blocks.recording = False
            self._blocks.prefetch(ranges)

    def file(self) -> h5py.File:
        """An ``h5py.File`` owning this open file (closing it closes everything)."""
        return h5py.File(self.fid) if self.fileobj is None else MemberFile(self.fid,
                                                                          self.fileobj)

    def close(self) -> None:
        try:
            self.fid.close()
        finally:
            if self.fileobj is not None:
                self.fileobj.close()


def local_path(loc: Location) -> str | None:
    """The path of ``loc`` when it is a whole local file (h5py opens it by name); not when its
    bytes are held in memory (read from there: the bytes its digest was taken of)."""
    return loc.path if loc.member is None and loc.held is None and not is_remote(loc.path) \
        else None


def open_h5py(loc: Location, handles: ArchiveHandles | None = None, *, verify: bool = False,
              learnt: MemberMeta | None = None) -> H5pyOpen:
    """``loc`` opened with h5py (see the module docstring); ``learnt`` is what a native
    attempt's first read brought.

    Raises:
        CorruptDataError: The member or file is damaged or not HDF5; names the id and file.
        ExperimentReadError: The file vanished or cannot be read.
    """
    flags = h5py.h5f.ACC_RDONLY
    try:
        path = local_path(loc)
        if path is not None:
            with data_file(path):
                fid = h5py.h5f.open(os.fsencode(path), flags, fapl=_SEC2_ACCESS)
            return H5pyOpen(loc, fid, RawSource.checked(fid.get_vfd_handle()), None)
        fileobj, raw, blocks = _member_fileobj(loc, handles, verify, learnt)
        name = repr(fileobj).encode("ascii", "replace")  # as h5py.File names file objects
        if blocks is None and raw is None:  # a private list: the thread's would keep it alive
            fapl = _BASE_ACCESS.copy()
            fapl.set_fileobj_driver(h5py.h5fd.fileobj_driver, fileobj)
        else:
            fapl = _MEMBER_ACCESS.pointed_at(fileobj)
        try:
            return H5pyOpen(loc, h5py.h5f.open(name, flags, fapl=fapl), raw, fileobj, blocks)
        except BaseException as exc:
            fileobj.close()
            if blocks is not None and blocks.failure is not None:  # the network, not the bytes
                raise blocks.failure from exc
            raise
    except (ExperimentReadError, PermissionError):
        raise  # a file we may not read is named (guideloom.read.access), never "damaged"
    except FileNotFoundError as exc:
        raise ExperimentReadError(
            f"experiment {loc.sim_id}: file {loc.describe()} disappeared ({exc})",
            sim_id=loc.sim_id, file=loc.describe(),
        ) from exc
    except (OSError, zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise CorruptDataError(
            f"experiment {loc.sim_id}: {loc.describe()} is damaged or not an HDF5 file ({exc})",
            sim_id=loc.sim_id, file=loc.describe(),
        ) from exc


def _member_fileobj(loc: Location, handles: ArchiveHandles | None, verify: bool,
                    learnt: MemberMeta | None
                    ) -> tuple[io.IOBase, RawSource | None, MetadataBlocks | None]:
    """The file object h5py reads the member (or remote loose file) through."""
    source = source_for(loc, handles)
    if not source.high_latency:
        span = open_span(loc, source, verify=verify)
        fd = span.source.fd
        fileobj = SpanFile(span.source, span.base, span.size, loc.describe())
        if span.inflated:
            return fileobj, None, None
        raw = RawSource.checked(fd, span.base, span.size) if fd is not None else None
        return io.BufferedReader(fileobj, _MEMBER_BUFFER), raw, None
    meta = learnt or _load_meta(loc, source)
    if meta is None:
        span = open_span(loc, source, verify=False, first=FIRST_READ)
        meta = MemberMeta(span.base)
        meta.keep_first(span.held, loc.size)
    else:
        span = open_span(loc, source, verify=False, start=meta.data_start)
    if span.inflated:
        return SpanFile(span.source, span.base, span.size, loc.describe()), None, None
    if verify:
        verify_crc(span.source, span.base, loc)
    blocks = MetadataBlocks(span.source, meta, loc.size, loc.describe(), loc.sim_id)
    return _SavingSpanFile(blocks, loc), None, blocks


class _SavingSpanFile(SpanFile):
    """A member read through cached metadata blocks: closing it keeps what was learnt."""

    def __init__(self, blocks: MetadataBlocks, loc: Location):
        super().__init__(blocks, blocks.meta.data_start, loc.size, loc.describe())
        self._meta_of = (loc, blocks.meta)

    def close(self) -> None:
        if not self.closed:
            _save_meta(*self._meta_of)
        super().close()


def _needed_ranges(fid: h5py.h5f.FileID, path: str, timesteps: Steps) -> list[tuple[int, int]]:
    """The member byte ranges holding ``path``'s data (the chunks the steps touch)."""
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
        rows = _rows_touched(timesteps, dsid.shape)
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


def _rows_touched(timesteps: Steps, shape: tuple[int, ...]) -> list[int] | None:
    if timesteps is None or not shape:
        return None
    n = shape[0]
    steps = [timesteps] if isinstance(timesteps, int) else list(timesteps)
    return [s % n for s in steps if -n <= s < n] if n else []


def open_h5_file(loc: Location, handles: ArchiveHandles | None = None, *,
                 verify_crc: bool = False) -> h5py.File:
    """The HDF5 file at ``loc`` as an ``h5py.File`` (closing it closes what this opened).

    Raises:
        CorruptDataError: The member or file is damaged or not HDF5.
        ExperimentReadError: The file vanished or cannot be read.
    """
    return open_h5py(loc, handles, verify=verify_crc).file()


# --- the timestep selection and the checks, for both readers --------------------------------
def selected_shape(shape: tuple[int, ...], steps: Steps) -> tuple[int, ...]:
    """The shape the rows ``steps`` read of a dataset of ``shape`` (an int step keeps the
    axis, of length 1: the value is the row)."""
    if steps is None or not shape:
        return shape
    return (1 if isinstance(steps, int) else len(steps), *shape[1:])


def view_shape(shape: tuple[int, ...], steps: Steps) -> tuple[int, ...]:
    """The shape of a field: an int step drops the first axis, a tuple selects rows."""
    if isinstance(steps, int):
        return shape[1:]
    if steps is not None:
        return (len(steps), *shape[1:])
    return shape


def take_steps(read_rows: Callable[[Any], np.ndarray], steps: int | tuple[int, ...],
               n: int) -> np.ndarray:
    """The rows ``steps`` of a dataset of ``n`` rows, read as increasing unique rows by
    ``read_rows`` (as h5py wants them) and put back in the order asked.

    Raises:
        IndexError: A step is outside ``[-n, n)``.
    """
    if isinstance(steps, int):
        if not -n <= steps < n:
            raise IndexError(f"step {steps} with {n} steps")
        return np.asarray(read_rows([steps % n])[0])
    if any(not -n <= s < n for s in steps):
        raise IndexError(f"steps {list(steps)} with {n} steps")
    unique, inverse = np.unique(np.asarray(steps) % max(n, 1), return_inverse=True)
    return read_rows(unique)[inverse]


def check_self_contained(dsid: h5py.h5d.DatasetID, fileno: Any, loc: Location,
                         path: str) -> h5py.h5p.PropDCID | None:
    """Raise unless the dataset's data is inside its own file; return its creation property
    list when it was needed (the fast path reuses it), else ``None``.

    Refused, as :class:`CorruptDataError`: a dataset reached through an external link (it lives
    in another file, ``fileno`` is the experiment's), a virtual dataset (its data is read from
    other files, or is the fill value when they cannot be opened) and a dataset with external
    raw storage (its bytes are any file the HDF5 file names, ``/etc/passwd`` included). A
    contiguous dataset with an address in the file is neither (one cheap call); others need the
    property list (a few microseconds, shared with the fast path).
    """
    why = None
    dcpl = None
    if dsid.fileno != fileno:
        why = "is an external link to another file"
    elif dsid.get_offset() is None:  # not contiguous in this file: chunked, compact, or not ours
        dcpl = dsid.get_create_plist()
        layout = dcpl.get_layout()
        if layout == h5py.h5d.VIRTUAL:
            why = "is a virtual dataset (its data comes from other files)"
        elif layout == h5py.h5d.CONTIGUOUS and dcpl.get_external_count():
            why = "stores its data in external files"
    if why is not None:
        raise CorruptDataError(
            f"experiment {loc.sim_id}: {loc.describe()}: HDF5 dataset {path!r} {why}; guideloom "
            "reads only data stored inside the experiment's own file: store the data in the "
            "file (e.g. h5repack or h5py copy) or leave the experiment out",
            sim_id=loc.sim_id, file=loc.describe(), h5_path=path,
        )
    return dcpl


def check_chunks_apart(dsid: h5py.h5d.DatasetID, dcpl: h5py.h5p.PropDCID | None,
                       loc: Location, path: str) -> list[Chunk] | None:
    """The chunk index of a chunked dataset (for the fast path's plan), refused when two of
    its entries share bytes; ``None`` for another layout (``dcpl`` as
    :func:`check_self_contained` returned it: ``None`` for a contiguous dataset).

    An index entry pointing at another chunk's bytes (its own coordinates kept) is read by
    HDF5 without an error: that chunk's values served twice. The native reader refuses it
    (:func:`guideloom.h5native.indexes.disjoint`); this is the same check on the h5py path
    (``GUIDELOOM_NATIVE=0``, or a filter the native reader lacks, e.g. LZF), over h5py's
    ``chunk_iter`` (under 1 ms for a 2000 x 3200 scan's 512 chunks; the fast path's plan
    takes the index from here, so it is not listed twice).

    Raises:
        CorruptDataError: Naming the experiment, the file, the dataset and both chunks.
    """
    if dcpl is None or dcpl.get_layout() != h5py.h5d.CHUNKED:
        return None
    chunks = chunk_index(dsid)
    pair = first_overlap([(c.address, c.size) for c in chunks])
    if pair is None:
        return chunks
    a, b = chunks[pair[0]], chunks[pair[1]]
    raise CorruptDataError(
        f"experiment {loc.sim_id}: {loc.describe()}: HDF5 dataset {path!r}: the bytes of chunk "
        f"{b.offset} (at {b.address}, {b.size} bytes) overlap those of chunk {a.offset} (at "
        f"{a.address}, {a.size} bytes): one chunk index entry points at another chunk's bytes "
        "(HDF5 would serve its values twice); the file is damaged: get a fresh copy, or leave "
        "the experiment out", sim_id=loc.sim_id, file=loc.describe(), h5_path=path,
    )


def check_declared_size(shape: tuple[int, ...], dtype: np.dtype, loc: Location,
                        path: str | None) -> None:
    """Raise :class:`CorruptDataError` when one record's field declares more bytes than this
    machine has memory (a damaged file, or a field that is not per experiment)."""
    nbytes = math.prod(shape) * dtype.itemsize  # exact Python ints: no overflow
    if nbytes < LARGE_FIELD_BYTES:
        return  # the common case: no system call
    available = psutil.virtual_memory().available
    if nbytes > available:
        raise CorruptDataError(
            f"experiment {loc.sim_id}: {loc.describe()}: HDF5 dataset {path!r} declares shape "
            f"{tuple(shape)} ({nbytes / 2**30:.1f} GiB), more than the {available / 2**30:.1f} "
            "GiB of memory available; the file is damaged or the field is not per experiment",
            sim_id=loc.sim_id, file=loc.describe(), h5_path=path,
        )


def lookup(f: h5py.File, path: str, loc: Location, missing: str) -> h5py.Dataset:
    """``f[path]`` as a Dataset; an absent path is a :class:`MissingFieldError` (``missing``
    says which field and what to do), a path through an external link or metadata HDF5
    cannot decode on the way (object headers, B-trees, heaps) a :class:`CorruptDataError`."""
    try:
        obj = f[path]
    except (KeyError, RuntimeError, ValueError, OSError) as exc:
        why = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        link = external_link_on(f, path)
        if link is not None:
            raise CorruptDataError(
                f"experiment {loc.sim_id}: {loc.describe()}: HDF5 path {path!r} goes "
                f"through {link!r}, an external link to another file; guideloom reads only "
                "data stored inside the experiment's own file",
                sim_id=loc.sim_id, file=loc.describe(), h5_path=path,
            ) from None
        if isinstance(exc, KeyError) and _ABSENT.search(str(why)) and absent(f, path):
            raise MissingFieldError(
                f"experiment {loc.sim_id}: {loc.describe()} has no HDF5 dataset {path!r} "
                f"{missing}", sim_id=loc.sim_id, file=loc.describe(), h5_path=path,
            ) from None
        raise CorruptDataError(
            f"experiment {loc.sim_id}: {loc.describe()}: HDF5 path {path!r} cannot be "
            f"opened; the file's metadata is damaged ({why})",
            sim_id=loc.sim_id, file=loc.describe(), h5_path=path,
        ) from exc
    if not isinstance(obj, h5py.Dataset):
        raise MissingFieldError(
            f"experiment {loc.sim_id}: {loc.describe()}: {path!r} is a group, not a dataset",
            sim_id=loc.sim_id, file=loc.describe(), h5_path=path,
        )
    return obj


def external_link_on(f: h5py.File, path: str) -> str | None:
    """The first component of ``path`` that is an external link, or ``None`` (read without
    following any link; only on the error path)."""
    group: h5py.Group = f
    parts = [p for p in path.split("/") if p]
    try:
        for i, part in enumerate(parts):
            link = group.get(part, getlink=True)
            if isinstance(link, h5py.ExternalLink):
                return "/".join(parts[:i + 1])
            if link is None or i == len(parts) - 1:
                return None
            child = group[part]
            if not isinstance(child, h5py.Group):
                return None
            group = child
    except (KeyError, RuntimeError, ValueError, OSError):
        return None
    return None


def absent(f: h5py.File, path: str) -> bool:
    """Whether ``path`` is cleanly absent: walking it from the root meets a group without the
    next name, or an object that is not a group, and every step reads without an error."""
    group: h5py.Group = f
    parts = [p for p in path.split("/") if p]
    try:
        for i, part in enumerate(parts):
            if not group.id.links.exists(part.encode()):
                return True
            if i == len(parts) - 1:
                return False
            child = group[part]
            if not isinstance(child, h5py.Group):
                return True
            group = child
    except (KeyError, RuntimeError, ValueError, OSError):
        return False
    return False
