"""An export's finish, in the driver once every partition is written: the rows closed,
``provenance.json``, ``checksums.json``, ``croissant.json`` and ``export.json`` written, one
fsync pass, and the publish (:func:`finalize_export`); the row files hashed as partitions
finish (:func:`prefix_hashes`)."""

from __future__ import annotations

import hashlib
import logging
import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from guideloom import __version__
from guideloom.errors import GuideloomError, SkippedDataWarning, summarize_ids, warn
from guideloom.export import clock as steps
from guideloom.export.partition import VARIES
from guideloom.export.plan import ExportPlan
from guideloom.export.prehash import PrefixHashes
from guideloom.export.progress import CHECKSUMS, FINALIZE, PUBLISH, RunMonitor
from guideloom.export.provenance import document as provenance_document
from guideloom.export.provenance import manifest_entry as provenance_entry
from guideloom.export.publish import CROISSANT_NAME, describe_export, origin_of
from guideloom.export.spec import ExportSpec, FieldSchema
from guideloom.export.staging import PHASE_FINALIZING, Staging
from guideloom.export.update import Previous, history_entry
from guideloom.formats import ExportFormat
from guideloom.formats.checksums import (
    CHECKSUMS_FILE,
    DESCRIPTION_KEY,
    combine,
    description_entry,
    file_digest,
    manifest_entry,
)
from guideloom.formats.durable import fsync_tree
from guideloom.formats.layout import (
    EXPORT_MANIFEST,
    FORMAT_VERSION,
    MANIFEST_FORMAT,
    PROVENANCE_FILE,
)
from guideloom.formats.manifest_types import (
    ChecksumsEntry,
    ExportManifest,
    ManifestExtra,
    ManifestHead,
    ManifestTail,
    PartitionSummary,
    ProvenanceEntry,
)
from guideloom.read.content import content_digest
from guideloom.runtime import fallbacks
from guideloom.runtime.faults import fault_point

logger = logging.getLogger(__name__)

CROISSANT_HASH_LIMIT = 64 << 20  # bytes: larger files are described without a sha256


def prefix_hashes(writer: ExportFormat, schema: Mapping[str, FieldSchema] | None,
                  staging: Staging, dask: Any, done: Iterable[PartitionSummary]
                  ) -> PrefixHashes | None:
    """The row files ``croissant.json`` will hash, hashed as their partitions finish; only
    when the tasks run in this process (each partition's rows are then written and fsynced
    when its task returns here), else ``None``."""
    if dask is not None or not staging.is_local or schema is None:
        return None
    try:
        files = {name: f for name, f in writer.row_files(schema).items()
                 if os.path.getsize(f[0]) <= CROISSANT_HASH_LIMIT}
    except OSError:
        return None  # finalize hashes the files as ever
    if not files:
        return None
    hashes = PrefixHashes(files)
    for summary in done:  # resumed: partitions an earlier run finished
        hashes.rows_final(summary["start"], count_experiments([summary]))
    return hashes


def task_seconds(summaries: Sequence[PartitionSummary]) -> dict[str, float]:
    """Seconds the tasks spent reading and transforming, and writing (the sink's ``write`` and
    ``close``), summed over partitions (task time, not wall time)."""
    return {"read_transform_s": round(sum(float(s.get("read_transform_s", 0.0))
                                          for s in summaries), 4),
            "write_s": round(sum(float(s.get("write_s", 0.0)) for s in summaries), 4)}


def count_experiments(summaries: Iterable[PartitionSummary]) -> int:
    return sum(len(s["written"]) + len(s["skipped"]) for s in summaries)


PUBLISH_STEPS = 3  # describe (and fsync) the files, write export.json, rename into place


def variable_fields(summaries: Sequence[PartitionSummary]) -> dict[str, dict[str, Any]]:
    """The ``fields`` of an export without a schema (npz): every alias's dtype, or
    ``"varies"`` with the sorted ``"dtypes"`` when its records differ."""
    dtypes: dict[str, list[str]] = {}
    for summary in summaries:
        for alias, found in summary["dtypes"].items():
            seen = dtypes.setdefault(alias, [])
            for dt in [found] if isinstance(found, str) else found:  # str: an older marker
                if dt not in seen:
                    seen.append(dt)
    fields: dict[str, dict[str, Any]] = {}
    for alias, seen in sorted(dtypes.items()):
        if len(seen) == 1:
            fields[alias] = {"shape": None, "dtype": seen[0]}
        else:
            fields[alias] = {"shape": None, "dtype": VARIES, "dtypes": sorted(seen)}
    return fields


