"""The records layer: reading one view record from one experiment's HDF5 file, wherever it is.

:class:`RecordReader` reads every location the same way: natively first
(:func:`guideloom.read.hdf5.open_native`), then with h5py when the native reader cannot
(:func:`guideloom.read.hdf5.open_h5py`), which words the errors. Whether the bytes are a local
file, a zip member or a remote release is the lower layers' business.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import h5py
import numpy as np

from guideloom.errors import CorruptDataError, ExperimentReadError, NativeDamageError
from guideloom.fastread import RawSource, read_dataset
from guideloom.h5native import H5File
from guideloom.h5native.stats import NATIVE_STATS, NativeStats, native_stats
from guideloom.read.byte_source import slow_location
from guideloom.read.handles import ArchiveHandles
from guideloom.read.hdf5 import (
    LARGE_FIELD_BYTES,
    check_chunks_apart,
    check_declared_size,
    check_self_contained,
    lookup,
    open_h5py,
    open_native,
    prefetch_fields,
    selected_shape,
    take_steps,
    view_shape,
)
from guideloom.read.http import run_concurrently
from guideloom.read.metacache import cache_hint
from guideloom.read.types import Located as Location
from guideloom.read.views import View, ViewField
from guideloom.read.wrappers import MemberMeta

__all__ = ["LARGE_FIELD_BYTES", "NATIVE_ENV", "NATIVE_STATS", "REFERENCE_RECORDS", "SIM_ID_KEY",
           "NativeStats", "OnField", "RecordReader", "check_declared_size", "check_self_contained",
           "described_first", "native_default", "native_stats", "reference_dtypes"]

logger = logging.getLogger(__name__)

Shape = tuple[tuple[int, ...], "np.dtype[Any]"]  # a field's shape and dtype
SIM_ID_KEY = "_sim_id"
NATIVE_ENV = "GUIDELOOM_NATIVE"  # "0" reads every record through h5py
REFERENCE_RECORDS = 3  # experiments whose datatypes set a job's reference (majority)
OnField = Callable[[str, np.ndarray], None]  # a field final in its buffer (RecordReader.read)


def native_default() -> bool:
    """Whether records are read natively unless asked otherwise (``GUIDELOOM_NATIVE=0``:
    not)."""
    from guideloom import config

    return bool(config.get("native"))  # NATIVE_ENV, read now


def _column_shape(vf: ViewField, row: Mapping[str, Any]) -> Shape:
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
            member and process; see :mod:`guideloom.read.zipmember`).
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
        self._h5 = [vf for vf in view.fields if vf.is_h5]
        # what the view reads from each file (its HDF5 paths and steps), as a key
        self._view_key = tuple(f"{vf.h5_path}[{vf.timesteps!r}]" for vf in self._h5)

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
             into: Mapping[str, np.ndarray] | None = None,
             on_field: OnField | None = None) -> dict[str, Any]:
        """Return ``{alias: value, "_sim_id": id}`` for one experiment.

        HDF5 fields become numpy arrays (timestep slicing applied); index columns are the
        typed scalars of ``row``. A field read whole whose shape and dtype equal those of the
        array ``into[alias]`` is decoded into that array (a buffer the caller reuses), and
        ``on_field(alias, array)`` is called the moment it is: this call writes that buffer
        no more (a fallback read decodes that field into an array of its own), so the
        caller may write it out while the next field decodes.

        Raises:
            MissingFieldError: The file lacks an HDF5 path the view needs.
            CorruptDataError: The file, its metadata or a dataset in it cannot be decoded (or,
                with ``verify_crc``, a zip member's CRC-32 differs).
        """
        record: dict[str, Any] | None = None
        learnt = None
        handed: set[str] = set()
        if self.native:
            record, learnt = self._read_native(loc, into, _handing(into, on_field, handed))
        if record is None:
            if into is not None and handed:  # final already: the fallback reads them apart
                into = {a: b for a, b in into.items() if a not in handed}
            record = self._read_h5py(loc, row, into, learnt, _handing(into, on_field, handed))
        return self._ordered(record, loc, row)

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

    # -- native ---------------------------------------------------------------------------
    def _read_native(self, loc: Location, into: Mapping[str, np.ndarray] | None,
                     on_field: OnField | None = None
                     ) -> tuple[dict[str, Any] | None, MemberMeta | None]:
        """The HDF5 fields of ``loc`` read by :mod:`guideloom.h5native`: ``(record, None)``,
        or ``(None, learnt)`` when the h5py path must read the record (a deflated member, a
        feature the native reader lacks, or any error: h5py then words it; ``learnt`` is what
        the first read brought, so h5py does not fetch it again). guideloom's own verdicts (a
        bad zip header or CRC, a field larger than memory, a flipped byte order, a failed
        read) are raised as on the h5py path."""
        try:
            opened = open_native(loc, self.handles, verify=self.verify_crc,
                                 view_key=self._view_key)
        except ExperimentReadError:
            raise
        except Exception as exc:
            NATIVE_STATS.fell_back(exc)
            return None, None
        if opened is None:
            return None, None
        record: dict[str, Any] = {}
        try:
            f = opened.file
            if opened.slow:
                prefetch_fields(f, [vf.h5_path for vf in self._h5 if vf.h5_path],
                                [vf.h5_path for vf in self._h5
                                 if vf.h5_path and vf.timesteps is None])
            for vf in self._h5:
                record[vf.alias] = self._native_field(
                    f, vf, loc, None if into is None else into.get(vf.alias))
                if on_field is not None:
                    on_field(vf.alias, record[vf.alias])
        except ExperimentReadError:
            raise
        except NativeDamageError as exc:  # h5py would read made-up values without an error
            raise CorruptDataError(
                f"experiment {loc.sim_id}: {loc.describe()}: {exc}; the HDF5 file is damaged: "
                f"get a fresh copy, or leave the experiment out{cache_hint(loc)}",
                sim_id=loc.sim_id, file=loc.describe()) from exc
        except Exception as exc:
            NATIVE_STATS.fell_back(exc)
            return None, opened.learnt()
        finally:
            opened.close()
        opened.done(self._view_key)
        NATIVE_STATS.read_natively()
        return record, None

    def _native_field(self, f: H5File, vf: ViewField, loc: Location,
                      out: np.ndarray | None) -> np.ndarray:
        path = vf.h5_path
        assert path is not None
        info = f.dataset(path)
        dtype = info.np_dtype
        stored = info.shape
        steps = vf.timesteps
        check_declared_size(selected_shape(stored, steps), dtype, loc, path)
        if self._byte_orders:
            self._check_byte_order(dtype, vf, loc)
        if steps is None:
            return f.read(path, out=out)
        return take_steps(lambda rows: f.read(path, rows), steps, stored[0] if stored else 0)

    def _native_datasets(self, loc: Location
                         ) -> dict[str, tuple[tuple[int, ...], np.dtype]] | None:
        """``{h5_path: (shape, dtype)}`` of the view's HDF5 fields from metadata read by
        :mod:`guideloom.h5native` (on a remote source one range, and cached, so the record's
        own read fetches only its data); ``None`` for h5py to describe it (a deflated member,
        an unsupported feature or any error: h5py words those)."""
        try:
            opened = open_native(loc, self.handles, verify=self.verify_crc)
        except ExperimentReadError:
            raise
        except Exception:
            return None
        if opened is None:
            return None
        out: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
        try:
            for vf in self._h5:
                assert vf.h5_path is not None
                info = opened.file.dataset(vf.h5_path)
                out[vf.h5_path] = (tuple(info.shape), info.np_dtype)
        except ExperimentReadError:
            raise
        except Exception:
            return None
        finally:
            opened.close()
        opened.done(None)
        return out

    # -- h5py -----------------------------------------------------------------------------
    def _read_h5py(self, loc: Location, row: Mapping[str, Any],
                   into: Mapping[str, np.ndarray] | None,
                   learnt: MemberMeta | None = None,
                   on_field: OnField | None = None) -> dict[str, Any]:
        record: dict[str, Any] = {}
        opened = open_h5py(loc, self.handles, verify=self.verify_crc, learnt=learnt)
        try:
            opened.prefetch((vf.h5_path, vf.timesteps) for vf in self._h5
                            if vf.h5_path is not None)
            fid = opened.fid
            fileno = fid.fileno
            for vf in self._h5:
                record[vf.alias] = self._read_field(
                    fid, fileno, opened.raw, vf, loc, row,
                    None if into is None else into.get(vf.alias))
                if on_field is not None:
                    on_field(vf.alias, record[vf.alias])
        except ExperimentReadError as exc:
            failure = opened.failure
            if failure is not None and exc is not failure:  # the network, not the bytes
                raise failure from exc
            raise
        finally:
            opened.close()
        return record

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
        dsid = obj if isinstance(obj, h5py.h5d.DatasetID) else obj.id
        dcpl = check_self_contained(dsid, fileno, loc, path)
        chunks = check_chunks_apart(dsid, dcpl, loc, path)
        stored = tuple(obj.shape)
        check_declared_size(selected_shape(stored, vf.timesteps), obj.dtype, loc, path)
        if self._byte_orders:
            self._check_byte_order(obj.dtype, vf, loc)
        try:
            if vf.timesteps is None:
                return read_dataset(obj, raw, out=out, shape=stored, dcpl=dcpl, chunks=chunks)
            return take_steps(lambda rows: read_dataset(obj, raw, rows, dcpl=dcpl, chunks=chunks),
                              vf.timesteps, stored[0] if stored else 0)
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

    def _lookup(self, f: h5py.File, path: str, vf: ViewField, loc: Location,
                row: Mapping[str, Any]) -> h5py.Dataset:
        return lookup(f, path, loc, f"(field {vf.alias!r} of view {self.view.name!r}); "
                                    f"{_filter_hint(row)}")

    # -- metadata only --------------------------------------------------------------------
    def shapes(self, loc: Location, row: Mapping[str, Any]) -> dict[str, Shape]:
        """Shape and dtype of every field from HDF5 metadata alone (no data is read).

        Raises:
            MissingFieldError: The file lacks an HDF5 path the view needs.
            CorruptDataError: The file or its metadata is damaged.
        """
        if self.native:
            stored = self._native_datasets(loc)  # on a remote source cached for the record
            if stored is not None:
                return self._shapes_of(stored, loc, row)
        out: dict[str, Shape] = {}
        with open_h5py(loc, self.handles, verify=self.verify_crc).file() as f:
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
                   row: Mapping[str, Any]) -> dict[str, Shape]:
        """:meth:`shapes` from ``{h5_path: (shape, dtype)}`` read natively (the same checks)."""
        out: dict[str, Shape] = {}
        for vf in self.view.fields:
            if not vf.is_h5:
                out[vf.alias] = _column_shape(vf, row)
                continue
            assert vf.h5_path is not None
            out[vf.alias] = self._checked_shape(*stored[vf.h5_path], vf, loc)
        return {a: out[a] for a in self.view.aliases}

    def _checked_shape(self, shape: tuple[int, ...], dtype: np.dtype, vf: ViewField,
                       loc: Location) -> Shape:
        """A dataset's ``(shape, dtype)`` as the view gives it (time steps taken), checked."""
        shape = view_shape(shape, vf.timesteps)
        assert vf.h5_path is not None
        check_declared_size(shape, dtype, loc, vf.h5_path)
        self._check_byte_order(dtype, vf, loc)
        return shape, dtype


