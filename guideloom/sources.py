"""Where each experiment's HDF5 file lives, and opening it from either layout.

Two layouts are found: loose files (``data_dir/h5/0042.h5`` or ``data_dir/0042.h5``) and members
of zip archives (``concave.zip::0042.h5``, ``h5/sample.zip::0042.h5``, ``h5/258864.zip``; see
:func:`archive_paths`). Loose files win over members for the same id.

Zip archives are read through their central directory only. A member stored uncompressed (as the
published archives store them: HDF5 compresses inside) is one contiguous byte range of the archive,
so h5py reads it in place through :class:`ByteRangeFile` with ``os.pread``: nothing is copied up
front and reading one small dataset of a 10 MB member costs what it costs from a loose file.
Archive file descriptors stay open across records (:class:`ArchiveHandles`).

Integrity: a stored member read in part is trusted (its CRC-32 covers the whole member, and
reading all of it would cost a pass over data the view does not need) unless ``verify_crc=True``
asks for a check of every member before its data is used (:mod:`guideloom.zipcrc`). A deflated
member is inflated whole, and zipfile checks its CRC-32 then.

Zip member names are never used as paths: only their base name is matched against the member
pattern to learn the experiment id. Two members naming one id (``3.h5`` and ``0003.h5``) are
refused, as two loose files are. A member whose local header names another member (a central
directory entry pointing at someone else's bytes) or whose byte range overlaps another member's
is refused with :class:`~guideloom.errors.CorruptDataError` naming ``archive::member`` when it
is opened (``on_error="skip"`` skips it).
"""

from __future__ import annotations

import io
import os
import threading
import zipfile
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

import h5py
import psutil

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

from guideloom import os_support
from guideloom.caches import BoundedCache, cache, on_clear
from guideloom.errors import (
    CorruptDataError,
    ExperimentNotFoundError,
    ExperimentReadError,
)
from guideloom.fastread.chunks import RawSource
from guideloom.read.locations import Location as Location  # re-exported: its home is guideloom.read
from guideloom.read.scan import (  # the scanning half, re-exported: it lives in guideloom.read
    LOOSE_SUBDIR,  # noqa: F401
    add_member_locations,  # noqa: F401
    archive_members,  # noqa: F401
    archive_paths,  # noqa: F401
    id_parser,  # noqa: F401
    scan_locations,
)
from guideloom.read.zipdir import (
    LOCAL_HEADER,
    ZipFormatError,
    on_archive_changed,
    parse_local_header,
)
from guideloom.zipcrc import verify_member

if TYPE_CHECKING:
    from guideloom.croissant import Dataset, DatasetSpec

_NAME_READ = 256  # name bytes read with the local header at once (a longer one costs a read more)
DEFLATE_MAX_RATIO = 1032  # deflate's largest expansion (258-byte matches from 2-bit codes)
DEFLATE_SLACK = 1 << 16  # … plus a margin for tiny members
INFLATE_MEMORY_SHARE = 0.5  # of the memory available, for one deflated member in memory
INFLATE_BLOCK = 16 << 20  # bytes inflated per read


class _SeekableReader(io.RawIOBase):
    """A read-only, seekable file object of ``_size`` bytes; subclasses supply ``readinto``."""

    _size: int
    _pos: int = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._pos
        elif whence == io.SEEK_END:
            offset += self._size
        self._pos = offset if offset > 0 else 0
        return self._pos


class ByteRangeFile(_SeekableReader):
    """A read-only file object over ``[start, start + size)`` of an open descriptor.

    Uses ``os.pread``, so several instances may share one descriptor across threads. Closing
    it releases ``lease`` (the archive descriptor's use by this file), if given.
    """

    def __init__(self, fd: int, start: int, size: int, name: str = "",
                 lease: ArchiveLease | None = None):
        super().__init__()
        self._fd, self._start, self._size, self._pos = fd, start, size, 0
        self.name = name
        self._lease = lease

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self._lease is not None:
                self._lease.release()

    def readinto(self, buffer) -> int:  # noqa: ANN001 - any writable buffer
        want = min(len(buffer), self._size - self._pos)
        if want <= 0:
            return 0
        view = memoryview(buffer).cast("B")[:want]
        got = os_support.preadinto(self._fd, view, self._start + self._pos)
        self._pos += got
        return got


# HDF5 reads metadata in many small pieces, mostly close together: a C-level read buffer in
# front of the member serves them without a Python call or a system call each.
_MEMBER_BUFFER = 1 << 16