def finalize_export(spec: ExportSpec, staging: Staging, writer: ExportFormat, plan: ExportPlan,
                    schema: Mapping[str, FieldSchema] | None,
                    summaries: list[PartitionSummary], placed: dict[str, Any], monitor: RunMonitor,
                    timings: dict[str, float], started: float,
                    hashes: PrefixHashes | None = None,
                    previous: Previous | None = None) -> ExportManifest:
    ids = plan.selection.ids
    written = {i for s in summaries for i in s["written"]}
    skipped = [x for s in summaries for x in s["skipped"]]
    keep = np.array([i in written for i in ids], dtype=bool)
    if not keep.any():
        raise GuideloomError(
            f"every experiment failed; nothing published. First error: {skipped[0]['error']}"
        )
    monitor.phase(FINALIZE, detail=(f"closing the gaps of {len(skipped)} skipped experiments"
                                    if skipped and not keep.all() else ""))
    staging.update_job(phase=PHASE_FINALIZING)
    fault_point("finalize-started")
    if hasattr(writer, "finalize_progress"):  # a format that reports its finalize's progress
        writer.finalize_progress = monitor.step
    writer.finalize(None if keep.all() else keep)
    fault_point("rows-finalized")
    sim_ids = np.asarray([i for i, k in zip(ids, keep, strict=True) if k])
    writer.write_sim_ids(sim_ids, summaries)
    fault_point("sim-ids-written")
    clock = monitor.clock
    clock.lap(steps.ROWS)
    provenance = record_provenance(staging, plan, keep, summaries)
    fault_point("provenance-written")
    clock.lap(steps.PROVENANCE)
    monitor.phase(CHECKSUMS)
    monitor.step(0, 1, "files")
    checksums = record_checksums(staging, writer, summaries, len(sim_ids))
    monitor.step(1, 1, "files")
    fault_point("checksums-written")
    clock.lap(steps.CHECKSUMS)
    monitor.phase(PUBLISH)
    monitor.step(0, PUBLISH_STEPS, "steps")
    if not writer.needs_schema:  # npz probes a schema for its keys only
        fields = variable_fields(summaries)
    else:
        assert schema is not None  # probed before the partitions ran
        fields = {a: s.to_json() for a, s in schema.items()}
    fields = writer.fields(fields)
    if skipped:
        warn(
            f"export of view {spec.view.name!r} skipped "
            f"{summarize_ids([x['sim_id'] for x in skipped])}; first error: "
            f"{skipped[0]['error']} (all errors are listed in {EXPORT_MANIFEST})",
            SkippedDataWarning,
        )
    head: ManifestHead = {
        "format": MANIFEST_FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": spec.output,
        "view": spec.view.name,
        "view_fields": [
            {"alias": f.alias, "source": f.source_id, "timesteps": f.timesteps}
            for f in spec.view.fields
        ],
        "fields": fields,
        "count": len(sim_ids),
        "sim_ids_sha256": hashlib.sha256(np.ascontiguousarray(sim_ids).tobytes()).hexdigest(),
        "sim_ids_dtype": sim_ids.dtype.str,
        "filters": {
            "sim_ids": None if spec.sim_ids is None else [str(i) for i in spec.sim_ids],
            "where": spec.where_description,
        },
        **spec.transform_names(),
        "on_error": spec.on_error,
        # every row was read with its zip member's CRC-32 checked (resumed partitions included)
        "verify_crc": all(s.get("verify_crc", False) for s in summaries),
        "skipped": skipped,
        "missing": [str(i) for i in plan.selection.missing],
        "partition_size": plan.partition_size,
        "n_partitions": len(plan.partitions),
        "identity": plan.identity,
        "options": {k: v for k, v in spec.options.items() if isinstance(v, str | int | bool)},
    }
    tail: ManifestTail = {
        "export_id": uuid.uuid4().hex,
        "guideloom_version": __version__,
        "placement": placed,
        "fallbacks": fallbacks.total(s.get("fallbacks") or {} for s in summaries),
        # every phase so far; publish_s covers describing the export up to this file (the
        # final rename after it takes milliseconds; the run report has it)
        "timings": {**monitor.timings(), "total_s": round(time.time() - started, 4),
                    **timings},
        "data_dir": str(spec.data_dir),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "recipe": spec.recipe(),
        "provenance": provenance,
    }
    # (an export that can be updated has its history: recipe and generations came together)
    history = list(previous.manifest.get("generations") or []) if previous else []
    tail["generations"] = [*history, history_entry(
        plan.update, len(history) + 1, len(sim_ids), len(skipped), tail["data_dir"],
        tail["created"], tail["export_id"], spec.data_dir.release_version)]
    if checksums:
        tail = {"checksums": checksums, **tail}
    # the format's entries override the head, the tail overrides them (a plugin's own keys
    # ride along untyped)
    manifest: ExportManifest = {**head, **cast(ManifestExtra, writer.manifest_extra()), **tail}
    if staging.is_local:  # a catalogue entry beside the data; export.json stays the last file
        described = staging.path("data", CROISSANT_NAME)
        digests = {} if hashes is None else hashes.finish(staging.path("data"))
        staging.write_json(described, describe_published(spec, writer, staging, manifest,
                                                         digests), durable=False)
        manifest[DESCRIPTION_KEY] = description_entry(described)  # checked on open and verify
        fault_point("description-written")
        monitor.step(1, PUBLISH_STEPS, "steps")
        clock.lap(steps.CROISSANT)
    monitor.step(2, PUBLISH_STEPS, "steps")
    manifest["steps"] = clock.rounded()  # those after it: ExportResult.steps
    staging.write_json(staging.path("data", EXPORT_MANIFEST), manifest, durable=False)
    clock.lap(steps.MANIFEST)
    if staging.is_local:
        # one pass for every file of data/ (rows, sim_ids, provenance, checksums, croissant,
        # export.json) and the folder: all of it is on disk before the job is marked
        # "publishing", the only state in which a staged data/ is ever published
        fsync_tree(staging.path("data"))
        clock.lap(steps.FSYNC)
    fault_point("manifest-written")
    staging.publish(spec.overwrite or previous is not None, export_id=manifest["export_id"])
    monitor.step(PUBLISH_STEPS, PUBLISH_STEPS, "steps")
    clock.lap(steps.PUBLISH)
    return manifest


