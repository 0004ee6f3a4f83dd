"""Ready-made storage formats: NumPy structured streams and pickled documents."""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from typing import Any, Generic

import numpy as np

try:  # PEP 696 defaults: ``StreamNumpyFormat`` alone means ``StreamNumpyFormat[dict, Any]``
    from typing_extensions import TypeVar
except ImportError:  # pragma: no cover - typing_extensions ships with zarr and numcodecs
    from typing import TypeVar  # type: ignore[assignment]

DataT = TypeVar("DataT", default=dict)
DType = TypeVar("DType", default=Any)
DocumentT = TypeVar("DocumentT", default=Any)

__all__ = ["DocumentPickleFormat", "StreamNumpyFormat"]


def _check_fits(name: str, values: np.ndarray, target: np.dtype) -> np.ndarray:
    """Return ``values`` cast to ``target`` or raise ``ValueError`` naming ``name``."""
    source = values.dtype
    if np.can_cast(source, target, "safe"):
        return values.astype(target, copy=False)
    if source.kind not in "biuf" or target.kind not in "biufc":
        if source.kind in "OUSV" or target.kind in "OUSVmM":
            raise ValueError(f"field {name!r}: cannot store {source} values as {target}")
        try:
            return values.astype(target, casting="same_kind")
        except TypeError as error:
            raise ValueError(f"field {name!r}: {error}") from None
    with np.errstate(all="ignore"):
        converted = values.astype(target)
        if target.kind in "biu":
            back = converted.astype(source)
            ok = bool(np.array_equal(back, values))
        else:  # to float or complex: only overflow counts as not fitting, rounding is accepted
            ok = bool(np.array_equal(np.isfinite(converted), np.isfinite(values)))
    if not ok:
        raise ValueError(f"field {name!r}: a value does not fit the declared dtype {target}")
    return converted


