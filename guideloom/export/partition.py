"""The worker side of an export: what runs where the partitions run (a Dask worker, a
forked child or the driver itself): the schema probe, one partition read, transformed and
written (:func:`run_partition`), and the task functions the driver ships, which a worker
imports by this module's path. It imports nothing of the driver side (the plan, the placement
and cluster client, finishing and publishing; ``tests/test_architecture.py``)."""

from __future__ import annotations

import platform
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from guideloom import fastread
from guideloom.cluster.shipping import unpack
from guideloom.errors import ExperimentReadError, GuideloomError
from guideloom.export.overlap import OverlappedWrites
from guideloom.export.pipeline import (
    NUMERIC_KINDS,
    RecordSource,
    check_keys,
    check_schema,
    produce,
    reuse_buffers,
    schema_of,
)
from guideloom.export.spec import ExportSpec, FieldSchema, Partition
from guideloom.export.streamed import StreamedFields
from guideloom.formats import ExportFormat
from guideloom.formats.carry import PreviousRows, previous_rows
from guideloom.formats.manifest_types import PartitionSummary, SkippedRecord, SummaryExtra
from guideloom.read.content import Hasher, ReadCheck
from guideloom.read.fingerprint import racy_margin_ns
from guideloom.read.readahead import ReadAhead
from guideloom.read.records import RecordReader
from guideloom.runtime import fallbacks
from guideloom.runtime.faults import fault_point

PROBE_ATTEMPTS = 20


def forked_task(n: int, job: Any,
                context: tuple[Mapping[str, FieldSchema] | None, Mapping[str, str] | None],
                part: Partition) -> PartitionSummary:
    """One partition in a forked worker, its decode threads sized to its share of the CPUs;
    ``context`` is ``(schema, reference)``, sent by the driver after the fork."""
    fastread.share_cores(n)
    schema, reference = context
    return partition_task(job, schema, reference, part)


def job_payload(blob: bytes) -> bytes:
    """The job's bytes, as the result of a task that can be recomputed."""
    return blob


def _job(job: Any) -> tuple[ExportSpec, ExportFormat]:
    pair: tuple[ExportSpec, ExportFormat] = unpack(job) if isinstance(job, bytes) else job
    return pair


def probe_schema(
    spec: ExportSpec, locations: Sequence[Any], rows: Sequence[Mapping[str, Any]],
    allow_text: bool = False, reference: Mapping[str, str] | None = None,
    records: RecordSource | None = None,
) -> dict[str, FieldSchema]:
    """Shapes and dtypes from the first record that reads (runs on a worker).

    Without transforms the shapes are the HDF5 datasets' own, read from metadata only;
    otherwise the first record is read and transformed (``allow_text``: as the format takes
    it, for formats that fix only the keys). ``reference``: see :func:`reference_dtypes`.
    ``records`` reads the records instead of a reader of this call's own (the job's
    read-ahead, :class:`~guideloom.read.readahead.Peeking`).
    """
    reader = RecordReader(spec.view, verify_crc=spec.verify_crc, dtypes=reference)
    source: RecordSource = reader if records is None else records
    if not spec.transforms and spec.record_transform is None and locations:
        try:
            described = reader.shapes(locations[0], rows[0])
        except ExperimentReadError:
            described = None  # the full path below reports or skips it
        if described and all(dt.kind in NUMERIC_KINDS for _, dt in described.values()):
            return {a: FieldSchema(shape, dt.str) for a, (shape, dt) in described.items()}
    errors = []
    for loc, row in zip(locations, rows, strict=True):
        try:
            return schema_of(produce(spec, source, loc, row, allow_text=allow_text))
        except ExperimentReadError as exc:
            if spec.on_error == "raise":
                raise
            errors.append(exc)
    raise GuideloomError(
        f"no experiment among the first {len(errors)} could be read to learn the output "
        f"shapes; first error: {errors[0]}"
    )


def probe_task(job: Any, reference: Mapping[str, str] | None, locations: Sequence[Any],
               rows: Sequence[Mapping[str, Any]]) -> dict[str, FieldSchema]:
    spec, writer = _job(job)
    return probe_schema(spec, locations, rows, writer.allow_text, reference)