def record_provenance(staging: Staging, plan: ExportPlan, keep: np.ndarray,
                      summaries: Sequence[PartitionSummary] = ()) -> ProvenanceEntry:
    """Write ``provenance.json`` (what each published row came from) into ``data/``; return
    the entry ``export.json`` keeps (its sha256).

    A row's content digest is the one its partition hashed while reading it, or, carried,
    the update plan's. The recorded start is the earliest of the plan's and of the
    partitions' (a resumed job's partitions may have hashed in an earlier run).
    """
    rows = np.flatnonzero(keep)
    hashed: dict[str, str] = {}
    for summary in summaries:
        hashed.update(summary.get("input_digests") or {})
    carried = plan.update.digests if plan.update is not None else ()
    ids = plan.selection.ids
    digests = []
    for k in rows:
        digest = carried[k] if carried and carried[k] else hashed.get(str(ids[k]))
        if not digest:  # a partition resumed from a marker of a guideloom before digests
            loc = plan.selection.locations[k]
            logger.info("guideloom: hashing the input of experiment %s (%s): its partition "
                        "recorded no digest", ids[k], loc.describe())
            digest = content_digest(loc).digest  # (the job's identity: the input unchanged)
        digests.append(digest)
    starts = [int(float(s["started"]) * 1e9) for s in summaries if s.get("input_digests")]
    started_ns = min([plan.started_ns or time.time_ns(), *starts])
    doc = provenance_document([plan.inputs[k] for k in rows], digests,
                              [plan.index_rows[k] for k in rows])
    # made durable with the rest of data/ by finalize's one fsync pass
    blob = staging.write_json(staging.path("data", PROVENANCE_FILE), doc, durable=False,
                              compact=True)
    return cast(ProvenanceEntry, provenance_entry(blob, started_ns))


def record_checksums(staging: Staging, writer: ExportFormat, summaries: list[PartitionSummary],
                     count: int) -> ChecksumsEntry | None:
    """Write ``checksums.json`` (the workers' per-row digests in published order, plus the
    format's whole small files) and return the entry ``export.json`` keeps, or ``None`` when
    the partitions were written without checksums."""
    files = {name: file_digest(staging.path("data", name))[0]
             for name in writer.checksummed_files()}
    doc = combine(summaries, count, files)
    if doc is None:
        return None
    staging.write_json(staging.path("data", CHECKSUMS_FILE), doc, durable=False,  # as above
                       compact=True)
    return manifest_entry(doc)


def describe_published(spec: ExportSpec, writer: ExportFormat, staging: Staging,
                       manifest: ExportManifest,
                       digests: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The Croissant 1.1 description of the staged export (``croissant.json``).

    Files up to :data:`CROISSANT_HASH_LIMIT` are hashed (sha256), unless ``digests`` (by
    absolute path, from :func:`prefix_hashes`) has theirs; larger ones are described
    without a hash, which would cost a second full read of the export.
    """
    data = staging.path("data")
    files = {key: name if "*" in name else os.path.join(data, name)
             for key, name in writer.described_files(manifest).items()}
    # the dataset's name, URL, licence and citation: its manifest as loaded has them (the
    # views a to_jsonld() adds to a copy of it are not described)
    return describe_export(manifest, files, source=origin_of(spec.dataset.manifest), root=data,
                           hash_limit=CROISSANT_HASH_LIMIT, digests=digests)
