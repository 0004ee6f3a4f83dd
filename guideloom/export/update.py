"""Updating an export: what changed since it was written, and what can be carried over.

Every export records what each of its rows came from (``provenance.json``, see
:mod:`guideloom.export.provenance`) and the recipe that made the rows (``export.json``'s
``recipe``: output kind, view, ``on_error``, options, transforms' code). An update is an export
job like any other (same partitions, markers, lock, resume and atomic publish) whose partitions
know, experiment by experiment, which row of the previous generation already holds its output:
those rows are carried (copied, linked or reused by the format), the others read and decoded.

An experiment is

- **added** when the previous generation has no row of it (new, or skipped before);
- **changed** when its index-table row differs, or its input's bytes differ: the cheap
  evidence (:func:`~guideloom.read.fingerprint.input_evidence`: size, times, inode, member
  entry; a remote file's size and server checksum) is trusted only when all of it is unchanged
  and the file was last changed well before the previous export started (the "racy" rule,
  :func:`~guideloom.read.fingerprint.trusted`); otherwise the input is hashed now
  (:mod:`guideloom.read.content`) and its BLAKE3 digest compared with the recorded one
  (``verify_inputs=True`` hashes every input so); a row recorded without a digest (an export
  of guideloom before issue 38) is read again;
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
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fsspec
import numpy as np

from guideloom.errors import ExperimentReadError, IncompleteExportError, UpdateRefusedError
from guideloom.export.provenance import Provenance, read_provenance
from guideloom.export.recipe.compare import differences, untrusted
from guideloom.export.spec import ExportSpec, PreviousGeneration
from guideloom.formats.layout import read_export_manifest
from guideloom.formats.manifest_types import ExportManifest, Generation
from guideloom.read.content import HASH_NAME, Hashed, content_digests
from guideloom.read.fingerprint import evidence_differs, input_sizes, trusted

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
        changed: ``{id: why}`` of the ids read because their input or index row changed
            (``"input bytes changed (ctime changed; blake3 differs)"``).
        removed: Ids of previous rows that the new selection leaves out.
        digests: Per experiment of the new selection: the content digest of a carried one's
            input (recorded, or hashed now), ``None`` for one that is read.
        rehashed: ``{id: why}`` of the carried ids whose input was hashed again and found
            unchanged (``"re-hashed: unchanged; ctime changed"``).
        hashed_bytes: Bytes of input hashed by the plan.
        hash_s: Seconds the plan spent hashing them.
    """

    carried_from: tuple[int, ...]
    added: tuple[Any, ...] = ()
    changed: Mapping[Any, str] = field(default_factory=dict)
    removed: tuple[Any, ...] = ()
    digests: tuple[str | None, ...] = ()
    rehashed: Mapping[Any, str] = field(default_factory=dict)
    hashed_bytes: int = 0
    hash_s: float = 0.0

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

    def reasons(self, sim_ids: Sequence[Any]) -> list[str]:
        """Per experiment, in output order (``sim_ids``, the new selection's), then the
        removed ones: why it is read or how it is carried (``"4501: input bytes changed
        (ctime changed; blake3 differs)"``, ``"4502: carried (re-hashed: unchanged; ctime
        changed)"``, ``"4503: carried (evidence unchanged)"``)."""
        added = {str(i) for i in self.added}
        changed = {str(k): v for k, v in self.changed.items()}
        rehashed = {str(k): v for k, v in self.rehashed.items()}
        out = []
        for sim_id in sim_ids:
            key = str(sim_id)
            if key in added:
                out.append(f"{sim_id}: added")
            elif key in changed:
                out.append(f"{sim_id}: {changed[key]}")
            elif key in rehashed:
                out.append(f"{sim_id}: carried ({rehashed[key]})")
            else:
                out.append(f"{sim_id}: carried (evidence unchanged)")
        out.extend(f"{sim_id}: removed" for sim_id in self.removed)
        return out


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
    if len(provenance.inputs) != len(ids):
        raise UpdateRefusedError(f"cannot update {root}: provenance.json has "
                                 f"{len(provenance.inputs)} rows, sim_ids {len(ids)}: the export "
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


def plan_update(previous: Previous, sim_ids: Sequence[Any],
                inputs: Sequence[Mapping[str, Any]], row_tokens: Sequence[str],
                locations: Sequence[Any] = (), verify_inputs: bool = False) -> UpdatePlan:
    """Compare the new selection (ids in output order with their input evidence and
    index-row digests, see :mod:`guideloom.export.provenance`; ``locations`` where their
    inputs are) with the previous generation's rows.

    An input whose evidence is not trusted (:func:`~guideloom.read.fingerprint.trusted`:
    something of it changed, or it changed too close to the previous export's start), or
    every input with ``verify_inputs``, is hashed now and carried only when its digest is
    the recorded one. Without ``locations`` nothing is hashed: such an input counts as
    changed.
    """
    old_rows = {sim_id: j for j, sim_id in enumerate(previous.sim_ids)}
    old = previous.provenance
    carried_from: list[int] = []
    digests: list[str | None] = []
    added: list[Any] = []
    changed: dict[Any, str] = {}
    suspect: dict[int, str] = {}  # position -> the evidence that differs ("" when none)
    seen = set()
    for k, (sim_id, evidence, row) in enumerate(zip(sim_ids, inputs, row_tokens, strict=True)):
        key = str(sim_id)
        seen.add(key)
        j = old_rows.get(key)
        recorded = None if j is None else old.inputs[j]
        if j is None:
            added.append(sim_id)
        elif old.row[j] != row:
            changed[sim_id] = "index row changed"
        elif recorded is None or not recorded.get(HASH_NAME):
            changed[sim_id] = "recorded no input digest (older guideloom)"
        else:
            differs = evidence_differs(recorded, evidence)
            if differs or verify_inputs or not trusted(recorded, old.started_ns):
                suspect[k] = ("; ".join(differs) or ("verify_inputs" if verify_inputs else
                                                     "changed too close to the export's start"))
            carried_from.append(j)
            digests.append(str(recorded[HASH_NAME]))
            continue
        carried_from.append(-1)
        digests.append(None)
    rehashed, hashed_bytes, hash_s = _rehash(previous, suspect, sim_ids, locations,
                                             carried_from, digests, changed)
    removed = tuple(i for i in previous.sim_ids if i not in seen)
    return UpdatePlan(tuple(carried_from), tuple(added), changed, removed, tuple(digests),
                      rehashed, hashed_bytes, hash_s)


def _rehash(previous: Previous, suspect: Mapping[int, str], sim_ids: Sequence[Any],
            locations: Sequence[Any], carried_from: list[int], digests: list[str | None],
            changed: dict[Any, str]) -> tuple[dict[Any, str], int, float]:
    """Hash the inputs at the positions ``suspect`` (position -> the evidence that differs)
    and compare each with its recorded digest (``digests``): equal keeps it carried, else it
    is read (``carried_from`` -1, ``changed`` says why). Returns the re-hashed ones' reasons,
    the bytes hashed and the seconds it took."""
    if not suspect:
        return {}, 0, 0.0
    order = sorted(suspect)
    rehashed: dict[Any, str] = {}
    if not locations:
        for k in order:
            changed[sim_ids[k]] = f"input not verified ({suspect[k]}; not hashed)"
            carried_from[k], digests[k] = -1, None
        return rehashed, 0, 0.0
    t0 = time.perf_counter()
    hashed: dict[int, Hashed | Exception] = {}
    try:
        found = content_digests([locations[k] for k in order])
        hashed.update(zip(order, found, strict=True))
    except (ExperimentReadError, OSError):
        for k in order:  # one by one: the unreadable ones are read (and reported) as changed
            try:
                hashed[k] = content_digests([locations[k]])[0]
            except (ExperimentReadError, OSError) as exc:
                hashed[k] = exc
    nbytes = 0
    for k in order:
        got, why = hashed[k], suspect[k]
        if isinstance(got, Exception):
            changed[sim_ids[k]] = f"input could not be hashed ({why}; {got})"
            carried_from[k], digests[k] = -1, None
            continue
        nbytes += got.nbytes
        if got.digest == digests[k]:
            rehashed[sim_ids[k]] = f"re-hashed: unchanged; {why}"
        else:
            changed[sim_ids[k]] = f"input bytes changed ({why}; {HASH_NAME} differs)"
            carried_from[k], digests[k] = -1, None
    seconds = time.perf_counter() - t0
    logger.info("update of %s: re-hashed %d inputs (%d bytes) in %.3f s (%.0f MB/s): %d "
                "unchanged, %d changed", previous.ref.root, len(order), nbytes, seconds,
                nbytes / 1e6 / max(seconds, 1e-9), len(rehashed), len(order) - len(rehashed))
    return rehashed, nbytes, seconds


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


DRY_RUN_SHOWN = 20  # experiments listed by ``--dry-run`` (``--dry-run --all`` lists every one)


@dataclass(frozen=True)
class UpdatePreview:
    """What ``--dry-run`` says of an update: its plan, the bytes it reads (the inputs of the
    experiments read) and the bytes it carries (the previous generation's share of them),
    and the new selection's ids (for the per-experiment reasons)."""

    plan: UpdatePlan
    previous: Previous
    bytes_read: int
    bytes_carried: int
    sim_ids: tuple[Any, ...] = ()

    def line(self) -> str:
        """One line of the plan and its bytes."""
        hashed = (f"; re-hashed {len(self.plan.rehashed) + _hashed_changed(self.plan)} inputs "
                  f"({_human(self.plan.hashed_bytes)})" if self.plan.hashed_bytes else "")
        if self.plan.up_to_date:
            return (f"{describe_plan(self.plan, self.previous)}: up to date, nothing would be "
                    f"read or written{hashed}")
        return (f"{describe_plan(self.plan, self.previous)}; reads {_human(self.bytes_read)} "
                f"of input, carries {_human(self.bytes_carried)} of rows{hashed}")

    def reasons(self, limit: int | None = DRY_RUN_SHOWN) -> list[str]:
        """Per experiment, why it would be read or how it is carried (the ones read, then
        the removed, then the re-hashed, then the others), at most ``limit`` lines (``None``:
        all) and a last line counting the ones left out."""
        every = sorted(self.plan.reasons(self.sim_ids), key=_reason_rank)  # stable
        if limit is None or len(every) <= limit:
            return every
        return [*every[:limit], f"... and {len(every) - limit} more (--all lists every one)"]


def _reason_rank(line: str) -> int:
    """Changed first, then added, removed, re-hashed and the others carried."""
    what = line.split(": ", 1)[1]
    if what.startswith("carried (re-hashed"):
        return 3
    if what.startswith("carried"):
        return 4
    return {"added": 1, "removed": 2}.get(what, 0)


def _hashed_changed(plan: UpdatePlan) -> int:
    return sum(1 for why in plan.changed.values() if "differs)" in why)


def preview_update(previous: Previous, plan: Any, verify_inputs: bool = False) -> UpdatePreview:
    """The :class:`UpdatePreview` of the job planned as ``plan`` (an ``ExportPlan``: its
    selection and digests), without reading any record (inputs whose evidence is not
    trusted are hashed, as the update would)."""
    update = plan.update or plan_update(previous, plan.selection.ids, plan.inputs,
                                        plan.index_rows, plan.selection.locations,
                                        verify_inputs)
    sizes = input_sizes(plan.selection.locations)
    read = sum(size for size, j in zip(sizes, update.carried_from, strict=True) if j < 0)
    count = int(previous.manifest.get("count", 0)) or 1
    carried = _data_bytes(previous.ref.root) * update.carried // count
    return UpdatePreview(update, previous, read, carried, tuple(plan.selection.ids))


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
