"""Lazy torch access, the default collate and device moves (torch is an optional extra)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

INSTALL_HINT = 'the loader needs PyTorch: pip install "guideloom[torch]"'
# Unsigned dtypes torch holds but cannot train with on CPU (torch 2.13: no +, -, comparison,
# max, indexing or nn.Embedding on uint16/32/64), widened to the signed dtype that holds every
# value (uint64 only while its values fit in int64). uint8 is fully supported and kept.
TORCH_WIDENED: dict[np.dtype, np.dtype] = {
    np.dtype(np.uint16): np.dtype(np.int32),
    np.dtype(np.uint32): np.dtype(np.int64),
    np.dtype(np.uint64): np.dtype(np.int64),
}
_INT64_MAX = np.iinfo(np.int64).max


def require_torch() -> Any:
    """Import and return ``torch``, or raise an ``ImportError`` naming the extra to install."""
    try:
        import torch
    except ImportError as exc:  # also raised when sys.modules["torch"] is None
        raise ImportError(INSTALL_HINT) from exc
    return torch


def torch_usable(value: np.ndarray) -> np.ndarray:
    """``value`` in a dtype torch trains with: native byte order, and the unsigned dtypes of
    :data:`TORCH_WIDENED` widened (a new array); any other array is returned as it is.

    Raises:
        OverflowError: A uint64 value does not fit in int64.
    """
    dtype = value.dtype.newbyteorder("=") if value.dtype.byteorder not in "=|" else value.dtype
    target = TORCH_WIDENED.get(dtype)
    if target is None:
        return value if dtype == value.dtype else value.astype(dtype)
    if dtype == np.uint64 and value.size and int(value.max()) > _INT64_MAX:
        raise OverflowError(f"uint64 value {int(value.max())} does not fit in int64, the "
                            "dtype torch trains with; store it in a narrower or float dtype")
    logger.debug("widening %s to %s for torch", value.dtype, target)
    return value.astype(target)


def _to_tensor(value: Any) -> Any:
    torch = require_torch()
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "OUSV":  # strings, objects, raw records: leave as NumPy
            return value
        widened = torch_usable(value)
        if widened is not value:
            return torch.from_numpy(widened)
        if not value.flags.writeable or not value.flags.c_contiguous:
            value = np.ascontiguousarray(value).copy()
        return torch.from_numpy(value)
    if isinstance(value, (bool, int, float, np.generic)):
        return torch.as_tensor(value)
    return value


def default_collate(batch: Any) -> Any:
    """Turn a fetched batch into tensors.

    * a dict of arrays (what an export's vectorised read returns) becomes a dict of tensors;
    * a list of dicts is stacked per key, a list of arrays or numbers is stacked;
    * ``[]`` (an empty final batch of a rank) becomes ``{}``;
    * strings and object arrays are passed through unchanged.
    """
    if isinstance(batch, Mapping):
        return {key: _to_tensor(value) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        if len(batch) == 0:
            return {}
        first = batch[0]
        if isinstance(first, Mapping):
            return {key: _to_tensor(_stack([sample[key] for sample in batch])) for key in first}
        return _to_tensor(_stack(list(batch)))
    return _to_tensor(batch)


def _stack(values: list[Any]) -> Any:
    torch = require_torch()
    if isinstance(values[0], torch.Tensor):
        return torch.stack(values)
    try:
        return np.stack([np.asarray(v) for v in values])
    except ValueError:  # ragged: give the caller the list
        return values


def non_blocking_transfer(device: Any) -> bool:
    """Whether copies to ``device`` may be queued without waiting (``non_blocking=True``): on
    CUDA only, which orders a host-to-device copy before later work on the same stream; MPS and
    other accelerators make no such promise (GuideLoom 1.1's rule)."""
    return getattr(device, "type", str(device).split(":", 1)[0]) == "cuda"


def move_to_device(batch: Any, device: Any, non_blocking: bool = False) -> Any:
    """Move every tensor inside ``batch`` (dataclass instances, dicts, lists and tuples are
    walked) to ``device``."""
    torch = require_torch()
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        return dataclasses.replace(batch, **{  # the fields set by __init__, as 1.1 does
            f.name: move_to_device(getattr(batch, f.name), device, non_blocking)
            for f in dataclasses.fields(batch) if f.init})
    if isinstance(batch, Mapping):
        mapping: Any = type(batch)  # a dict (sub)class, built from pairs
        return mapping((k, move_to_device(v, device, non_blocking)) for k, v in batch.items())
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # named tuple
        return type(batch)(*(move_to_device(v, device, non_blocking) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_to_device(v, device, non_blocking) for v in batch)
    return batch


def pin(batch: Any) -> Any:
    """Pin every CPU tensor inside ``batch`` (call only when an accelerator is present)."""
    torch = require_torch()
    if isinstance(batch, torch.Tensor):
        return batch.pin_memory()
    if isinstance(batch, Mapping):
        mapping: Any = type(batch)  # a dict (sub)class, built from pairs
        return mapping((k, pin(v)) for k, v in batch.items())
    if isinstance(batch, (list, tuple)) and not hasattr(batch, "_fields"):
        return type(batch)(pin(v) for v in batch)
    return batch