class _ArchiveFd:
    """One open archive descriptor and the open files reading through it: closed once it has
    left its cache (:meth:`retire`) and the last of them is done (:meth:`release`)."""

    __slots__ = ("_lock", "closed", "fd", "retired", "users")

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        self._lock = threading.Lock()
        self.users = 0
        self.retired = self.closed = False

    def acquire(self) -> bool:
        """Count one more user; ``False`` when the descriptor has left its cache."""
        with self._lock:
            if self.retired:
                return False
            self.users += 1
            return True

    def release(self) -> None:
        """One user is done (the descriptor closes if it is retired and was the last)."""
        with self._lock:
            self.users -= 1
            last = self.retired and self.users <= 0 and not self.closed
            self.closed = self.closed or last
        if last:
            os.close(self.fd)

    def retire(self) -> None:
        """The descriptor left its cache: close it now, or when its last user is done."""
        with self._lock:
            self.retired = True
            now = self.users <= 0 and not self.closed
            self.closed = self.closed or now
        if now:
            os.close(self.fd)

    def forget_after_fork(self) -> None:
        """In a forked child: close this process's copy when no inherited file uses it (the
        parent's descriptor is its own and stays open)."""
        self._lock = threading.Lock()
        self.retire()


class ArchiveLease:
    """The use of one archive descriptor by one open file; :meth:`release` once (idempotent)."""

    __slots__ = ("_entry", "fd")

    def __init__(self, entry: _ArchiveFd) -> None:
        self._entry: _ArchiveFd | None = entry
        self.fd = entry.fd

    def release(self) -> None:
        entry, self._entry = self._entry, None
        if entry is not None:
            entry.release()


class ArchiveHandles:
    """Open archive descriptors, kept across records and shared by threads of one process.

    At most ``GUIDELOOM_CACHE_ARCHIVE_FDS_ENTRIES`` (see :mod:`guideloom.caches`) stay open;
    the least recently used is closed once the files reading through it are closed.

    Args:
        private: A set of its own (the default), bounded as ``archive_fds``; ``False`` for the
            registered process-wide one (``sources._PROCESS_HANDLES``, which
            :func:`guideloom.clear_caches` empties).
    """

    def __init__(self, *, private: bool = True) -> None:
        make = cache if not private else _private_cache
        self._fds: BoundedCache[str, _ArchiveFd] = make(
            "archive_fds", close=_ArchiveFd.retire, fork=_ArchiveFd.forget_after_fork)

    def lease(self, path: str) -> ArchiveLease:
        """An open read-only descriptor for ``path``, kept open until the lease is released."""
        while True:
            entry = self._fds.get_or_create(path, lambda: _ArchiveFd(path))
            if entry.acquire():
                return ArchiveLease(entry)

    def fd(self, path: str) -> int:
        """An open read-only descriptor for ``path``, valid while it stays in the cache (use
        :meth:`lease` to keep it open for as long as it is read)."""
        lease = self.lease(path)
        lease.release()
        return lease.fd

    def retire(self, path: str) -> None:
        """Stop handing out the descriptor of ``path`` (the file was replaced); the next
        :meth:`lease` opens the new file. The old descriptor closes when the files still
        reading through it are closed."""
        self._fds.pop(path)

    def __len__(self) -> int:
        return len(self._fds)

    def close(self) -> None:
        """Close every descriptor (those still read through: when their files close)."""
        self._fds.clear()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _private_cache(name: str, **hooks: Any) -> BoundedCache[Any, Any]:
    return BoundedCache(name, **hooks)


_PROCESS_HANDLES = ArchiveHandles(private=False)
on_archive_changed(_PROCESS_HANDLES.retire)  # a rewritten archive: its old descriptor retires


