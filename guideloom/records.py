"""Reading one view record from one experiment's HDF5 file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import h5py
import numpy as np
import psutil

from guideloom.croissant import View, ViewField
from guideloom.errors import CorruptDataError, ExperimentReadError, MissingFieldError
from guideloom.fastread import RawSource, read_dataset
from guideloom.sources import ArchiveHandles, Location, open_location, open_location_raw

SIM_ID_KEY = "_sim_id"
LARGE_FIELD_BYTES = 1 << 30  # fields this large are checked against the memory available


class RecordReader:
    """Reads the records of one view; keeps archive descriptors open across records.

    Args:
        view: The view to read.
        handles: Archive descriptors to reuse (default: the process-wide set).
    """

    def __init__(self, view: View, handles: ArchiveHandles | None = None):
        self.view = view
        self.handles = handles

    def read(self, loc: Location, row: Mapping[str, Any],
             into: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
        """Return ``{alias: value, "_sim_id": id}`` for one experiment.

        HDF5 fields become numpy arrays (timestep slicing applied); index columns are the
        typed scalars of ``row``. A field read whole whose shape and dtype equal those of the
        array ``into[alias]`` is decoded into that array (a buffer the caller reuses).

        Raises:
            MissingFieldError: The file lacks an HDF5 path the view needs.
            CorruptDataError: The file or a dataset in it cannot be decoded.
        """
        record: dict[str, Any] = {}
        fid, raw = open_location_raw(loc, self.handles)
        try:
            for vf in self.view.fields:
                if vf.is_h5:
                    record[vf.alias] = self._read_field(
                        fid, raw, vf, loc, row, None if into is None else into.get(vf.alias))
        finally:
            fid.close()
        for vf in self.view.fields:
            if not vf.is_h5:
                record[vf.alias] = row[vf.column]
        # keep the view's field order
        ordered = {vf.alias: record[vf.alias] for vf in self.view.fields}
        ordered[SIM_ID_KEY] = loc.sim_id
        return ordered

    def shapes(self, loc: Location, row: Mapping[str, Any]) -> dict[str, tuple[tuple, np.dtype]]:
        """Shape and dtype of every field from HDF5 metadata alone (no data is read).

        Raises:
            MissingFieldError: The file lacks an HDF5 path the view needs.
        """
        out: dict[str, tuple[tuple, np.dtype]] = {}
        with open_location(loc, self.handles) as f:
            for vf in self.view.fields:
                if not vf.is_h5:
                    value = np.asarray(row[vf.column])
                    out[vf.alias] = (value.shape, value.dtype)
                    continue
                obj = f.get(vf.h5_path)
                if not isinstance(obj, h5py.Dataset):
                    raise MissingFieldError(
                        f"experiment {loc.sim_id}: {loc.describe()} has no HDF5 dataset "
                        f"{vf.h5_path!r}", sim_id=loc.sim_id, file=loc.describe(),
                        h5_path=vf.h5_path,
                    )
                shape = tuple(obj.shape)
                if isinstance(vf.timesteps, int):
                    shape = shape[1:]
                elif vf.timesteps is not None:
                    shape = (len(vf.timesteps), *shape[1:])
                check_declared_size(shape, obj.dtype, loc, vf.h5_path)
                out[vf.alias] = (shape, obj.dtype)
        return {a: out[a] for a in self.view.aliases}

    def _read_field(
        self, fid: h5py.h5f.FileID, raw: RawSource | None, vf: ViewField, loc: Location,
        row: Mapping[str, Any], out: np.ndarray | None = None,
    ) -> np.ndarray:
        path = vf.h5_path
        assert path is not None
        try:  # the low-level open is much cheaper than f[path]; f[path] words the errors
            obj = h5py.Dataset(h5py.h5d.open(fid, path.encode()))
        except (KeyError, ValueError, TypeError, OSError):
            obj = self._lookup(h5py.File(fid), path, vf, loc, row)
        shape = tuple(obj.shape)
        if vf.timesteps is not None and shape:
            steps = 1 if isinstance(vf.timesteps, int) else len(vf.timesteps)
            shape = (steps, *shape[1:])
        check_declared_size(shape, obj.dtype, loc, path)
        try:
            return _select(obj, vf.timesteps, raw, out)
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
        try:
            obj = f[path]
        except KeyError:
            raise MissingFieldError(
                f"experiment {loc.sim_id}: {loc.describe()} has no HDF5 dataset {path!r} "
                f"(field {vf.alias!r} of view {self.view.name!r}); {_filter_hint(row)}",
                sim_id=loc.sim_id, file=loc.describe(), h5_path=path,
            ) from None
        if not isinstance(obj, h5py.Dataset):
            raise MissingFieldError(
                f"experiment {loc.sim_id}: {loc.describe()}: {path!r} is a group, not a dataset",
                sim_id=loc.sim_id, file=loc.describe(), h5_path=path,
            )
        return obj


def check_declared_size(shape: tuple[int, ...], dtype: np.dtype, loc: Location,
                        path: str | None) -> None:
    """Raise :class:`CorruptDataError` when one record's field declares more bytes than this
    machine has memory (a damaged file, or a field that is not per experiment)."""
    nbytes = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
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
    obj: h5py.Dataset, timesteps: None | int | tuple[int, ...], raw: RawSource | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Read ``obj`` with ``timesteps`` applied; through the fast chunk path when it can."""
    if timesteps is None:
        return read_dataset(obj, raw, out=out)
    n = obj.shape[0] if obj.shape else 0
    if isinstance(timesteps, int):
        if not -n <= timesteps < n:
            raise IndexError(f"step {timesteps} with {n} steps")
        return read_dataset(obj, raw, [timesteps % n])[0]
    steps = np.asarray(timesteps) % max(n, 1)
    if any(not -n <= s < n for s in timesteps):
        raise IndexError(f"steps {list(timesteps)} with {n} steps")
    unique, inverse = np.unique(steps, return_inverse=True)
    return read_dataset(obj, raw, unique)[inverse]  # increasing rows, as h5py wants


def _filter_hint(row: Mapping[str, Any]) -> str:
    flags = [k for k, v in row.items() if k.startswith("has_") and v is False]
    if flags:
        conds = " and ".join(f"row[{k!r}]" for k in flags)
        return f"this experiment has {', '.join(f'{k}=False' for k in flags)}: " \
               f"filter with where=lambda row: {conds}"
    return "filter such experiments out with where=..."
