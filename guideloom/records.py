"""Reading one view record from one experiment's HDF5 file."""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import h5py
import numpy as np
import psutil

from guideloom.croissant import View, ViewField
from guideloom.errors import (
    CorruptDataError,
    ExperimentReadError,
    MissingFieldError,
    NativeDamageError,
)
from guideloom.fastread import RawSource, read_dataset
from guideloom.h5native import H5File, open_file
from guideloom.h5native.stats import NATIVE_STATS, NativeStats, native_stats  # noqa: F401 - their old home
from guideloom.remote.http import run_concurrently
from guideloom.remote.locations import RemoteLocation
from guideloom.sources import (
    ArchiveHandles,
    Location,
    open_location,
    open_location_bytes,
    open_location_raw,
)

logger = logging.getLogger(__name__)
SIM_ID_KEY = "_sim_id"
LARGE_FIELD_BYTES = 1 << 30  # fields this large are checked against the memory available
# HDF5's words for a name that is not there (as opposed to metadata it cannot decode)
_ABSENT = re.compile(r"doesn't exist|does not exist|not found", re.IGNORECASE)
NATIVE_ENV = "GUIDELOOM_NATIVE"  # "0" reads every record through h5py


def native_default() -> bool:
    """Whether records are read natively unless asked otherwise (``GUIDELOOM_NATIVE=0``:
    not)."""
    from guideloom import config

    return bool(config.get("native"))  # NATIVE_ENV, read now



def _column_shape(vf: ViewField, row: Mapping[str, Any]) -> tuple[tuple, np.dtype]:
    """``(shape, dtype)`` of a field the index table holds."""
    assert vf.column is not None  # an index source names its column
    value = np.asarray(row[vf.column])
    return value.shape, value.dtype

