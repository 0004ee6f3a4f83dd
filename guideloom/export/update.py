"""Updating an export: what changed since it was written, and what can be carried over.

Every export records what each of its rows came from (``provenance.json``, see
:mod:`guideloom.export.provenance`) and the recipe that made the rows (``export.json``'s
``recipe``: output kind, view, ``on_error``, options, transforms' code). An update is an export
job like any other (same partitions, markers, lock, resume and atomic publish) whose partitions
know, experiment by experiment, which row of the previous generation already holds its output:
those rows are carried (copied, linked or reused by the format), the others read and decoded.

An experiment is

- **added** when the previous generation has no row of it (new, or skipped before);
- **changed** when its input token (zip member name, size, CRC-32; a loose file's size and
  modification time; a remote file's size and validator) or its index-table row differs;
- **carried** otherwise;
- **removed** when the previous generation has a row of it and the new selection does not.

Anything else that differs (another view, transform code, options, ``on_error`` or output kind)
refuses the update with one line naming it (for a transform: the component of its recipe that
differs, see :mod:`guideloom.export.recipe`): only a full export (``overwrite=True``) can
change those. A transform whose recipe cannot be trusted (it reads the environment, files, the
clock or unseeded randomness, or holds a value with no deterministic token) refuses unless
the user names its ``code_version``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fsspec
import numpy as np

from guideloom.errors import IncompleteExportError, UpdateRefusedError
from guideloom.export.provenance import Provenance, read_provenance
from guideloom.export.recipe.compare import differences, untrusted
from guideloom.export.spec import ExportSpec, PreviousGeneration
from guideloom.formats.layout import read_export_manifest
from guideloom.formats.manifest_types import ExportManifest, Generation
from guideloom.read.fingerprint import input_sizes

logger = logging.getLogger(__name__)

__all__ = ["UpdatePlan", "UpdatePreview", "UpdateRefusedError", "open_previous", "plan_update",
           "preview_update"]

# what each recipe part is called in a refusal
_PART_NAMES = {
    "output": "the output format",
    "view": "the view's fields",
    "on_error": "on_error",
    "options": "the format options",
    "transforms": "the field transforms' code",
    "record_transform": "the record transform's code",
}


@dataclass(frozen=True)
class Previous:
    """The generation an update starts from, as read from its files.

    Attributes:
        ref: Where it is and its ``export_id`` (what the job's identity names).
        manifest: Its ``export.json``.
        sim_ids: The id of each of its rows, as text.
        provenance: What each row came from.
    """

    ref: PreviousGeneration
    manifest: ExportManifest
    sim_ids: tuple[str, ...]
    provenance: Provenance

    @property
    def generation(self) -> int:
        """Its generation number (1 for a full export)."""
        history = self.manifest.get("generations") or []
        return int(history[-1]["generation"]) if history else 1


@dataclass(frozen=True)
class UpdatePlan:
    """What an update reads and what it carries, experiment by experiment.

    Attributes:
        carried_from: Per experiment of the new selection, in output order: the previous
            generation's row holding its output, or -1 when it is read.
        added: Ids read because the previous generation has no row of them.
        changed: ``{id: why}`` of the ids read because their input changed.
        removed: Ids of previous rows that the new selection leaves out.
    """

    carried_from: tuple[int, ...]
    added: tuple[Any, ...] = ()
    changed: Mapping[Any, str] = field(default_factory=dict)
    removed: tuple[Any, ...] = ()

    @property
    def carried(self) -> int:
        """Experiments whose rows are carried from the previous generation."""
        return sum(1 for j in self.carried_from if j >= 0)

    @property
    def read(self) -> int:
        """Experiments read and decoded."""
        return len(self.carried_from) - self.carried

    @property
    def up_to_date(self) -> bool:
        """Nothing to do: every row is carried to where it is (no addition, change, removal
        or reordering)."""
        return (not self.removed and all(j == k for k, j in enumerate(self.carried_from)))

    def appends_to(self, count: int) -> bool:
        """Only rows after the previous generation's ``count`` rows are new: every previous
        row stays where it is (nothing removed, changed or reordered), others follow it."""
        return (not self.removed and len(self.carried_from) > count
                and all(j == k for k, j in enumerate(self.carried_from[:count])))

    def counts(self) -> dict[str, int]:
        """``{"added", "removed", "changed", "carried"}`` (what the history and the monitor
        show)."""
        return {"added": len(self.added), "removed": len(self.removed),
                "changed": len(self.changed), "carried": self.carried}

    def text(self) -> str:
        """One line: ``3 added, 1 removed, 2 changed, 114 carried``."""
        return ", ".join(f"{n} {what}" for what, n in self.counts().items())


def open_previous(spec: ExportSpec, check_recipe: bool = True) -> Previous | None:
    """The complete export at the job's target that this update starts from; ``None`` when
    nothing is at the target (the update is then a full export). ``check_recipe=False``
    (a dry run that did not import the transforms) checks only the output kind.

    Raises:
        UpdateRefusedError: Something is at the target that is not a complete guideloom
            export with the record of its inputs, or its recipe is not this job's.
    """
    try:
        root, manifest = read_export_manifest(spec.target)
    except IncompleteExportError as exc:  # (before FileNotFoundError: "not an export" is one)
        raise UpdateRefusedError(f"cannot update {spec.target}: {exc}; only a complete "
                                 "export can be updated") from exc
    except FileNotFoundError:
        return None
    if check_recipe:
        check_same_recipe(spec, manifest, root)
    elif manifest.get("kind") != spec.output:
        raise UpdateRefusedError(f"cannot update {root}: it is a {manifest.get('kind')!r} "
                                 f"export, this job writes {spec.output!r}; a full export "
                                 "(overwrite=True) is needed")
    provenance = read_provenance(root, manifest)
    if provenance is None:
        raise UpdateRefusedError(
            f"cannot update {root}: it holds no record of what its rows came from (written by "
            f"guideloom {manifest.get('guideloom_version', '?')}, before updates existed); a "
            "full export (overwrite=True) is needed once, later ones can be updates")
    ids = tuple(str(i) for i in _sim_ids(root, manifest))
    if len(provenance.data) != len(ids):
        raise UpdateRefusedError(f"cannot update {root}: provenance.json has "
                                 f"{len(provenance.data)} rows, sim_ids {len(ids)}: the export "
                                 "is damaged; a full export (overwrite=True) is needed")
    ref = PreviousGeneration(root, str(manifest.get("export_id", "")))
    return Previous(ref, manifest, ids, provenance)


def check_same_recipe(spec: ExportSpec, manifest: Mapping[str, Any], root: str) -> None:
    """Refuse unless the export at ``root`` was made by this job's recipe (one line naming
    what differs)."""
    if manifest.get("kind") != spec.output:
        raise UpdateRefusedError(
            f"cannot update {root}: it is a {manifest.get('kind')!r} export, this job writes "
            f"{spec.output!r}; a full export (overwrite=True) is needed")
    recorded = manifest.get("recipe")
    if not isinstance(recorded, Mapping):
        raise UpdateRefusedError(
            f"cannot update {root}: its export.json records no recipe (written by guideloom "
            f"{manifest.get('guideloom_version', '?')}, before updates existed); a full export "
            "(overwrite=True) is needed once, later ones can be updates")
    mine = spec.recipe()
    for slot, components in (mine.get("components") or {}).items():
        reason = untrusted(slot, components)
        if reason is not None:
            raise UpdateRefusedError(
                f"cannot update {root}: {reason}'...' (the version of the transform's code and "
                "of what it reads: an update trusts it), or export again (overwrite=True)")
    if recorded.get("sha256") == mine["sha256"]:
        return
    theirs = recorded.get("parts") or {}
    differs = [k for k, v in mine["parts"].items() if theirs.get(k) != v]
    code = [k for k in differs if k in ("transforms", "record_transform")]
    said = [_PART_NAMES.get(k, k) for k in differs if k not in code]
    if "components" not in recorded and (code or "options" in differs):  # (options: a
        # storage's class and format were fingerprinted the old way too)
        raise UpdateRefusedError(
            f"cannot update {root}: its recipe was recorded by an older guideloom "
            f"({manifest.get('guideloom_version', '?')}), which fingerprinted transforms "
            "another way; a full export (overwrite=True) is needed once, later ones can be "
            "updates")
    if code:
        said += _transform_differences(recorded.get("components") or {},
                                       mine.get("components") or {})
    raise UpdateRefusedError(
        f"cannot update {root}: {'; '.join(said) or 'the recipe differs'} (export's view "
        f"{manifest.get('view')!r}); an update keeps the view, transforms, options and "
        "format: a full export (overwrite=True) is needed")


def _transform_differences(old: Mapping[str, Mapping[str, str]],
                           new: Mapping[str, Mapping[str, str]]) -> list[str]:
    """One phrase per transform whose components differ (``transform 'force':
    mymod.NORM.std changed``)."""
    said = []
    for slot in sorted(set(old) | set(new)):
        if slot not in new:
            said.append(f"{slot}: the export has one, this job none")
        elif slot not in old:
            said.append(f"{slot}: this job has one, the export none")
        else:
            phrase = differences(slot, old[slot], new[slot])
            if phrase:
                said.append(phrase)
    return said


def plan_update(previous: Previous, sim_ids: Sequence[Any], data_tokens: Sequence[str],
                row_tokens: Sequence[str]) -> UpdatePlan:
    """Compare the new selection (ids in output order with their input and index-row
    tokens, see :mod:`guideloom.export.provenance`) with the previous generation's rows."""
    old_rows = {sim_id: j for j, sim_id in enumerate(previous.sim_ids)}
    old = previous.provenance
    carried_from = []
    added: list[Any] = []
    changed: dict[Any, str] = {}
    seen = set()
    for sim_id, data, row in zip(sim_ids, data_tokens, row_tokens, strict=True):
        key = str(sim_id)
        seen.add(key)
        j = old_rows.get(key)
        if j is None:
            added.append(sim_id)
            carried_from.append(-1)
        elif old.data[j] != data:
            changed[sim_id] = "its data changed"
            carried_from.append(-1)
        elif old.row[j] != row:
            changed[sim_id] = "its index-table row changed"
            carried_from.append(-1)
        else:
            carried_from.append(j)
    removed = tuple(i for i in previous.sim_ids if i not in seen)
    return UpdatePlan(tuple(carried_from), tuple(added), changed, removed)


