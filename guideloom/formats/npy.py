"""``npy``: one ``.npy`` memmap per alias of shape ``(n_rows, *field_shape)``, plus ``sim_ids.npy``.

Writing: the driver allocates each array (blocks reserved up front), every task writes its rows
in place with ``pwrite`` (a re-run writes the same bytes to the same offsets), and the driver
renames the arrays into place, or compacts them when experiments were skipped. Reading: the
arrays are memory-mapped; a row is a set of read-only views, a batch one fancy-index read per
field.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from tokenize import TokenError
from typing import Any

import numpy as np

from guideloom.formats import own_files
from guideloom.formats.base import (
    ExportFormat,
    FormatReader,
    Part,
    PartitionSink,
    Schema,
    fail,
)
from guideloom.formats.carry import PreviousRows
from guideloom.formats.checksums import RowDigests, digest, row_digests
from guideloom.formats.durable import fsync_path
from guideloom.formats.layout import SIM_IDS_FILE, array_file
from guideloom.formats.npy_header import read_npy_header
from guideloom.runtime import fallbacks, os_support
from guideloom.runtime.buffers import PAGE, is_aligned
from guideloom.runtime.faults import fault_point
from guideloom.runtime.flush import fsync_all

logger = logging.getLogger(__name__)

APPENDING_FILE = ".guideloom-appending.json"  # an update appends to this export's arrays
COPY_BLOCK_BYTES = 64 << 20  # rows copied per step when compacting (bounded memory)
# Buffered rows start their disk writeback in runs of this size, so a partition's fsync waits
# for less than this per file: a run that never reaches it (a partition smaller than it) is
# all written back by the fsync, with the task waiting (127 force rows of 32 kB per partition
# are 4.06 MB, under the 4 MiB this was).
WRITEBACK_BYTES = 1 << 20
# Buffered rows up to this size are batched per field and written one run per pwrite
# (NpySink): 2,000 force-signals records made 8,000 pwrite calls, now about 130.
BATCH_ROW_BYTES = 64 << 10


class NpyFormat(ExportFormat):
    """One memory-mapped ``.npy`` per alias."""

    kind = "npy"
    description = "one memory-mapped .npy array per field, rows along the first axis"
    copies_records = True  # pwrite has copied a row when write returns
    writes_fields = True  # each alias is its own file: a record's fields are written apart
    updatable = True  # carried rows are copied in the kernel (copy_file_range)
    fault_points = ("finalize-alias",)  # each array renamed or compacted into data/

    def rows_path(self, alias: str) -> str:
        """Where the rows of ``alias`` are written while the job runs."""
        return self.stage.path("rows", array_file(alias))

    def allocate(self, n_rows: int, schema: Mapping[str, Schema], partition_size: int) -> None:
        for alias, fs in schema.items():
            path = self.rows_path(alias)
            if os.path.exists(path):
                continue  # resumed job: keep the rows already written
            tmp = f"{path}.alloc"
            try:
                create_npy(tmp, (n_rows, *fs.shape), np.dtype(fs.dtype))
                reserve_blocks(tmp)
            except OSError:
                if os.path.exists(tmp):
                    os.unlink(tmp)  # give the space back
                raise
            os.replace(tmp, path)

    def reuse_rows(self, previous: PreviousRows, n_rows: int, schema: Mapping[str, Schema]
                   ) -> bool:
        """Append in place: each array of the previous generation becomes this job's rows
        file (a hard link to the same file), extended to ``n_rows`` rows; the update then
        writes only the new rows, and finalize rewrites the header's row count.

        Only a regular file of the export's own directory (never through a link) with no
        other hard link and owned by this user is appended to (:func:`appendable`, checked
        again on the file being grown): an array that is also elsewhere (a ``cp -al`` or
        ``rsync --link-dest`` backup) is never written through. Otherwise ``False``: the job
        allocates new arrays and the carried rows are copied into them
        (``copy_file_range``, which shares extents where the file system can).

        The previous generation stays readable throughout: before its files grow, it gets
        :data:`APPENDING_FILE`, naming the row counts its arrays may have meanwhile, and its
        readers read its own ``count`` rows (see :func:`allowed_rows`). It is retired when
        the update publishes.
        """
        count = int(previous.manifest["count"])
        paths = {}
        for alias, fs in schema.items():
            name = array_file(alias)
            fd = own_files.open_file(previous.root, name)  # never through a link
            try:
                with os.fdopen(os.dup(fd), "rb") as fh:
                    header = read_npy_header(fh)
                info = os.fstat(fd)
            except (OSError, ValueError):
                return False
            finally:
                os.close(fd)
            if (header.fortran or header.shape[1:] != tuple(fs.shape)
                    or header.dtype != np.dtype(fs.dtype)):
                return False
            if not appendable(info, 1):
                logger.info("guideloom: %s/%s has %d hard links or another owner: the update "
                            "copies its rows instead of appending to it in place",
                            previous.root, name, info.st_nlink)
                return False
            paths[alias] = name
        mark_appending(previous.root, previous.manifest, n_rows)
        for alias, name in paths.items():
            dst = self.rows_path(alias)
            fd = own_files.open_file(previous.root, name)
            try:
                src = os.fstat(fd)
            finally:
                os.close(fd)
            if os.path.lexists(dst):
                if not os.path.samestat(os.stat(dst, follow_symlinks=False), src):
                    return False  # an earlier run's own file: this job allocates as ever
            elif not own_files.link_file(previous.root, name, dst):
                os.unlink(dst)  # a copy: no append in place here (the job allocates)
                return False
            offset = npy_data_offset(dst)
            row_bytes = int(np.prod(schema[alias].shape, dtype=np.int64)) * np.dtype(
                schema[alias].dtype).itemsize
            size = offset + n_rows * row_bytes
            fd = os.open(dst, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
            try:
                info = os.fstat(fd)
                if not (os.path.samestat(info, src) and appendable(info, 2)):
                    # another link to the file appeared since it was checked: grow nothing
                    # that is also elsewhere (the job allocates, the rows are copied)
                    os.close(fd)
                    fd = -1
                    os.unlink(dst)
                    logger.info("guideloom: %s/%s got another hard link meanwhile: the "
                                "update copies its rows instead", previous.root, name)
                    return False
                os.ftruncate(fd, size)
                grown = offset + count * row_bytes
                if size > grown:
                    os_support.allocate(fd, grown, size - grown)
                os.fsync(fd)
            except OSError as exc:
                raise file_error(exc, dst, f"cannot extend to {n_rows} rows") from exc
            finally:
                if fd >= 0:
                    os.close(fd)
        return True

    def sink(self, part: Part, schema: Mapping[str, Schema] | None) -> PartitionSink:
        assert schema is not None
        return NpySink({a: self.rows_path(a) for a in schema}, schema)

    def row_files(self, schema: Mapping[str, Schema]) -> dict[str, tuple[str, int, int]]:
        out = {}
        for alias, fs in schema.items():
            path = self.rows_path(alias)
            row_bytes = int(np.prod(fs.shape, dtype=np.int64)) * np.dtype(fs.dtype).itemsize
            out[array_file(alias)] = (path, npy_data_offset(path), row_bytes)
        return out

    def finalize(self, keep: np.ndarray | None) -> None:
        for name in sorted(os.listdir(self.stage.path("rows"))):
            if not name.endswith(".npy"):
                continue
            src = self.stage.path("rows", name)
            dst = self.stage.path("data", name)
            if os.path.exists(dst) and not os.path.exists(src):
                continue  # finalized by an earlier, interrupted run
            set_row_count(src)  # an array extended in place by an update: its new count
            if keep is None or keep.all():
                os.replace(src, dst)
            else:
                compact(src, dst, keep)
                os.unlink(src)
            fault_point("finalize-alias")

    @classmethod
    def open_reader(cls, root: str, manifest: Mapping[str, Any],
                    trust: bool = False) -> FormatReader:
        return NpyReader(root, manifest)  # nothing in it runs code: trust changes nothing

    @classmethod
    def check_published(cls, root: str, manifest: Mapping[str, Any]) -> None:
        count = int(manifest["count"])
        rows = allowed_rows(root, manifest)
        for alias, schema in manifest["fields"].items():
            check_npy(root, array_file(alias), (count, *schema["shape"]), schema["dtype"],
                      rows)
        check_npy(root, SIM_IDS_FILE, (count,), manifest.get("sim_ids_dtype"))
        super().check_published(root, manifest)

    @classmethod
    def own_entries(cls, root: str, manifest: Mapping[str, Any]) -> list[str]:
        """The shared files, the arrays and the mark of an update appending to them."""
        return [*super().own_entries(root, manifest), APPENDING_FILE]

    @classmethod
    def described_files(cls, manifest: Mapping[str, Any]) -> dict[str, str]:
        return {**{a: array_file(a) for a in manifest["fields"]}, "sim_ids": SIM_IDS_FILE}

    @classmethod
    def unit_digests(cls, root: str, manifest: Mapping[str, Any], group: str,
                     n_units: int) -> Iterator[tuple[str, str, int]]:
        """Group ``{alias}.npy``: one checksum per row, over the row's bytes in the file."""
        alias = group.removesuffix(".npy")
        if group == alias or alias not in manifest["fields"]:
            yield from super().unit_digests(root, manifest, group, n_units)
            return
        path = os.path.join(root, group)
        schema = manifest["fields"][alias]
        row_bytes = (int(np.prod(schema["shape"], dtype=np.int64))
                     * np.dtype(schema["dtype"]).itemsize)
        for value, size in row_digests(path, npy_data_offset(path), row_bytes,
                                       int(manifest["count"])):
            yield group, value, size


