"""The per-experiment work of an export: read, transform, check (runs on the workers)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np

from guideloom.errors import RecordValueError, TransformError
from guideloom.export.fingerprint import callable_name
from guideloom.export.spec import ExportSpec, FieldSchema
from guideloom.formats.layout import check_output_name
from guideloom.read.locations import Location
from guideloom.read.records import SIM_ID_KEY, OnField
from guideloom.runtime.buffers import take_aligned

NUMERIC_KINDS = "biufc"
TEXT_KINDS = "US"


class RecordSource(Protocol):
    """What :func:`produce` reads records from: a
    :class:`~guideloom.read.records.RecordReader`, or a
    :class:`~guideloom.read.readahead.ReadAhead` over one."""

    def read(self, loc: Location, row: Mapping[str, Any],
             into: Mapping[str, np.ndarray] | None = None,
             on_field: OnField | None = None) -> dict[str, Any]: ...


def produce(
    spec: ExportSpec, reader: RecordSource, loc: Location, row: Mapping[str, Any],
    *, allow_text: bool = False, raw: bool = False, into: Mapping[str, np.ndarray] | None = None,
    on_read: Callable[[int], None] | None = None, on_field: OnField | None = None,
) -> Any:
    """Read one experiment, apply ``transforms`` then ``record_transform``; return arrays.

    ``_sim_id`` is available to the transforms and stripped from the result. With ``raw``
    (storage outputs) the transformed record is returned as it is, for the storage format to
    pack; otherwise every value must be a numeric (or, with ``allow_text``, text) array-like.
    ``into`` holds buffers to decode fields into (see :func:`reuse_buffers`). ``on_read`` is
    given the decoded bytes of the record as read, before any transform (the input rate).
    ``on_field`` is told of each field the moment it is final in its buffer of ``into``
    (:meth:`~guideloom.read.records.RecordReader.read`; a caller without transforms may write
    it while the next one decodes).

    Raises:
        ExperimentReadError: Reading failed (names id, file, HDF5 path).
        TransformError: A transform raised (names id, file, transform).
        RecordValueError: The output is not a mapping of numeric array-likes.
        UnsafeNameError: A key is not a plain file name (never skipped).
    """
    record = reader.read(loc, row, into, on_field)
    if on_read is not None:
        on_read(sum(int(getattr(v, "nbytes", 0) or 0) for v in record.values()))
    for alias, fn in spec.transforms.items():
        record[alias] = _call(fn, record[alias], loc, f"transform for {alias!r}")
    if spec.record_transform is not None:
        out = _call(spec.record_transform, record, loc, "record_transform")
        if raw and not isinstance(out, Mapping):
            return out
        if not isinstance(out, Mapping):
            raise RecordValueError(
                f"experiment {loc.sim_id} ({loc.describe()}): record_transform "
                f"{callable_name(spec.record_transform)} returned {type(out).__name__}, "
                "expected a dict of arrays",
                sim_id=loc.sim_id, file=loc.describe(),
            )
        record = dict(out)
    record.pop(SIM_ID_KEY, None)
    where = f"experiment {loc.sim_id} ({loc.describe()})"
    for alias in record:  # before any format turns a name into a path (cached: cheap)
        check_output_name(alias, where)
    if raw:
        return record
    if not record:
        raise RecordValueError(
            f"experiment {loc.sim_id} ({loc.describe()}): the record has no fields to write",
            sim_id=loc.sim_id, file=loc.describe(),
        )
    return {alias: _as_array(alias, value, loc, allow_text) for alias, value in record.items()}


def _call(fn: Callable[[Any], Any], value: Any, loc: Location, what: str) -> Any:
    try:
        return fn(value)
    except Exception as exc:
        raise TransformError(
            f"experiment {loc.sim_id} ({loc.describe()}): {what} {callable_name(fn)} raised "
            f"{type(exc).__name__}: {exc}",
            sim_id=loc.sim_id, file=loc.describe(),
        ) from exc


def _as_array(alias: str, value: Any, loc: Location, allow_text: bool) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except Exception as exc:
        raise RecordValueError(
            f"experiment {loc.sim_id} ({loc.describe()}): field {alias!r} is not array-like "
            f"({type(value).__name__}: {exc})",
            sim_id=loc.sim_id, file=loc.describe(),
        ) from exc
    kinds = NUMERIC_KINDS + (TEXT_KINDS if allow_text else "")
    if arr.dtype.kind not in kinds:
        hint = "" if allow_text else "; encode text as numbers (e.g. a small-int label)"
        raise RecordValueError(
            f"experiment {loc.sim_id} ({loc.describe()}): field {alias!r} is not numeric "
            f"(dtype {arr.dtype}, value type {type(value).__name__}){hint}",
            sim_id=loc.sim_id, file=loc.describe(),
        )
    return arr


def reuse_buffers(
    spec: ExportSpec, schema: Mapping[str, FieldSchema] | None, sink_copies: bool
) -> dict[str, np.ndarray] | None:
    """Buffers that every record of a partition is decoded into, or None.

    Only when no user code sees the arrays (no transforms) and the sink has copied a record
    before the next one is read: then nothing can hold on to a buffer that the next record
    overwrites. It saves the page faults of a fresh array per field and record (about a tenth
    of the decode time of a large field); buffers an earlier partition of this process gave
    back (:func:`~guideloom.runtime.buffers.give_back`) save them for its first record too.
    """
    if spec.transforms or spec.record_transform is not None or schema is None \
            or not sink_copies:
        return None
    h5_aliases = {vf.alias for vf in spec.view.fields if vf.is_h5}
    # page-aligned, so that a sink may hand them to direct I/O
    return {a: take_aligned(fs.shape, fs.dtype) for a, fs in schema.items() if a in h5_aliases}


def schema_of(arrays: Mapping[str, np.ndarray]) -> dict[str, FieldSchema]:
    """The schema a record defines: shape and dtype per alias."""
    return {a: FieldSchema(tuple(v.shape), v.dtype.str) for a, v in arrays.items()}


def check_keys(arrays: Mapping[str, Any], schema: Mapping[str, Any], loc: Location) -> None:
    """Raise :class:`RecordValueError` unless ``arrays`` has exactly the aliases of ``schema``
    (the first record's), naming the experiment and the keys that differ."""
    if arrays.keys() == schema.keys():  # the rule: one set comparison, no lists
        return
    extra = sorted(set(arrays) - set(schema))
    missing = sorted(set(schema) - set(arrays))
    if extra or missing:
        raise RecordValueError(
            f"experiment {loc.sim_id} ({loc.describe()}): fields differ from the first "
            f"record's {sorted(schema)}: new {extra}, missing {missing}; every record of an "
            "export needs the same fields (fix the transform, or on_error='skip')",
            sim_id=loc.sim_id, file=loc.describe(),
        )


def check_schema(
    arrays: Mapping[str, np.ndarray], schema: Mapping[str, FieldSchema], loc: Location
) -> None:
    """Raise :class:`RecordValueError` unless ``arrays`` matches ``schema`` exactly."""
    check_keys(arrays, schema, loc)
    for alias, fs in schema.items():
        arr = arrays[alias]
        if tuple(arr.shape) == fs.shape and arr.dtype.str == fs.dtype:
            continue  # every record but a wrong one: no message built
        where = f"experiment {loc.sim_id} ({loc.describe()})"
        if tuple(arr.shape) != fs.shape:
            raise RecordValueError(
                f"{where}: field {alias!r} has shape {tuple(arr.shape)} but the first record's "
                f"is {fs.shape}; export_to_numpy needs one shape per field: fix it with a "
                "transform (resample, crop, pad) or use export_to_numpy_per_sim for "
                "variable shapes",
                sim_id=loc.sim_id, file=loc.describe(),
            )
        if arr.dtype.str != fs.dtype:
            raise RecordValueError(
                f"{where}: field {alias!r} has dtype {arr.dtype.str} but the first record's is "
                f"{fs.dtype}; cast it in a transform",
                sim_id=loc.sim_id, file=loc.describe(),
            )