def partition_task(job: Any, schema: Mapping[str, FieldSchema] | None,
                   reference: Mapping[str, str] | None, part: Partition, *,
                   ahead: ReadAhead | None = None) -> PartitionSummary:
    spec, writer = _job(job)
    return run_partition(spec, writer, schema, part, reference, ahead=ahead)


def job_readahead(spec: ExportSpec, todo: Sequence[Partition],
                  reference: Mapping[str, str] | None = None) -> ReadAhead | None:
    """One :class:`ReadAhead` over the remote records of every partition of ``todo``, for
    partitions run one after another in this process: the next partition's records are
    fetched while this one's are transformed and written (a partition's own read-ahead would
    start cold at every partition). ``None`` when no record is remote."""
    if not spec.data_dir.high_latency:
        return None
    locations = [loc for part in todo for loc in part.locations]
    rows = [row for part in todo for row in part.rows]
    reader = RecordReader(spec.view, verify_crc=spec.verify_crc, dtypes=reference)
    return ReadAhead(reader, locations, rows)


def run_partition(spec: ExportSpec, writer: ExportFormat,
                  schema: Mapping[str, FieldSchema] | None, part: Partition,
                  reference: Mapping[str, str] | None = None, *,
                  ahead: ReadAhead | None = None) -> PartitionSummary:
    """Read, transform and write one partition; mark it done; return a small summary.

    Runs on a worker. Idempotent: a re-run writes the same bytes to the same places.
    ``reference`` (see :func:`reference_dtypes`) holds every record's HDF5 datatypes to the
    job's. ``ahead`` (:func:`job_readahead`, left open) reads the records instead of a
    read-ahead of this partition's own.
    """
    t0 = time.time()
    fell_back = fallbacks.snapshot()
    keys = schema if not writer.needs_schema else None  # fixed keys only: shapes may vary
    schema = None if keys is not None else schema
    shared = ahead
    if ahead is None:
        reader = RecordReader(spec.view, verify_crc=spec.verify_crc, dtypes=reference)
        ahead = ReadAhead(reader, part.locations, part.rows)  # remote records: fetched ahead
    sink = writer.sink(part, schema)
    first = reuse_buffers(spec, schema, writer.copies_records)
    overlapped: OverlappedWrites | StreamedFields | None = None
    streamed = None  # each field written while the next decodes (one buffer per field)
    if first is not None and writer.writes_fields:
        overlapped = streamed = StreamedFields(sink, first)
    elif first is not None and len(part.locations) > 1:
        overlapped = OverlappedWrites(sink, (first, reuse_buffers(spec, schema, True) or {}))
    written: list[Any] = []
    skipped: list[SkippedRecord] = []
    hashed: dict[str, str] = {}  # id -> the content digest of the input read
    hash_s = hash_cpu_s = hash_wait_s = 0.0  # hashing inputs; waiting for it after a decode
    hasher = Hasher()
    racy_ns = racy_margin_ns()
    decoded = 0  # bytes of the records produced (decoded and transformed)
    read_sizes: list[int] = []  # bytes of each record as read and decoded, before transforms
    dtypes: dict[str, list[str]] = {}  # alias -> every dtype its records had, first seen first
    produce_s = write_s = 0.0
    carried = part.carried
    previous = (None if not carried or spec.previous is None
                else previous_rows(spec.previous.root, spec.previous.export_id))
    n_carried = 0
    try:
        for k, (loc, row) in enumerate(zip(part.locations, part.rows, strict=True)):
            if carried and carried[k] >= 0:
                assert previous is not None
                if k == 0 or carried[k - 1] < 0 or carried[k - 1] != carried[k] - 1:
                    # a run of rows carried from consecutive rows starts here: carry it all
                    run = 1
                    while k + run < len(carried) and carried[k + run] == carried[k] + run:
                        run += 1
                    t_write = time.perf_counter()
                    if overlapped is not None:
                        overlapped.drain()
                    sink.carry(part.start + k, carried[k], run, previous)
                    write_s += time.perf_counter() - t_write
                    _carried_dtypes(dtypes, previous)
                    n_carried += run
                written.append(loc.sim_id)
                continue
            try:
                t_read = time.perf_counter()
                check = ReadCheck(loc, racy_ns)  # the input's stat before and after
                # hashed on a helper thread while this decodes, or (input_hold_mb > 0) read
                # once and decoded from memory; unless hashed in this state before
                hashing = hasher.start(loc, None if spec.verify_inputs else check.known())
                if streamed is not None:
                    streamed.start(part.start + k, loc.sim_id)
                arrays = produce(spec, ahead, hashing.location, row, allow_text=writer.allow_text,
                                 raw=writer.raw_records,
                                 into=first if overlapped is None else overlapped.buffers(),
                                 on_read=read_sizes.append,
                                 on_field=None if streamed is None else streamed.field)
                if schema is not None:
                    check_schema(arrays, schema, loc)
                elif keys is not None:
                    check_keys(arrays, keys, loc)
                t_hash = time.perf_counter()
                digest = hashing.result()
                check.end(digest)
                hashed[str(loc.sim_id)] = digest.digest
                t_write = time.perf_counter()
                hash_s += digest.seconds
                hash_cpu_s += digest.cpu_s
                hash_wait_s += t_write - t_hash
                (sink if overlapped is None else overlapped).write(part.start + k, loc.sim_id,
                                                                   arrays)
                produce_s += t_write - t_read
                if overlapped is None:
                    write_s += time.perf_counter() - t_write
            except ExperimentReadError as exc:
                if spec.on_error == "raise":
                    raise
                if streamed is not None:  # fields written before it failed: not published
                    streamed.discard(part.start + k)
                skipped.append({"sim_id": loc.sim_id, "file": exc.file, "error": str(exc)})
                continue
            written.append(loc.sim_id)
            if isinstance(arrays, Mapping):
                for alias, arr in arrays.items():
                    decoded += int(getattr(arr, "nbytes", 0) or 0)
                    seen = dtypes.setdefault(alias, [])
                    dt = getattr(getattr(arr, "dtype", None), "str", "object")
                    if dt not in seen:
                        seen.append(dt)
    except BaseException:
        hasher.close()
        if shared is None:
            ahead.close()
        (sink if overlapped is None else overlapped).abort()
        raise
    hasher.close()
    if shared is None:
        ahead.close()
    if n_carried != sum(1 for j in carried if j >= 0):  # every carried row went to the sink
        (sink if overlapped is None else overlapped).abort()
        raise GuideloomError(f"partition {part.index} carried {n_carried} of "
                             f"{sum(1 for j in carried if j >= 0)} rows; nothing published")
    t_close = time.perf_counter()
    n_bytes = (sink if overlapped is None else overlapped).close()
    write_s += time.perf_counter() - t_close + (0.0 if overlapped is None else overlapped.busy_s)
    summary: PartitionSummary = {
        **cast(SummaryExtra, sink.extra_summary()),  # a plugin's own keys ride along untyped
        "index": part.index,
        "start": part.start,
        "written": written,
        "skipped": skipped,
        "bytes": n_bytes,
        "bytes_decoded": decoded,
        "bytes_decoded_input": sum(read_sizes),
        "started": t0,
        "seconds": time.time() - t0,
        "read_transform_s": produce_s,
        "write_s": write_s,
        "dtypes": dtypes,
        "host": platform.node(),
        "verify_crc": spec.verify_crc,
        "fallbacks": fallbacks.since(fell_back),
        "input_digests": hashed,
        "input_hash_s": hash_s,
        "input_hash_cpu_s": hash_cpu_s,
        "input_hash_wait_s": hash_wait_s,
    }
    if carried:
        summary["carried"] = n_carried
    writer.stage.write_marker(part.index, summary)
    fault_point("partition-marked")
    return summary


def _carried_dtypes(dtypes: dict[str, list[str]], previous: PreviousRows) -> None:
    """Add the dtypes of the previous generation's fields to a partition's ``dtypes`` (the
    rows it carried have them)."""
    for alias, entry in previous.manifest["fields"].items():
        seen = dtypes.setdefault(alias, [])
        for dt in entry.get("dtypes") or [entry.get("dtype")]:
            if isinstance(dt, str) and dt != VARIES and dt not in seen:
                seen.append(dt)
VARIES = "varies"  # the "dtype" of a field whose records have different dtypes