def history_entry(plan: UpdatePlan | None, generation: int, count: int, skipped: int,
                  data_dir: str, created: str, export_id: str,
                  release_version: str = "") -> Generation:
    """One entry of ``export.json``'s ``generations``: when, from where, and what changed
    (a full export: every row added)."""
    counts = (plan.counts() if plan is not None
              else {"added": count, "removed": 0, "changed": 0, "carried": 0})
    return {"generation": generation, "created": created, "data_dir": data_dir,
            "release_version": release_version, "added": counts["added"],
            "removed": counts["removed"], "changed": counts["changed"],
            "carried": counts["carried"], "rows": count, "skipped": skipped,
            "export_id": export_id}


def _sim_ids(root: str, manifest: Mapping[str, Any]) -> np.ndarray:
    from guideloom.formats import get_format

    try:
        fmt = get_format(str(manifest["kind"]))
    except (KeyError, ValueError) as exc:
        raise UpdateRefusedError(f"cannot update {root}: {exc}") from exc
    ids: np.ndarray = fmt.open_reader(root, manifest).sim_ids()
    return ids


def describe_plan(plan: UpdatePlan, previous: Previous) -> str:
    """What ``--dry-run`` and the log say of an update plan."""
    first = ""
    if plan.changed:
        sim_id, why = next(iter(plan.changed.items()))
        first = f" (first changed: experiment {sim_id}: {why})"
    return (f"update of generation {previous.generation} at {previous.ref.root}: "
            f"{plan.text()}{first}")