class RecordReader:
    """Reads the records of one view; keeps archive descriptors open across records.

    Args:
        view: The view to read.
        handles: Archive descriptors to reuse (default: the process-wide set).
        verify_crc: Check each stored zip member's CRC-32 before its data is used (once per
            member and process; see :mod:`guideloom.zipcrc`).
        native: Read loose files and stored members with :mod:`guideloom.h5native` first
            (h5py when it cannot); default: :func:`native_default`.
    """

    def __init__(self, view: View, handles: ArchiveHandles | None = None, *,
                 verify_crc: bool = False, dtypes: Mapping[str, str] | None = None,
                 native: bool | None = None):
        self.view = view
        self.handles = handles
        self.verify_crc = verify_crc
        self.native = native_default() if native is None else native
        self._byte_orders = {a: np.dtype(d) for a, d in (dtypes or {}).items()}

    def _check_byte_order(self, dtype: np.dtype, vf: ViewField, loc: Location) -> None:
        """Refuse a dataset whose datatype differs from the job's reference only in its byte
        order: one flipped bit in the HDF5 datatype message, which would otherwise read as
        byte-swapped numbers (0.83 as -2.9e20) without any error."""
        want = self._byte_orders.get(vf.alias)
        if (want is not None and dtype != want and dtype.kind == want.kind
                and dtype.itemsize == want.itemsize and dtype.newbyteorder() == want):
            raise CorruptDataError(
                f"experiment {loc.sim_id}: {loc.describe()}: HDF5 dataset {vf.h5_path!r} "
                f"declares {dtype.str} but the job's other experiments store this field as "
                f"{want.str}: its datatype metadata is damaged (a flipped byte-order bit); "
                "restore the file, or export with verify_crc=True to check zip members",
                sim_id=loc.sim_id, file=loc.describe(), h5_path=vf.h5_path,
            )

    def read(self, loc: Location, row: Mapping[str, Any],
             into: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
        """Return ``{alias: value, "_sim_id": id}`` for one experiment.

        HDF5 fields become numpy arrays (timestep slicing applied); index columns are the
        typed scalars of ``row``. A field read whole whose shape and dtype equal those of the
        array ``into[alias]`` is decoded into that array (a buffer the caller reuses).

        Raises:
            MissingFieldError: The file lacks an HDF5 path the view needs.
            CorruptDataError: The file, its metadata or a dataset in it cannot be decoded (or,
                with ``verify_crc``, a zip member's CRC-32 differs).
        """
        if isinstance(loc, RemoteLocation):  # a remote release: read by byte ranges
            from guideloom.remote.records import read_remote_fields

            return self._ordered(read_remote_fields(self, loc, row, into), loc, row)
        record: dict[str, Any] | None = None
        if self.native:
            record = self._read_native(loc, into)
        if record is None:
            record = self._read_h5py(loc, row, into)
        return self._ordered(record, loc, row)

    def _read_h5py(self, loc: Location, row: Mapping[str, Any],
                   into: Mapping[str, np.ndarray] | None) -> dict[str, Any]:
        record: dict[str, Any] = {}
        fid, raw = open_location_raw(loc, self.handles, verify_crc=self.verify_crc)
        try:
            fileno = fid.fileno
            for vf in self.view.fields:
                if vf.is_h5:
                    record[vf.alias] = self._read_field(
                        fid, fileno, raw, vf, loc, row,
                        None if into is None else into.get(vf.alias))
        finally:
            fid.close()
        return record

    def _ordered(self, record: dict[str, Any], loc: Location, row: Mapping[str, Any]
                 ) -> dict[str, Any]:
        """The HDF5 fields read plus the index columns, in the view's field order."""
        for vf in self.view.fields:
            if not vf.is_h5:
                assert vf.column is not None  # an index source names its column
                record[vf.alias] = row[vf.column]
        ordered = {vf.alias: record[vf.alias] for vf in self.view.fields}
        ordered[SIM_ID_KEY] = loc.sim_id
        return ordered

    def _read_native(self, loc: Location, into: Mapping[str, np.ndarray] | None
                     ) -> dict[str, Any] | None:
        """The HDF5 fields of ``loc`` read by :mod:`guideloom.h5native`; ``None`` when the h5py
        path must read the record (a deflated member, a feature the native reader lacks, or
        any error: h5py then words it). guideloom's own verdicts (a bad zip header or CRC, a
        field larger than memory, a flipped byte order) are raised as on the h5py path."""
        try:
            opened = open_location_bytes(loc, self.handles, verify_crc=self.verify_crc)
        except ExperimentReadError:
            raise
        except Exception as exc:  # noqa: BLE001 - h5py words every other failure
            NATIVE_STATS.fell_back(exc)
            return None
        if opened is None:
            return None
        src, base, size = opened
        record: dict[str, Any] = {}
        try:
            f = open_file(src, base, size)
            for vf in self.view.fields:
                if vf.is_h5:
                    record[vf.alias] = self._native_field(
                        f, vf, loc, None if into is None else into.get(vf.alias))
        except ExperimentReadError:
            raise
        except NativeDamageError as exc:  # h5py would read made-up values without an error
            raise CorruptDataError(
                f"experiment {loc.sim_id}: {loc.describe()}: {exc}; the HDF5 file is damaged: "
                "get a fresh copy, or leave the experiment out",
                sim_id=loc.sim_id, file=loc.describe()) from exc
        except Exception as exc:  # noqa: BLE001 - h5py words every other failure
            NATIVE_STATS.fell_back(exc)
            return None
        finally:
            src.close()
        NATIVE_STATS.read_natively()
        return record

    def _native_field(self, f: H5File, vf: ViewField, loc: Location,
                      out: np.ndarray | None) -> np.ndarray:
        path = vf.h5_path
        assert path is not None
        info = f.dataset(path)
        dtype = info.np_dtype
        shape = stored = info.shape
        steps = vf.timesteps
        if steps is not None and shape:
            shape = (1 if isinstance(steps, int) else len(steps), *shape[1:])
        check_declared_size(shape, dtype, loc, path)
        if self._byte_orders:
            self._check_byte_order(dtype, vf, loc)
        if steps is None:
            return f.read(path, out=out)
        n = stored[0] if stored else 0
        if isinstance(steps, int):
            if not -n <= steps < n:
                raise IndexError(f"step {steps} with {n} steps")  # h5py's path words it
            return f.read(path, [steps % n])[0]
        if any(not -n <= s < n for s in steps):
            raise IndexError(f"steps {list(steps)} with {n} steps")
        unique, inverse = np.unique(np.asarray(steps) % max(n, 1), return_inverse=True)
        return f.read(path, unique)[inverse]

    def shapes(self, loc: Location, row: Mapping[str, Any]) -> dict[str, tuple[tuple, np.dtype]]:
        """Shape and dtype of every field from HDF5 metadata alone (no data is read).

        Raises:
            MissingFieldError: The file lacks an HDF5 path the view needs.
            CorruptDataError: The file or its metadata is damaged.
        """
        out: dict[str, tuple[tuple, np.dtype]] = {}
        if isinstance(loc, RemoteLocation):
            from guideloom.remote.records import native_datasets, open_remote

            stored = native_datasets(self, loc)  # one range, cached for the record's read
            if stored is not None:
                return self._shapes_of(stored, loc, row)
            opened = open_remote(loc, self.verify_crc)
        else:
            opened = open_location(loc, self.handles, verify_crc=self.verify_crc)
        with opened as f:
            for vf in self.view.fields:
                if not vf.is_h5:
                    out[vf.alias] = _column_shape(vf, row)
                    continue
                assert vf.h5_path is not None
                obj = self._lookup(f, vf.h5_path, vf, loc, row)
                check_self_contained(obj.id, f.id.fileno, loc, vf.h5_path)
                out[vf.alias] = self._checked_shape(tuple(obj.shape), obj.dtype, vf, loc)
        return {a: out[a] for a in self.view.aliases}

    def _shapes_of(self, stored: Mapping[str, tuple[tuple[int, ...], np.dtype]], loc: Location,
                   row: Mapping[str, Any]) -> dict[str, tuple[tuple, np.dtype]]:
        """:meth:`shapes` from ``{h5_path: (shape, dtype)}`` read natively (the same checks)."""
        out: dict[str, tuple[tuple, np.dtype]] = {}
        for vf in self.view.fields:
            if not vf.is_h5:
                out[vf.alias] = _column_shape(vf, row)
                continue
            assert vf.h5_path is not None
            out[vf.alias] = self._checked_shape(*stored[vf.h5_path], vf, loc)
        return {a: out[a] for a in self.view.aliases}

    def _checked_shape(self, shape: tuple[int, ...], dtype: np.dtype, vf: ViewField,
                       loc: Location) -> tuple[tuple, np.dtype]:
        """A dataset's ``(shape, dtype)`` as the view gives it (time steps taken), checked."""
        if isinstance(vf.timesteps, int):
            shape = shape[1:]
        elif vf.timesteps is not None:
            shape = (len(vf.timesteps), *shape[1:])
        assert vf.h5_path is not None
        check_declared_size(shape, dtype, loc, vf.h5_path)
        self._check_byte_order(dtype, vf, loc)
        return shape, dtype

    def _read_field(
        self, fid: h5py.h5f.FileID, fileno: Any, raw: RawSource | None, vf: ViewField,
        loc: Location, row: Mapping[str, Any], out: np.ndarray | None = None,
    ) -> np.ndarray:
        path = vf.h5_path
        assert path is not None
        obj: h5py.h5d.DatasetID | h5py.Dataset
        try:  # the low-level open is much cheaper than f[path]; f[path] words the errors
            obj = h5py.h5d.open(fid, path.encode())
        except (KeyError, ValueError, TypeError, OSError, RuntimeError):
            obj = self._lookup(h5py.File(fid), path, vf, loc, row)
        dcpl = check_self_contained(obj if isinstance(obj, h5py.h5d.DatasetID) else obj.id,
                                    fileno, loc, path)
        stored = tuple(obj.shape)
        shape = stored
        if vf.timesteps is not None and shape:
            steps = 1 if isinstance(vf.timesteps, int) else len(vf.timesteps)
            shape = (steps, *shape[1:])
        check_declared_size(shape, obj.dtype, loc, path)
        if self._byte_orders:
            self._check_byte_order(obj.dtype, vf, loc)
        try:
            return _select(obj, vf.timesteps, raw, out, stored, dcpl)
        except MemoryError as exc:
            raise CorruptDataError(
                f"experiment {loc.sim_id}: {loc.describe()}: HDF5 dataset {path!r} of shape "
                f"{obj.shape} does not fit in memory ({exc})",
                sim_id=loc.sim_id, file=loc.describe(), h5_path=path,
            ) from exc
        except IndexError as exc:
            raise ExperimentReadError(
                f"experiment {loc.sim_id}: {loc.describe()}: timesteps {vf.timesteps!r} out of "
                f"range for {path!r} of shape {obj.shape} ({exc})",
                sim_id=loc.sim_id, file=loc.describe(), h5_path=path,
            ) from exc
        except (OSError, ValueError) as exc:
            raise CorruptDataError(
                f"experiment {loc.sim_id}: {loc.describe()}: HDF5 dataset {path!r} cannot be "
                f"read; the file is damaged ({exc})",
                sim_id=loc.sim_id, file=loc.describe(), h5_path=path,
            ) from exc

    def _lookup(
        self, f: h5py.File, path: str, vf: ViewField, loc: Location, row: Mapping[str, Any]
    ) -> h5py.Dataset:
        """``f[path]`` as a Dataset; an absent path is a :class:`MissingFieldError`, metadata
        HDF5 cannot decode on the way (object headers, B-trees, heaps) a
        :class:`CorruptDataError` with HDF5's own words."""
        try:
            obj = f[path]
        except (KeyError, RuntimeError, ValueError, OSError) as exc:
            why = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            link = _external_link_on(f, path)
            if link is not None:
                raise CorruptDataError(
                    f"experiment {loc.sim_id}: {loc.describe()}: HDF5 path {path!r} goes "
                    f"through {link!r}, an external link to another file; guideloom reads only "
                    "data stored inside the experiment's own file",
                    sim_id=loc.sim_id, file=loc.describe(), h5_path=path,
                ) from None
            if isinstance(exc, KeyError) and _ABSENT.search(str(why)) and _absent(f, path):
                raise MissingFieldError(
                    f"experiment {loc.sim_id}: {loc.describe()} has no HDF5 dataset {path!r} "
                    f"(field {vf.alias!r} of view {self.view.name!r}); {_filter_hint(row)}",
                    sim_id=loc.sim_id, file=loc.describe(), h5_path=path,
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


def _external_link_on(f: h5py.File, path: str) -> str | None:
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


REFERENCE_RECORDS = 3  # experiments whose datatypes set a job's reference (majority)


def reference_dtypes(view: View, locations: Sequence[Location],
                     rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The datatype of each HDF5 field that most of the job's first experiments declare
    (metadata only), for :class:`RecordReader` to hold every record to; ``{}`` if none reads.

    Taken from a few experiments, so that a damaged first one does not set the reference.
    """
    reader = RecordReader(view)
    seen: dict[str, Counter[str]] = {}
    for described in described_first(reader, locations, rows, REFERENCE_RECORDS):
        if described is None:
            continue
        for vf in view.fields:
            if vf.is_h5:
                seen.setdefault(vf.alias, Counter())[described[vf.alias][1].str] += 1
    return {alias: counts.most_common(1)[0][0] for alias, counts in seen.items()}


def described_first(reader: RecordReader, locations: Sequence[Location],
                    rows: Sequence[Mapping[str, Any]], n: int
                    ) -> list[dict[str, tuple[tuple, np.dtype]] | None]:
    """:meth:`RecordReader.shapes` of the first ``n`` experiments (``None`` where one cannot
    be read); remote ones at once, as each costs a round trip (and their metadata is cached
    for the records' reads)."""
    pairs = list(zip(locations[:n], rows[:n], strict=True))

    def one(pair: tuple[Location, Mapping[str, Any]]) -> dict[str, tuple[tuple, np.dtype]] | None:
        try:
            return reader.shapes(*pair)
        except (ExperimentReadError, OSError):
            return None

    remote = any(isinstance(loc, RemoteLocation) for loc, _ in pairs)
    return run_concurrently(one, pairs, len(pairs) if remote else 1)


def _absent(f: h5py.File, path: str) -> bool:
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


def _select(
    obj: h5py.Dataset | h5py.h5d.DatasetID, timesteps: None | int | tuple[int, ...],
    raw: RawSource | None = None, out: np.ndarray | None = None,
    shape: tuple[int, ...] | None = None, dcpl: h5py.h5p.PropDCID | None = None,
) -> np.ndarray:
    """Read ``obj`` (of shape ``shape`` and creation property list ``dcpl``, when known) with
    ``timesteps`` applied; through the fast chunk path when it can."""
    if timesteps is None:
        return read_dataset(obj, raw, out=out, shape=shape, dcpl=dcpl)
    if shape is None:
        shape = tuple(obj.shape)
    n = shape[0] if shape else 0
    if isinstance(timesteps, int):
        if not -n <= timesteps < n:
            raise IndexError(f"step {timesteps} with {n} steps")
        return read_dataset(obj, raw, [timesteps % n], dcpl=dcpl)[0]
    steps = np.asarray(timesteps) % max(n, 1)
    if any(not -n <= s < n for s in timesteps):
        raise IndexError(f"steps {list(timesteps)} with {n} steps")
    unique, inverse = np.unique(steps, return_inverse=True)
    return read_dataset(obj, raw, unique, dcpl=dcpl)[inverse]  # increasing rows, as h5py wants


def _filter_hint(row: Mapping[str, Any]) -> str:
    flags = [k for k, v in row.items() if k.startswith("has_") and v is False]
    if flags:
        conds = " and ".join(f"row[{k!r}]" for k in flags)
        return f"this experiment has {', '.join(f'{k}=False' for k in flags)}: " \
               f"filter with where=lambda row: {conds}"
    return "filter such experiments out with where=..."
