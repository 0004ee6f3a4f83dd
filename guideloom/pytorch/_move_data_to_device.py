"""GuideLoom 1.1's device transfer helper: ``_move_data_to_device(data, device, *,
non_blocking=False)`` moves every tensor inside ``data`` (tensors, dataclasses, mappings,
lists and tuples are walked; anything else is returned as it is) to ``device``.

The loader's own transfer is :func:`guideloom.loader.torch_adapter.move_to_device`; this is
that function under 1.1's name and keyword.
"""

from __future__ import annotations

from typing import Any, TypeVar

from guideloom.loader.torch_adapter import move_to_device, require_torch

require_torch()

T = TypeVar("T")

__all__: list[str] = []  # a private helper of 1.1, importable by its name


def _move_data_to_device(data: T, device: Any, *, non_blocking: bool = False) -> T:
    """``data`` with every tensor inside it on ``device`` (see the module docstring)."""
    moved: T = move_to_device(data, device, non_blocking)
    return moved
