"""One description of an export job, shared by the Python API, the CLI and workflow files."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np

from guideloom.export.fingerprint import callable_fingerprint, callable_name
from guideloom.export.recipe import TransformRecipe, transform_recipe
from guideloom.formats.layout import check_output_name
from guideloom.formats.manifest_types import Recipe, TransformNames
from guideloom.read.locations import Location
from guideloom.read.roots import DataRoot
from guideloom.read.views import View
from guideloom.select.parse import Dataset

IDENTITY_HEX_CHARS = 32  # a job identity: 128 bits of sha256
RECIPE_SCHEME = 2  # recipes with per-component digests (1: parts only, before issue 38)
RECORD_SLOT = "record transform"
OutputKind = str  # a registered format's kind (guideloom.formats): "npy", "npz", "zarr", …
OnError = Literal["raise", "skip"]
RecordTransform = Callable[[dict[str, Any]], Mapping[str, Any]]
FieldTransform = Callable[[Any], Any]


@dataclass(frozen=True)
class Partition:
    """A slice of the job's experiments, handled by one Dask task.

    Attributes:
        index: Partition number (0, 1, …); also the shard number for storage outputs.
        start: Row of the first experiment in the output arrays.
        locations: Where each experiment's file is.
        rows: The typed index rows, parallel to ``locations``.
        carried: For an update, parallel to ``locations``: the row of the previous generation
            that holds each experiment's unchanged output (carried, not decoded), or -1 (read
            it); empty when nothing is carried.
    """

    index: int
    start: int
    locations: tuple[Location, ...]
    rows: tuple[Mapping[str, Any], ...]
    carried: tuple[int, ...] = ()

    @property
    def stop(self) -> int:
        """One past the last row."""
        return self.start + len(self.locations)

    def __repr__(self) -> str:
        return f"Partition({self.index}, rows {self.start}:{self.stop})"


@dataclass(frozen=True)
class FieldSchema:
    """Shape (without the record axis) and dtype of one output alias."""

    shape: tuple[int, ...]
    dtype: str

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"shape": list(self.shape), "dtype": self.dtype}

    @property
    def row_bytes(self) -> int:
        """Bytes of one record of this alias."""
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class ExportSpec:
    """Everything an export needs; workers receive this plus their partition.

    Attributes:
        view: The resolved view.
        dataset: The dataset (manifest, index location, added views).
        data_dir: Directory of the experiment files (a remote root: read by URL).
        output: The format's kind (``"npy"``, ``"npz"``, ``"zarr"``, ``"storage"`` or a
            registered one's, see :mod:`guideloom.formats`).
        target: Output directory, or zarr store path/URL.
        sim_ids: Allowlist of ids, in output order, or ``None`` for the index order.
        where: Row filter, or ``None``.
        where_description: Text naming the filter in ``export.json``.
        transforms: Per-alias transforms, applied first.
        record_transform: Whole-record transform, applied after ``transforms``.
        partition_size: Experiments per Dask task (and per zarr chunk group / shard).
        on_error: ``"raise"`` stops at the first bad experiment; ``"skip"`` leaves it out.
        overwrite: Replace an existing complete export.
        options: Writer options (``compressed`` for npz, ``compressor`` for zarr, the storage
            object for storage outputs).
        verify_crc: Check each stored zip member's CRC-32 before its data is used. It changes
            what is checked, never what is written, so it is not part of :meth:`identity`.
        update: Update the complete export at ``target`` (see :mod:`guideloom.export.update`):
            read only the experiments added or changed since it was written, carry the rest.
        previous: The generation an update starts from (set by the executor once it has
            checked it; part of :meth:`identity`).
        verify_inputs: An update hashes every carried experiment's input and compares it
            with the recorded content digest, whatever its cheap evidence says. Like
            ``verify_crc`` it is not part of :meth:`identity`.
        code_version: The version of the transforms' code, named by the user: it replaces
            their automatic code and world identity in the recipe (see
            :mod:`guideloom.export.recipe`); their values still count.
        run_token: A token of this run: part of :meth:`identity` when the transforms'
            recipe has components no digest vouches for (:attr:`unprovable`), so that a
            rerun starts over instead of resuming rows another run made.
    """

    view: View
    dataset: Dataset
    data_dir: DataRoot  # where the experiments are read (str() as export.json records it)
    output: OutputKind
    target: str
    sim_ids: tuple[Any, ...] | None = None
    where: Callable[[Mapping[str, Any]], bool] | None = None
    where_description: str | None = None
    transforms: Mapping[str, FieldTransform] = field(default_factory=dict)
    record_transform: RecordTransform | None = None
    partition_size: int | None = None
    on_error: OnError = "raise"
    overwrite: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    verify_crc: bool = False
    update: bool = False
    previous: PreviousGeneration | None = None
    verify_inputs: bool = False
    code_version: str | None = None
    run_token: str = field(default_factory=lambda: uuid.uuid4().hex, compare=False,
                           repr=False)

    def __post_init__(self) -> None:
        if self.on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', not {self.on_error!r}")
        if self.update and self.overwrite:
            raise ValueError("give update=True (carry the unchanged rows of the export) or "
                             "overwrite=True (write it again), not both")
        if self.partition_size is not None and self.partition_size < 1:
            raise ValueError("partition_size must be at least 1")
        unknown = [a for a in self.transforms if a not in self.view.aliases]
        if unknown:
            raise ValueError(
                f"transforms name {unknown} which view {self.view.name!r} does not have; "
                f"its fields: {', '.join(self.view.aliases)}"
            )
        for alias, fn in self.transforms.items():
            if not callable(fn):
                raise ValueError(f"transform for {alias!r} is not callable: {fn!r}")
        if self.record_transform is not None and not callable(self.record_transform):
            raise ValueError(f"record_transform is not callable: {self.record_transform!r}")
        if self.code_version is not None and (not isinstance(self.code_version, str)
                                              or not self.code_version.strip()):
            raise ValueError(f"code_version must be a non-empty string, not "
                             f"{self.code_version!r}")
        if self.record_transform is None:  # the view's aliases are the output names
            for alias in self.view.aliases:
                check_output_name(alias, f"view {self.view.name!r}")

    def __repr__(self) -> str:
        ids = "all" if self.sim_ids is None else f"{len(self.sim_ids)} ids"
        return (f"ExportSpec(view={self.view.name!r}, output={self.output!r}, "
                f"target={self.target!r}, sim_ids={ids}, where={self.where_description!r})")

    def transform_names(self) -> TransformNames:
        """Names of the transforms, for ``export.json``."""
        return {
            "transforms": {a: callable_name(fn) for a, fn in self.transforms.items()},
            "record_transform": callable_name(self.record_transform)
            if self.record_transform
            else None,
        }

    def identity(self, ids: list[Any], partition_size: int, data: str = "") -> str:
        """A hash that changes whenever the job would write other bytes.

        It covers the view, the selected ids and their order, the output kind and options (a
        storage's class and format included), the partitioning, the transforms' code with what
        it uses from the user's modules, and ``data``, the input's identity
        (:func:`~guideloom.export.fingerprint.data_fingerprint`). Checks that change no output
        byte (``verify_crc``) are left out, so a rerun with them resumes the same job.
        """
        doc: dict[str, Any] = {
            **self.recipe_parts(),
            "ids": [str(i) for i in ids],
            "partition_size": partition_size,
            "data": data,
        }
        if self.previous is not None:  # an update: of this very generation
            doc["previous"] = self.previous.export_id
        if self.unprovable:  # rows of another run may differ: resume none of them
            doc["run"] = self.run_token
        text = json.dumps(doc, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:IDENTITY_HEX_CHARS]

    def recipe_parts(self) -> dict[str, Any]:
        """What makes the rows of one experiment: output kind, view, ``on_error``, options and
        transforms' code (not which experiments, nor their data). An export can be updated
        only by a job of the same recipe (see :func:`recipe`)."""
        return {
            "output": self.output,
            "view": [
                (f.alias, f.h5_path, f.column, f.timesteps) for f in self.view.fields
            ],
            "on_error": self.on_error,
            "options": {k: _option_identity(v) for k, v in sorted(self.options.items())},
            "transforms": {alias: self.transform_recipes[transform_slot(alias)].fingerprint
                           for alias in self.transforms},
            "record_transform": (self.transform_recipes[RECORD_SLOT].fingerprint
                                 if self.record_transform is not None else None),
        }

    @cached_property
    def transform_recipes(self) -> dict[str, TransformRecipe]:
        """The recipe of each transform (computed once per spec), by its slot's name:
        ``"transform 'force'"``, ``"record transform"``."""
        found = {transform_slot(alias): transform_recipe(fn, self.code_version)
                 for alias, fn in self.transforms.items()}
        if self.record_transform is not None:
            found[RECORD_SLOT] = transform_recipe(self.record_transform, self.code_version)
        return found

    @property
    def unprovable(self) -> tuple[str, ...]:
        """The transforms' components no digest vouches for (``record transform: world
        os.environ``): what they read of the world, values with no deterministic token, code
        edited after its import. Without ``code_version``, a job with any of them never
        resumes another run's partitions (they may hold other rows), and an update of its
        export refuses."""
        return tuple(f"{slot}: {name}"
                     for slot, recipe in self.transform_recipes.items()
                     for name in recipe.unprovable)

    def replaced(self, **changes: Any) -> ExportSpec:
        """``dataclasses.replace`` keeping the transforms' recipes already made for this job:
        they describe the code as it was when the job began, not as its files are when it
        finalizes (a file edited meanwhile would be recorded for rows of the old code)."""
        new = dataclasses.replace(self, **changes)
        made = self.__dict__.get("transform_recipes")
        if made is not None and not changes.keys() & {"transforms", "record_transform",
                                                        "code_version"}:
            new.__dict__["transform_recipes"] = made
        return new

    def recipe(self) -> Recipe:
        """The recipe as ``export.json`` keeps it: a sha256 of each part, and of all, and the
        components of each transform (what a refusal names)."""
        parts = {k: _sha(v) for k, v in self.recipe_parts().items()}
        return {"sha256": _sha(parts), "parts": parts, "scheme": RECIPE_SCHEME,
                "code_version": self.code_version,
                "components": {slot: dict(sorted(r.components.items()))
                               for slot, r in self.transform_recipes.items()}}


@dataclass(frozen=True)
class PreviousGeneration:
    """The published export an update starts from: where it is and which it is.

    Attributes:
        root: Its directory (or store URL), as :func:`~guideloom.formats.layout.
            read_export_manifest` returns it.
        export_id: Its ``export_id``: the update's identity names it, so a staged update is
            never resumed over another generation.
    """

    root: str
    export_id: str


def transform_slot(alias: str) -> str:
    """What a refusal calls the transform of field ``alias``: ``transform 'force'``."""
    return f"transform {alias!r}"


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _option_identity(value: Any) -> Any:
    """A format option as the identity sees it: plain values as they are, objects (a storage
    and its format) by class and settings, never by their address-bearing repr."""
    if isinstance(value, str | int | float | bool | type(None)):
        return value
    fmt = getattr(value, "format", None)
    return [callable_fingerprint(type(value)), callable_fingerprint(fmt)]