@dataclass(frozen=True)
class UpdatePreview:
    """What ``--dry-run`` says of an update: its plan, the bytes it reads (the inputs of the
    experiments read) and the bytes it carries (the previous generation's share of them)."""

    plan: UpdatePlan
    previous: Previous
    bytes_read: int
    bytes_carried: int

    def line(self) -> str:
        """One line of the plan and its bytes."""
        if self.plan.up_to_date:
            return (f"{describe_plan(self.plan, self.previous)}: up to date, nothing would be "
                    "read or written")
        return (f"{describe_plan(self.plan, self.previous)}; reads {_human(self.bytes_read)} "
                f"of input, carries {_human(self.bytes_carried)} of rows")


def preview_update(previous: Previous, plan: Any) -> UpdatePreview:
    """The :class:`UpdatePreview` of the job planned as ``plan`` (an ``ExportPlan``: its
    selection and digests), without reading any record."""
    update = plan.update or plan_update(previous, plan.selection.ids, plan.inputs,
                                        plan.index_rows)
    sizes = input_sizes(plan.selection.locations)
    read = sum(size for size, j in zip(sizes, update.carried_from, strict=True) if j < 0)
    count = int(previous.manifest.get("count", 0)) or 1
    carried = _data_bytes(previous.ref.root) * update.carried // count
    return UpdatePreview(update, previous, read, carried)


def _data_bytes(root: str) -> int:
    """Bytes of an export's data files (its JSON documents left out)."""
    fs, path = fsspec.core.url_to_fs(root)
    sizes = fs.du(path, total=False)
    return sum(int(n) for name, n in sizes.items() if not str(name).endswith(".json"))


def _human(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"