class MemberFile(h5py.File):
    """An ``h5py.File`` read from a file object that it owns: closing the File (``close()`` or
    the end of a ``with`` block) closes that file object too.

    Zip members are read through a :class:`ByteRangeFile` (or an in-memory copy of a deflated
    member); the archive's descriptor itself stays with :class:`ArchiveHandles`.

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


def open_location(loc: Location, handles: ArchiveHandles | None = None, *,
                  verify_crc: bool = False) -> h5py.File:
    """Open the HDF5 file at ``loc`` read-only.

    Closing the returned File closes everything this call opened (a zip member is a
    :class:`MemberFile`); the archive descriptors stay in ``handles``. With ``verify_crc`` a
    stored member's CRC-32 is checked first (once per process, see :mod:`guideloom.zipcrc`);
    a deflated member is inflated whole, which always checks its CRC.

    Raises:
        CorruptDataError: The member or file is damaged or not HDF5 (or its CRC-32 differs);
            names the id and file.
        ExperimentReadError: The file vanished or cannot be read.
    """
    fid, _, fileobj = _open(loc, handles, verify_crc)
    return h5py.File(fid) if fileobj is None else MemberFile(fid, fileobj)


def _file_access(driver: str | None = None) -> h5py.h5p.PropFAID:
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_EARLIEST, h5py.h5f.LIBVER_LATEST)  # as h5py.File
    if driver == "sec2":
        fapl.set_fapl_sec2()
    return fapl


_SEC2_ACCESS = _file_access("sec2")  # sec2: the file's VFD handle is its descriptor
_BASE_ACCESS = _file_access()


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


def open_location_raw(
    loc: Location, handles: ArchiveHandles | None = None, *, verify_crc: bool = False
) -> tuple[h5py.h5f.FileID, RawSource | None]:
    """Open the HDF5 file at ``loc`` at the library level and say where its bytes are.

    This is the lean open of the record-reading path: no :class:`h5py.File` wrapper (wrap the
    id with ``h5py.File(fid)`` when needed; close it with ``fid.close()``). The
    :class:`~guideloom.fastread.RawSource` is the loose file's own descriptor, or the archive's
    descriptor with the member's data offset; ``None`` for a deflated member (read from
    memory). It is valid while the file is open. ``verify_crc`` as for :func:`open_location`.

    Raises:
        CorruptDataError: The member or file is damaged or not HDF5; names the id and file.
        ExperimentReadError: The file vanished or cannot be read.
    """
    fid, raw, _ = _open(loc, handles, verify_crc)
    return fid, raw


class DescriptorSource:
    """A :class:`~guideloom.remote.byte_source.ByteSource` over an open descriptor, read with
    ``os.pread``; closes it only when it owns it (a loose file, not an archive's shared one)."""

    def __init__(self, fd: int, name: str, owned: bool, size: int | None = None,
                 lease: ArchiveLease | None = None):
        self._fd, self._name, self._owned = fd, name, owned
        self._size = os.fstat(fd).st_size if size is None else size
        self._lease = lease

    @property
    def name(self) -> str:
        return self._name

    def size(self) -> int:
        return self._size

    def read(self, offset: int, size: int) -> bytes:
        data = os_support.pread(self._fd, size, offset)
        if len(data) != size:
            raise OSError(f"{self._name}: {len(data)} of {size} bytes at offset {offset}")
        return data

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return [self.read(o, s) for o, s in ranges]

    def close(self) -> None:
        if self._owned and self._fd >= 0:
            os.close(self._fd)
        self._fd = -1
        if self._lease is not None:
            self._lease.release()


def open_location_bytes(
    loc: Location, handles: ArchiveHandles | None = None, *, verify_crc: bool = False
) -> tuple[DescriptorSource, int, int] | None:
    """The bytes of the HDF5 file at ``loc`` for :mod:`guideloom.h5native`: ``(source, base,
    size)``, the file being ``size`` bytes from ``base`` of ``source`` (close the source when
    done). ``None`` for a deflated member, which only the h5py path reads. The zip member's
    local header is checked, and with ``verify_crc`` its CRC-32, as :func:`open_location` does.

    Raises:
        CorruptDataError: The member's local header or CRC-32 is bad (names the id and file).
        OSError: The file cannot be opened (the h5py path then words the error).
    """
    if loc.member is None:
        fd = os.open(loc.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            src = DescriptorSource(fd, loc.path, owned=True)
        except BaseException:
            os.close(fd)
            raise
        return src, 0, src.size()
    if loc.defect is not None:
        _corrupt(loc, loc.defect)
    if not loc.stored:
        return None
    lease = (handles or _PROCESS_HANDLES).lease(loc.path)
    try:
        fd = lease.fd
        start = member_data_offset(fd, loc)
        if verify_crc and loc.crc is not None:
            verify_member(fd, start, loc.size, loc.crc, archive=loc.path, member=loc.member,
                          sim_id=loc.sim_id)
        # the member's end as the size (no fstat per record): a truncated archive reads short
        src = DescriptorSource(fd, loc.describe(), owned=False, size=start + loc.size,
                               lease=lease)
    except BaseException:
        lease.release()
        raise
    return src, start, loc.size


def _open(loc: Location, handles: ArchiveHandles | None, verify_crc: bool = False
          ) -> tuple[h5py.h5f.FileID, RawSource | None, io.IOBase | None]:
    handles = handles or _PROCESS_HANDLES
    flags = h5py.h5f.ACC_RDONLY
    try:
        if loc.member is None:
            fid = h5py.h5f.open(os.fsencode(loc.path), flags, fapl=_SEC2_ACCESS)
            return fid, RawSource.checked(fid.get_vfd_handle()), None
        if loc.defect is not None:
            _corrupt(loc, loc.defect)
        if loc.stored:  # the member file holds the archive descriptor while it is open
            lease = handles.lease(loc.path)
            try:
                fd = lease.fd
                start = member_data_offset(fd, loc)
                if verify_crc and loc.crc is not None:
                    verify_member(fd, start, loc.size, loc.crc, archive=loc.path,
                                  member=loc.member, sim_id=loc.sim_id)
            except BaseException:
                lease.release()
                raise
            fileobj: io.IOBase = io.BufferedReader(
                ByteRangeFile(fd, start, loc.size, loc.describe(), lease), _MEMBER_BUFFER)
            raw = RawSource.checked(fd, start, loc.size)
        else:  # a deflated member cannot be read in place: inflate it whole, bounded
            fileobj, raw = inflate_member(loc), None
        name = repr(fileobj).encode("ascii", "replace")  # as h5py.File names file objects
        if not loc.stored:  # a private list: the thread's own would keep the inflated copy alive
            fapl = _BASE_ACCESS.copy()
            fapl.set_fileobj_driver(h5py.h5fd.fileobj_driver, fileobj)
        else:
            fapl = _MEMBER_ACCESS.pointed_at(fileobj)
        try:
            return h5py.h5f.open(name, flags, fapl=fapl), raw, fileobj
        except BaseException:
            fileobj.close()
            raise
    except ExperimentReadError:
        raise
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


def inflate_budget() -> int:
    """Bytes one deflated member may inflate to in memory: half the memory available, and
    half of this process's data or address-space limit (``ulimit -d``/``-v``) if one is set."""
    budget = int(psutil.virtual_memory().available * INFLATE_MEMORY_SHARE)
    for which in ("RLIMIT_DATA", "RLIMIT_AS"):
        if resource is not None and hasattr(resource, which):
            soft = resource.getrlimit(getattr(resource, which))[0]
            if soft != resource.RLIM_INFINITY:
                budget = min(budget, int(soft * INFLATE_MEMORY_SHARE))
    return budget


def inflate_member(loc: Location) -> io.RawIOBase:
    """The deflated member ``loc`` inflated into memory, as a file object.

    The declared size is checked first (against what deflate can produce from the member's
    compressed bytes and against :func:`inflate_budget`), then the member is inflated into a
    buffer of exactly that size: a header that lies is caught by a short stream or by zipfile's
    CRC-32 check when the declared end is reached, never by running out of memory.

    Raises:
        CorruptDataError: The member is a zip bomb, lies about its size, or is damaged
            (naming the experiment and ``archive::member``).
    """
    assert loc.member is not None, "inflate_member reads a zip member"
    with zipfile.ZipFile(loc.path) as zf:
        try:
            info = zf.getinfo(loc.member)
        except KeyError:
            _corrupt(loc, "the member is no longer in the archive (it was rewritten)")
        declared = info.file_size
        if declared > info.compress_size * DEFLATE_MAX_RATIO + DEFLATE_SLACK:
            _corrupt(loc, f"the member declares {declared} bytes from {info.compress_size} "
                          "compressed ones, more than deflate can produce (a zip bomb or a "
                          "damaged header)")
        budget = inflate_budget()
        if declared > budget:
            _corrupt(loc, f"the deflated member inflates to {declared / 2**30:.2f} GiB, more "
                          f"than the {budget / 2**30:.2f} GiB guideloom inflates in memory "
                          "(half the memory available); store it uncompressed or extract it to "
                          "a loose file (guideloom extract)")
        try:
            buf = bytearray(declared)
        except MemoryError:
            _corrupt(loc, f"the deflated member's {declared} bytes do not fit in memory")
        view = memoryview(buf)
        got = 0
        try:
            # ZipFile.open in mode "r" gives a ZipExtFile (typeshed: IO[bytes], no readinto)
            with cast(zipfile.ZipExtFile, zf.open(info)) as member:
                while got < declared:
                    n = member.readinto(view[got:got + INFLATE_BLOCK])
                    if not n:
                        break
                    got += n
                extra = member.read(1)  # zipfile stops at the declared size (checks the CRC)
        except (zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
            _corrupt(loc, f"the member does not inflate ({type(exc).__name__}: {exc})")
    if got != declared or extra:
        _corrupt(loc, f"the member inflates to {'more' if extra else got} bytes, not the "
                      f"{declared} its header declares")
    return _MemoryFile(view)


class _MemoryFile(_SeekableReader):
    """A read-only, seekable file object over a buffer (no copy, unlike ``io.BytesIO``)."""

    def __init__(self, view: memoryview):
        super().__init__()
        self._view, self._size, self._pos = view, len(view), 0

    def readinto(self, buffer) -> int:  # noqa: ANN001 - any writable buffer
        n = max(0, min(len(buffer), self._size - self._pos))
        memoryview(buffer).cast("B")[:n] = self._view[self._pos:self._pos + n]
        self._pos += n
        return n


def member_data_offset(fd: int, loc: Location) -> int:
    """Where the data of the stored member ``loc`` starts, from its local header.

    Raises:
        CorruptDataError: The local header is truncated, has a bad signature, or names another
            member than the central directory entry that points at it (naming archive::member).
    """
    if loc.defect is not None:
        _corrupt(loc, loc.defect)
    blob = os_support.pread(fd, LOCAL_HEADER.size + _NAME_READ, loc.header_offset)
    return checked_data_offset(loc, blob, lambda n: os_support.pread(fd, n, loc.header_offset
                                                             + LOCAL_HEADER.size))


def checked_data_offset(loc: Location, blob: bytes | memoryview,
                        read_name: Callable[[int], bytes]) -> int:
    """The data offset of ``loc`` from ``blob``, the bytes read at its local header
    (``read_name(n)`` gives the name's ``n`` bytes when ``blob`` ends inside it).

    Raises:
        CorruptDataError: The header is truncated, has a bad signature or names another member.
    """
    try:
        try:
            name, _, start = parse_local_header(blob, loc.header_offset)
        except IndexError as short:
            name_len = short.args[0]
            head = bytes(blob[:LOCAL_HEADER.size]) + read_name(name_len)
            name, _, start = parse_local_header(head, loc.header_offset)
    except (ZipFormatError, IndexError) as exc:
        _corrupt(loc, str(exc) if isinstance(exc, ZipFormatError) else "truncated zip local "
                 "header")
    if name != loc.member:
        _corrupt(loc, f"the central directory points at the local header of {name!r}, not of "
                      f"{loc.member!r} (a tampered or damaged archive)")
    return start


def _corrupt(loc: Location, what: str) -> NoReturn:
    raise CorruptDataError(
        f"experiment {loc.sim_id}: {loc.describe()}: {what}; the archive is damaged: get a "
        "fresh copy, or leave the experiment out",
        sim_id=loc.sim_id, file=loc.describe(),
    )


def open_h5(
    sim_id: Any,
    data_dir: str | Path | None = None,
    source: str | Path | None = None,
    dataset: Dataset | None = None,
    *,
    spec: DatasetSpec | None = None,
) -> h5py.File:
    """Open one experiment's HDF5 file, from a loose file or a zip member, read-only.

    Returns an ``h5py.File``: use it in a ``with`` block, or call ``close()`` when done. Either
    closes everything this call opened, the zip member's file object included. rddac's argument
    order ``open_h5(id, source, data_dir)`` works too (a ``.json`` path second is the manifest).
    Local files only: :func:`guideloom.open_h5` (:func:`guideloom.h5_tools.open_h5`) also
    opens an experiment of a remote release.

    Example:
        >>> with guideloom.open_h5(42, data_dir="./data") as f:   # doctest: +SKIP
        ...     force = f["force/data"][()]
        >>> f = guideloom.open_h5(42, data_dir="./data")          # doctest: +SKIP
        >>> f.attrs["index"], f.close()                           # doctest: +SKIP

    Raises:
        ExperimentNotFoundError: No local file holds this experiment (a ``KeyError`` and a
            ``FileNotFoundError``).
        CorruptDataError: The file or member is damaged or not HDF5.
    """
    from guideloom.croissant import is_manifest, load

    if is_manifest(data_dir) and not is_manifest(source):
        data_dir, source = source, data_dir  # rddac's order: open_h5(id, source, data_dir)
    ds = dataset if dataset is not None else load(data_dir, source, spec=spec)
    loc = scan_locations(ds, data_dir).get(sim_id)
    root = Path(data_dir) if data_dir is not None else ds.data_dir
    if loc is None:
        raise ExperimentNotFoundError(
            f"experiment {sim_id!r} has no HDF5 file under {root} (looked for loose "
            f"{root}/h5/<id>.h5 files and members of {', '.join(ds.archives) or '*.zip'} in "
            f"{root} and {root}/h5); download it or check the id")
    return open_location(loc)


# The member-opening pieces guideloom.remote.records shares (a remote member is opened the same
# way, from bytes fetched by range).
raise_corrupt = _corrupt
SeekableReader = _SeekableReader
MemoryFile = _MemoryFile
file_access = _file_access