def appendable(info: os.stat_result, links: int) -> bool:
    """Whether an array of ``info`` may be grown in place: a regular file of this user with
    exactly ``links`` hard links (1 in the export; 2 once linked into the staging area)."""
    return (stat.S_ISREG(info.st_mode) and info.st_nlink == links
            and (not hasattr(os, "geteuid") or info.st_uid == os.geteuid()))


def check_npy(root: str, name: str, shape: tuple[int, ...], dtype: str | None,
              rows: Sequence[int] = ()) -> None:
    """The ``.npy`` header holds ``shape`` and ``dtype`` and the file has exactly that size.

    ``rows`` (:func:`allowed_rows`): other row counts the header and the size may have while
    an update appends to the array in place (the export's rows are its first ``shape[0]``).
    """
    path = os.path.join(root, name)
    try:
        with open(path, "rb") as fh:
            header = read_npy_header(fh)
    except FileNotFoundError:
        fail(root, name, "missing")
    except (ValueError, SyntaxError, TokenError, EOFError) as exc:  # header text unparsable
        fail(root, name, f"not a valid .npy file ({type(exc).__name__}: {exc})")
    got_shape, fortran, got_dtype, offset = (header.shape, header.fortran, header.dtype,
                                             header.offset)
    counts = {shape[0], *rows}
    if tuple(got_shape) != tuple(shape) and not (
            rows and tuple(got_shape[1:]) == tuple(shape[1:]) and got_shape[0] in counts):
        fail(root, name, f"shape {tuple(got_shape)} but export.json records {tuple(shape)}")
    if dtype is not None and got_dtype != np.dtype(dtype):
        fail(root, name, f"dtype {got_dtype.str} but export.json records {dtype}")
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * got_dtype.itemsize
    sizes = {offset + n * row_bytes for n in counts} if rows else {
        offset + int(np.prod(shape, dtype=np.int64)) * got_dtype.itemsize}
    size = os.path.getsize(path)
    if size not in sizes or fortran:
        fail(root, name, f"{size} bytes but its header needs {min(sizes)}")