class StreamNumpyFormat(Generic[DataT, DType]):
    """Stream elements are NumPy (usually structured) dtype items.

    With a structured dtype, :meth:`pack` takes a dict of equal-length 1-D arrays, one per field,
    and a read window decodes to a dict of field arrays (views of the read buffer). With a plain
    dtype, records and windows are 1-D arrays.

    Args:
        stream_dtype: The element dtype, for example
            ``np.dtype([("tokens", "<i4"), ("document_ids", "<u4"), ("loss_mask", "u1")])``.
            ``dtype=`` is accepted as another name for it.
        data_type: The mapping type of a record, for type checkers only (GuideLoom 1.1's
            signature); ignored at run time.
    """

    def __init__(
        self, stream_dtype: Any = None, data_type: type | None = None, *, dtype: Any = None
    ) -> None:
        if (stream_dtype is None) == (dtype is None):
            raise TypeError("StreamNumpyFormat() takes one dtype: StreamNumpyFormat(stream_dtype)")
        self.stream_dtype = np.dtype(stream_dtype if dtype is None else dtype)
        if self.stream_dtype.hasobject:
            raise ValueError("StreamNumpyFormat cannot store Python objects")
        if self.stream_dtype.subdtype is not None:
            raise ValueError("use a structured dtype with a sub-array field instead of a sub-array")
        if self.stream_dtype.itemsize == 0:
            raise ValueError("the stream dtype has zero size")
        self._names = self.stream_dtype.names

    def __repr__(self) -> str:
        return f"StreamNumpyFormat({self.stream_dtype!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StreamNumpyFormat) and other.stream_dtype == self.stream_dtype

    def __hash__(self) -> int:
        return hash(self.stream_dtype)

    def pack(self, data: Any) -> np.ndarray:
        """Return one structured array built from ``data``.

        Args:
            data: For a structured dtype, a mapping of field name to 1-D array (or a 1-D array of
                the stream dtype); otherwise a 1-D array-like.

        Raises:
            ValueError: A missing or extra field, unequal lengths, a non-1-D value or a value that
                does not fit the declared dtype (the message names the field).
        """
        first, columns = self._columns(data)
        if columns is None:
            return first  # already one array of the stream dtype
        out = np.empty(first, dtype=self.stream_dtype)
        for name, values in columns.items():
            out[name] = values
        return out

    def pack_into(self, data: Any, out: np.ndarray) -> int | None:
        """Pack ``data`` like :meth:`pack`, but into the front of ``out`` (of the stream dtype).

        Writers use this to gather records in their write buffer without an array per record.

        Returns:
            The number of elements written, or ``None`` (nothing written) when ``out`` is too
            short.

        Raises:
            ValueError: As :meth:`pack`.
        """
        first, columns = self._columns(data)
        if columns is None:
            length, columns = len(first), {None: first}
        else:
            length = first
        if length > len(out):
            return None
        for name, values in columns.items():
            if name is None:
                out[:length] = values
            else:
                out[name][:length] = values
        return length

    def _columns(self, data: Any) -> tuple[Any, dict[Any, np.ndarray] | None]:
        """``(length, {field: values})`` checked, or ``(array, None)`` for a ready array."""
        dtype = self.stream_dtype
        if isinstance(data, np.ndarray) and data.dtype == dtype:
            if data.ndim != 1:
                raise ValueError(f"a record must be 1-D, got shape {data.shape}")
            return np.ascontiguousarray(data), None
        if self._names is None:
            values = np.asarray(data)
            if values.ndim != 1:
                raise ValueError(f"a record must be 1-D, got shape {values.shape}")
            return np.ascontiguousarray(_check_fits("<value>", values, dtype)), None
        if not isinstance(data, Mapping):
            raise TypeError(f"pack() takes a mapping of field name to array, got {type(data)}")
        missing = [name for name in self._names if name not in data]
        if missing:
            raise ValueError(f"missing field(s) {', '.join(map(repr, missing))}")
        if len(data) != len(self._names):
            extra = [name for name in data if name not in dtype.fields]
            raise ValueError(f"unexpected field(s) {', '.join(map(repr, extra))}")
        length: int | None = None
        first = ""
        columns = {}
        for name in self._names:
            field = dtype.fields[name][0]
            base, shape = (field.subdtype or (field, ()))
            values = np.asarray(data[name])
            if values.ndim != 1 + len(shape) or values.shape[1:] != shape:
                want = "1-D" if not shape else f"shape (n, {', '.join(map(str, shape))})"
                raise ValueError(f"field {name!r} must be {want}, got shape {values.shape}")
            if length is None:
                length, first = len(values), name
            elif len(values) != length:
                raise ValueError(
                    f"field {name!r} has {len(values)} elements but field {first!r} has {length}"
                )
            columns[name] = values if values.dtype == base else _check_fits(name, values, base)
        return length or 0, columns

    def unpack(self, stream: np.ndarray, shard_lengths: np.ndarray, shards: np.ndarray) -> Any:
        """Return a dict of field arrays (views of ``stream``), or ``stream`` for a plain dtype."""
        names = self._names
        if names is None:
            return stream
        return {name: stream[name] for name in names}


class DocumentPickleFormat(Generic[DocumentT]):
    """Stores each record with :mod:`pickle` (protocol 5).

    Warning:
        Unpickling runs code chosen by whoever wrote the file. Read only storages you (or someone
        you trust) wrote; never open a downloaded or shared directory with this format.
    """

    def __init__(self, protocol: int = 5) -> None:
        self.protocol = protocol

    def __repr__(self) -> str:
        return f"DocumentPickleFormat(protocol={self.protocol})"

    def pack(self, data: Any) -> bytes:
        """Return ``data`` pickled."""
        return pickle.dumps(data, protocol=self.protocol)

    def unpack(self, encoded_data: bytes, shard: int) -> Any:
        """Return the unpickled record (trusted data only)."""
        return pickle.loads(encoded_data)  # trusted data only, see the class docstring