def _handing(into: Mapping[str, np.ndarray] | None, on_field: OnField | None,
             handed: set[str]) -> OnField | None:
    """``on_field`` called only for a field decoded into its buffer of ``into``, each
    noted in ``handed``; ``None`` when there is nothing to hand over."""
    if into is None or on_field is None:
        return None

    def hand(alias: str, value: np.ndarray) -> None:
        if alias in into and value is into[alias]:
            handed.add(alias)
            on_field(alias, value)
    return hand


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
                    ) -> list[dict[str, Shape] | None]:
    """:meth:`RecordReader.shapes` of the first ``n`` experiments (``None`` where one cannot
    be read); remote ones at once, as each costs a round trip (and their metadata is cached
    for the records' reads)."""
    pairs = list(zip(locations[:n], rows[:n], strict=True))

    def one(pair: tuple[Location, Mapping[str, Any]]) -> dict[str, Shape] | None:
        try:
            return reader.shapes(*pair)
        except (ExperimentReadError, OSError):
            return None

    remote = any(slow_location(loc) for loc, _ in pairs)
    return run_concurrently(one, pairs, len(pairs) if remote else 1)


def _filter_hint(row: Mapping[str, Any]) -> str:
    flags = [k for k, v in row.items() if k.startswith("has_") and v is False]
    if flags:
        conds = " and ".join(f"row[{k!r}]" for k in flags)
        return f"this experiment has {', '.join(f'{k}=False' for k in flags)}: " \
               f"filter with where=lambda row: {conds}"
    return "filter such experiments out with where=..."
