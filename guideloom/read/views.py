"""The view model: a view's fields (HDF5 datasets or index columns) and the timestep selection.

A :class:`View` is what the record reader (:mod:`guideloom.read.records`) reads per experiment;
the manifest parser (:mod:`guideloom.select.manifest`) builds views from a Croissant manifest and
writes them back, with the ``jsonPath`` form of a timestep selection defined here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from guideloom.errors import ManifestError

#: Timestep selection along the first axis of an HDF5 dataset: all, one step, or a list of steps.
Timesteps = None | int | tuple[int, ...]


@dataclass(frozen=True)
class ViewField:
    """One output of a view: an HDF5 dataset (optionally sliced) or an index column.

    Attributes:
        alias: Key of the value in each record.
        source_id: ``@id`` of the referenced field-map entry or index field.
        h5_path: HDF5 path for field-map sources, else ``None``.
        column: Index column for index sources, else ``None``.
        timesteps: Selection along the first HDF5 axis (field-map sources only).
    """

    alias: str
    source_id: str
    h5_path: str | None = None
    column: str | None = None
    timesteps: Timesteps = None
    data_type: str | None = None

    @property
    def is_h5(self) -> bool:
        """True when the value comes from an HDF5 dataset."""
        return self.h5_path is not None


@dataclass
class View:
    """A named selection of fields; one record per experiment."""

    name: str
    id: str
    fields: tuple[ViewField, ...]
    description: str = ""
    added: bool = False

    @property
    def aliases(self) -> tuple[str, ...]:
        """The record keys, in order."""
        return tuple(f.alias for f in self.fields)

    @property
    def h5_fields(self) -> tuple[ViewField, ...]:
        """The fields read from HDF5."""
        return tuple(f for f in self.fields if f.is_h5)

    def __repr__(self) -> str:
        return f"View({self.name!r}, fields={list(self.aliases)}{', added' if self.added else ''})"


_JSON_PATH = re.compile(r"^\$(?:\[(?P<inner>[^\]]*)\])?$")
_INT = re.compile(r"^-?\d+$")


def timesteps_to_json_path(timesteps: Timesteps) -> str | None:
    """Return the Croissant ``jsonPath`` transform selecting ``timesteps`` on the first axis.

    ``None`` → no transform; ``5`` → ``$[5]`` (one step, the axis is dropped); ``(0, 2, 4)`` →
    ``$[0,2,4]``; a one-step list ``(3,)`` → the slice ``$[3:4]`` (the axis is kept, which
    ``$[3]`` would drop). These are the forms rddac 2.0 writes, except the one-step list, which
    rddac writes as ``$[3]``.
    """
    if timesteps is None:
        return None
    if isinstance(timesteps, int):
        return f"$[{timesteps}]"
    if len(timesteps) == 1:
        step = timesteps[0]
        return "$[-1:]" if step == -1 else f"$[{step}:{step + 1}]"
    return "$[" + ",".join(str(step) for step in timesteps) + "]"


def timesteps_from_json_path(expression: str) -> Timesteps:
    """Parse a ``jsonPath`` transform written by :func:`timesteps_to_json_path` or by rddac.

    Accepts ``$`` and ``$[*]`` (everything), ``$[n]``, ``$[a,b,...]`` and ``$[a:b]`` slices with
    both ends given (or ``$[-k:]``).

    Raises:
        ManifestError: Any other JSONPath (guideloom selects along the first axis only).
    """
    match = _JSON_PATH.match(expression.replace(" ", ""))
    inner = match.group("inner") if match else ""
    if match is not None and inner in (None, "*"):
        return None
    if match is not None and _INT.match(inner):
        return int(inner)
    parts = inner.split(",")
    if match is not None and len(parts) > 1 and all(_INT.match(p) for p in parts):
        return tuple(int(p) for p in parts)
    ends = inner.split(":")
    if match is not None and len(ends) == 2 and _INT.match(ends[0]):
        start = int(ends[0])
        if ends[1] == "" and start < 0:
            return tuple(range(start, 0))
        stop = int(ends[1]) if _INT.match(ends[1]) else None
        if stop is not None and start < stop and (start >= 0 or stop < 0):
            return tuple(range(start, stop))
    raise ManifestError(f"unsupported jsonPath {expression!r}: guideloom reads $[n], $[a,b,...] "
                        "and $[a:b] (first axis only)")