def allowed_rows(root: str, manifest: Mapping[str, Any]) -> tuple[int, ...]:
    """The row counts the arrays of the export at ``root`` may have beyond its ``count``
    while an update appends to them in place (:data:`APPENDING_FILE`, naming this very
    export and count); ``()`` when none does."""
    try:
        with open(os.path.join(root, APPENDING_FILE), "rb") as fh:
            doc = json.loads(fh.read())
    except (OSError, ValueError):
        return ()
    if (not isinstance(doc, dict) or doc.get("export_id") != manifest.get("export_id")
            or doc.get("count") != manifest.get("count")):
        return ()
    return tuple(int(n) for n in doc.get("rows", ()) if isinstance(n, int))


def mark_appending(root: str, manifest: Mapping[str, Any], n_rows: int) -> None:
    """Record in the published export at ``root`` that an update may grow its arrays to
    ``n_rows`` rows (written and made durable before any array changes)."""
    rows = [*allowed_rows(root, manifest)]
    if n_rows in rows:
        return
    doc = {"export_id": manifest.get("export_id"), "count": manifest.get("count"),
           "rows": [*rows, n_rows]}
    path = os.path.join(root, APPENDING_FILE)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(doc, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_path(root)


def set_row_count(path: str) -> None:
    """Rewrite the row count in the header of an array an update extended in place, from
    the file's size (the header keeps its length: :func:`create_npy` pads it)."""
    with open(path, "r+b") as fh:
        header = read_npy_header(fh)
        shape, fortran, dtype, offset = header.shape, header.fortran, header.dtype, header.offset
        row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
        size = os.fstat(fh.fileno()).st_size
        if not shape or not row_bytes or (size - offset) % row_bytes:
            return
        n = (size - offset) // row_bytes
        if n == shape[0]:
            return
        text = repr({"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": fortran,
                     "shape": (int(n), *(int(d) for d in shape[1:]))}).encode("latin1")
        prefix = 10 if header.major == 1 else 12
        room = offset - prefix - 1
        if len(text) > room:
            raise OSError(errno.EOVERFLOW, f"{path}: its header has no room for {n} rows")
        fh.seek(prefix)
        fh.write(text + b" " * (room - len(text)) + b"\n")
        fh.flush()
        os.fsync(fh.fileno())


def create_npy(path: str, shape: tuple[int, ...], dtype: np.dtype, align: int = PAGE) -> int:
    """Create a ``.npy`` file of ``shape`` and ``dtype`` whose data starts at a multiple of
    ``align`` (the header is padded with spaces, as the format allows), so rows whose size is a
    multiple of ``align`` can be written with direct I/O. The data region is left a hole.

    Returns:
        The data offset.
    """
    text = repr({"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
                 "shape": tuple(int(n) for n in shape)}).encode("latin1")
    version, prefix = ((1, 0), 10) if len(text) + 1 + 10 <= 0xFFFF else ((2, 0), 12)
    offset = -(-(prefix + len(text) + 1) // align) * align
    header = text + b" " * (offset - prefix - len(text) - 1) + b"\n"
    size = len(header).to_bytes(2 if version == (1, 0) else 4, "little")
    with open(path, "wb") as fh:
        fh.write(np.lib.format.magic(*version) + size + header)
        fh.truncate(offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
    return offset


def reserve_blocks(path: str) -> None:
    """Allocate the file's blocks now: a full disk fails here, not hours into the export, and
    workers then write into allocated blocks (several times faster than filling a hole)."""
    fd = os.open(path, os.O_WRONLY)
    size = os.fstat(fd).st_size
    try:
        os_support.allocate(fd, 0, size)  # False where the platform or file system cannot
    except OSError as exc:
        raise file_error(exc, path, f"cannot reserve {size} bytes for") from exc
    finally:
        os.close(fd)


def file_error(exc: OSError, path: str, doing: str) -> OSError:
    """``exc`` again (same type and errno) with a message naming ``path``; a full disk says
    what to do."""
    what = exc.strerror or str(exc)
    hint = ("; free space there or write the export elsewhere"
            if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "")
    return type(exc)(exc.errno, f"{doing} {path}: {what}{hint}")


def npy_data_offset(path: str) -> int:
    """Byte offset of the data after the ``.npy`` header."""
    with open(path, "rb") as fh:
        return read_npy_header(fh).offset


class NpySink(PartitionSink):
    """Writes rows in place with ``pwrite``; ``close`` makes them durable (fsync).

    A row whose buffer, file offset and size are page-aligned (the executor's decode buffers,
    rows of whole pages) goes through a second descriptor opened with ``O_DIRECT``: straight
    to the disk, without a copy into the page cache or the kernel work of writing it back
    (measured here: 1 GB in 0.4 s direct against 2.6 s buffered and fsynced). Anything else,
    and file systems without direct I/O (tmpfs), take the buffered path.

    Buffered rows of at most :data:`BATCH_ROW_BYTES` (unless :meth:`write_apart` was
    called) are copied into a batch per field
    (:class:`RowBatch`) and written with one ``pwrite`` per run of consecutive rows of about
    :data:`WRITEBACK_BYTES`: a partition of small rows costs a few system calls per field
    instead of one per row and field. Nothing changes for durability: a partition's rows
    count only once its marker is written, after :meth:`close` has written the batches and
    fsynced; a crash before that leaves the partition to be run again, as ever.
    """

    def __init__(self, paths: Mapping[str, str], schema: Mapping[str, Schema]):
        self._paths = dict(paths)
        self._fds = {a: os.open(p, os.O_WRONLY) for a, p in paths.items()}
        self._direct = {a: _open_direct(p) for a, p in paths.items()}
        self._offsets = {a: npy_data_offset(p) for a, p in paths.items()}
        self._row_bytes = {
            a: int(np.prod(fs.shape, dtype=np.int64)) * np.dtype(fs.dtype).itemsize
            for a, fs in schema.items()
        }
        self._bytes = 0
        self._unflushed: dict[str, tuple[int, int]] = {}  # buffered rows not yet written back
        self._last_row = (-1, 0)  # the row written last and its bytes so far (for discard)
        self.direct_bytes = 0  # of _bytes, written with direct I/O
        self.carried_bytes = 0  # of _bytes, carried from an earlier generation
        self._sums = RowDigests()
        self._batches = {a: RowBatch(n) for a, n in self._row_bytes.items()
                         if 0 < n <= BATCH_ROW_BYTES}

    def write(self, row: int, sim_id: Any, arrays: Mapping[str, np.ndarray]) -> None:
        for alias, arr in arrays.items():
            arr = np.ascontiguousarray(arr)
            buf = arr.tobytes() if arr.ndim == 0 else arr.data.cast("B")
            offset = self._offsets[alias] + row * self._row_bytes[alias]
            direct = self._direct.get(alias)
            batch = self._batches.get(alias)
            aligned = (direct is not None and arr.ndim > 0 and is_aligned(offset, len(buf))
                       and is_aligned(arr.ctypes.data))  # sizes first: ctypes costs 2 us
            if batch is not None and len(buf) == batch.row_bytes and not aligned:
                if not batch.follows(row):
                    self._flush(alias)
                if batch.add(row, sim_id, buf):  # full: about WRITEBACK_BYTES
                    self._flush(alias)
                self._count_row(row, len(buf))
                self._sums.add(array_file(alias), row, buf)
                continue
            if batch is not None:
                self._flush(alias)  # its rows first: the writeback runs stay in file order
            written = start = 0
            try:
                if aligned:
                    assert direct is not None
                    written = start = self._write_direct(alias, direct, buf, offset)
                while written < len(buf):
                    written += os.pwrite(self._fds[alias], buf[written:], offset + written)
            except OSError as exc:
                raise file_error(exc, self._paths[alias],
                                 f"experiment {sim_id}: cannot write row {row} of") from exc
            if written > start:
                self._start_writeback(alias, offset + start, written - start)
            self._count_row(row, written)
            self._sums.add(array_file(alias), row, buf)

    def _count_row(self, row: int, n: int) -> None:
        """Count ``n`` bytes of ``row`` written (a batched row's when it is batched: the
        batch writes them, at the latest in :meth:`close`)."""
        self._bytes += n
        last, so_far = self._last_row
        self._last_row = (row, (so_far if last == row else 0) + n)

    def _flush(self, alias: str) -> None:
        """Write the batched rows of ``alias`` (one run of consecutive rows) with ``pwrite``."""
        batch = self._batches[alias]
        if not batch.count:
            return
        data = batch.data()
        offset = self._offsets[alias] + batch.first * batch.row_bytes
        written = 0
        try:
            while written < len(data):
                written += os.pwrite(self._fds[alias], data[written:], offset + written)
        except OSError as exc:
            raise file_error(exc, self._paths[alias], f"{batch.describe()}: cannot write "
                             f"rows {batch.first} to {batch.first + batch.count - 1} of"
                             ) from exc
        finally:
            data.release()
            batch.clear()
        self._start_writeback(alias, offset, written)  # (its bytes counted as batched)

    def write_apart(self) -> None:
        """Write rows as they come from now on (no batches; see
        :meth:`~guideloom.formats.base.PartitionSink.write_apart`)."""
        self._flush_all()
        self._batches = {}

    def _flush_all(self) -> None:
        for alias in self._batches:
            self._flush(alias)

    def discard(self, row: int) -> None:
        """Forget the checksums and bytes of the fields of ``row`` written so far (the bytes
        stay in the rows file: a row never published is compacted away at finalize)."""
        self._sums.discard(row)
        last, written = self._last_row
        if last == row:
            self._bytes -= written
        self._last_row = (-1, 0)

    def carry(self, row: int, old_row: int, count: int, previous: PreviousRows) -> None:
        """Copy the previous generation's rows ``old_row ..`` to ``row ..`` in the kernel
        (``copy_file_range``: no pass through this process, extents shared where the file
        system can); their checksums are the previous generation's."""
        self._flush_all()
        for alias, fd in self._fds.items():
            name = array_file(alias)
            src = os.path.join(previous.root, name)
            size = count * self._row_bytes[alias]
            dst_offset = self._offsets[alias] + row * self._row_bytes[alias]
            try:
                src_fd = own_files.open_file(previous.root, name)  # never through a link
            except OSError as exc:
                raise file_error(exc, src, "cannot carry rows from") from exc
            try:
                with os.fdopen(os.dup(src_fd), "rb") as fh:
                    src_offset = read_npy_header(fh).offset + old_row * self._row_bytes[alias]
                if not (src_offset == dst_offset  # the same file, reused by an append
                        and os.path.samestat(os.fstat(src_fd), os.fstat(fd))):
                    direct = self._direct.get(alias)  # whole pages: past the page cache
                    again = own_files.fd_path(src_fd, src)  # the file opened, not the path
                    if direct is None or not os_support.copy_direct(again, direct, size,
                                                                    src_offset, dst_offset):
                        copy_range(src_fd, fd, size, src_offset, dst_offset)
                    else:
                        self.direct_bytes += size
                for k in range(count):
                    known = previous.digest(name, old_row + k)
                    if known is None:  # not recorded there: hashed from what was copied
                        known = digest(os.pread(fd, self._row_bytes[alias],
                                                dst_offset + k * self._row_bytes[alias]))
                    self._sums.add_known(name, row + k, known)
            except OSError as exc:
                raise file_error(exc, self._paths[alias],
                                 f"cannot carry {count} rows from {src} into") from exc
            finally:
                os.close(src_fd)
            self._bytes += size
            self.carried_bytes += size

    def _start_writeback(self, alias: str, offset: int, n: int) -> None:
        """Start writing buffered rows to disk once a run of them (a partition's rows follow
        each other) reaches :data:`WRITEBACK_BYTES`, overlapped with reading the next records,
        so the fsync at the end of the partition has little left to wait for."""
        run = self._unflushed.get(alias)
        begin = run[0] if run is not None and run[1] == offset else offset
        end = offset + n
        if end - begin >= WRITEBACK_BYTES:
            os_support.advise(self._fds[alias], begin, end - begin, "DONTNEED")
            self._unflushed.pop(alias, None)
        else:
            self._unflushed[alias] = (begin, end)

    def _write_direct(self, alias: str, fd: int, buf: bytes | memoryview, offset: int) -> int:
        """Write what direct I/O takes of ``buf`` (all of it, as a rule); 0 if it refuses."""
        try:
            done = os.pwrite(fd, buf, offset)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            logger.debug("O_DIRECT write refused for %s: buffered writes", self._paths[alias])
            fallbacks.count("npy:o_direct_refused")
            os.close(fd)  # this file system's direct I/O wants something else: stop trying
            self._direct[alias] = None
            return 0
        self.direct_bytes += done
        return done

    def close(self) -> int:
        flushed = False
        try:
            if self._fds:
                self._flush_all()
            flushed = True
        finally:
            for fd in self._direct.values():
                if fd is not None:
                    os.close(fd)
            self._direct = {}
            fds, self._fds = self._fds, {}
            if not flushed:  # a batch could not be written: the error says why
                for fd in fds.values():
                    os.close(fd)
        try:  # all at once: one journal commit (also of the direct writes' block allocations)
            errors = fsync_all(list(fds.values()))
        finally:
            for fd in fds.values():
                os.close(fd)
        for alias, error in zip(fds, errors, strict=True):
            if error is not None:
                raise file_error(error, self._paths[alias], "cannot flush") from error
        return self._bytes

    def extra_summary(self) -> dict[str, Any]:
        """The checksum of every row written (see :mod:`guideloom.formats.checksums`)."""
        return self._sums.summary()


class RowBatch:
    """Consecutive buffered rows of one field waiting for one ``pwrite`` (see
    :class:`NpySink`): copied in, so the caller may reuse its arrays at once. The buffer is
    allocated at the first row and reused by every run of the sink (no page faults again)."""

    def __init__(self, row_bytes: int):
        self.row_bytes = row_bytes
        self.capacity = -(-WRITEBACK_BYTES // row_bytes)  # rows of at least WRITEBACK_BYTES
        self._buf: np.ndarray | None = None
        self.first = self.count = 0
        self._ids: list[Any] = []  # the first and last experiment, for an error message

    def follows(self, row: int) -> bool:
        """Whether ``row`` continues the run held (or none is held)."""
        return not self.count or row == self.first + self.count

    def add(self, row: int, sim_id: Any, buf: bytes | memoryview) -> bool:
        """Copy one row in (it must :meth:`follow`); True when the batch is full."""
        if self._buf is None:
            self._buf = np.empty(self.capacity * self.row_bytes, np.uint8)
        if not self.count:
            self.first = row
            self._ids = [sim_id, sim_id]
        at = self.count * self.row_bytes
        self._buf[at:at + self.row_bytes] = np.frombuffer(buf, np.uint8)
        self._ids[1] = sim_id
        self.count += 1
        return self.count >= self.capacity

    def data(self) -> memoryview:
        """The rows held, as one run of bytes."""
        assert self._buf is not None
        return self._buf[:self.count * self.row_bytes].data

    def describe(self) -> str:
        first, last = self._ids
        return f"experiment {first}" if self.count == 1 else f"experiments {first} to {last}"

    def clear(self) -> None:
        self.first = self.count = 0


def _open_direct(path: str) -> int | None:
    """A write descriptor with ``O_DIRECT``, or None where the platform or file system has
    none (tmpfs refuses it at open)."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return None
    try:
        return os.open(path, os.O_WRONLY | flag)
    except OSError as exc:
        logger.debug("O_DIRECT refused for %s (%s): buffered writes", path, exc)
        fallbacks.count("npy:o_direct_refused")
        return None


def copy_range(src_fd: int, dst_fd: int, size: int, src_offset: int, dst_offset: int) -> None:
    """Copy ``size`` bytes between descriptors at the given offsets (see
    :func:`guideloom.runtime.os_support.copy_range`; a refusal counts as
    ``npy:copy_file_range_refused``)."""
    os_support.copy_range(src_fd, dst_fd, size, src_offset, dst_offset,
                          fallback="npy:copy_file_range_refused")


def compact(src: str, dst: str, keep: np.ndarray) -> None:
    """Copy the rows of ``src`` where ``keep`` is True into ``dst`` (bounded memory)."""
    rows = np.load(src, mmap_mode="r")
    tmp = f"{dst}.tmp"
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=rows.dtype,
                                    shape=(int(keep.sum()), *rows.shape[1:]))
    row_bytes = max(1, rows[0:1].nbytes)
    step = max(1, COPY_BLOCK_BYTES // row_bytes)
    kept = np.flatnonzero(keep)
    for start in range(0, len(kept), step):
        sel = kept[start:start + step]
        out[start:start + len(sel)] = rows[sel]
    out.flush()
    del out, rows
    os.replace(tmp, dst)


class NpyReader(FormatReader):
    """Rows as read-only views of the memory-mapped arrays."""

    def __init__(self, root: str, manifest: Mapping[str, Any]):
        super().__init__(root, manifest)
        self._arrays: dict[str, np.ndarray] = {}
        self._pairs: dict[tuple[str, ...], tuple[tuple[str, np.ndarray], ...]] = {}
        self._count = int(manifest["count"])
        for field in manifest["fields"]:  # mapped now: a later overwrite cannot swap them
            self._array(field)

    def _array(self, field: str) -> np.ndarray:
        arr = self._arrays.get(field)
        if arr is None:
            # a plain ndarray over the map: indexing it skips np.memmap's Python-level hooks
            # (its first `count` rows: an update may be appending rows after them)
            arr = self._arrays[field] = np.asarray(
                np.load(os.path.join(self.root, array_file(field)), mmap_mode="r"))[
                :self._count]
        return arr

    def row(self, i: int, fields: Sequence[str]) -> dict[str, np.ndarray]:
        return {f: a[i, ...] for f, a in self.row_views(fields)}  # views; 0-d for scalars

    def row_views(self, fields: Sequence[str]) -> tuple[tuple[str, np.ndarray], ...]:
        """The mapped arrays of ``fields`` (each cut to the export's rows): row ``i`` of a
        field is ``array[i, ...]``, a read-only view (a 0-d array for a scalar)."""
        key = fields if isinstance(fields, tuple) else tuple(fields)  # Export passes a tuple
        pairs = self._pairs.get(key)
        if pairs is None:
            pairs = self._pairs[key] = tuple((f, self._array(f)) for f in fields)
        return pairs

    def batch(self, idx: np.ndarray, fields: Sequence[str]) -> dict[str, np.ndarray]:
        return {f: self._array(f)[idx] for f in fields}

    def rows(self, indices: Sequence[int], fields: Sequence[str]) -> list[dict[str, np.ndarray]]:
        """One vectorised read per field; the rows are writable views of that fresh copy."""
        stacked = self.batch(np.asarray(indices, dtype=np.int64), fields)
        return [{f: stacked[f][k, ...] for f in fields} for k in range(len(indices))]
