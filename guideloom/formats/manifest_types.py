"""The shapes of the two documents the executor writes: a partition's summary and ``export.json``.

A worker returns a :class:`PartitionSummary` for each partition it wrote (also kept as the
partition's marker in the staging area, ``parts/NNNNNN.json``); the driver combines them into the
:class:`ExportManifest` it publishes as ``export.json``. Both stay plain dicts at run time (they
go through JSON); these ``TypedDict`` s let mypy check the places that build and read them.

Documents read back from disk may come from an older guideloom and lack the keys marked
``NotRequired``; readers use ``.get`` for those. A format adds its own keys through
:meth:`~guideloom.formats.base.PartitionSink.extra_summary` and
:meth:`~guideloom.formats.base.ExportFormat.manifest_extra` (open dicts); the built-in formats'
keys are declared in :class:`SummaryExtra` and :class:`ManifestExtra`.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class SkippedRecord(TypedDict):
    """An experiment left out of the export (``on_error="skip"``)."""

    sim_id: Any  # the experiment id as the index table has it (int or str)
    file: str
    error: str


class SummaryExtra(TypedDict, total=False):
    """The keys the built-in formats' sinks add to their partition's summary."""

    checksums: dict[str, dict[str, Any]]  # group -> {"order", "digests", "rows"?}
    record_lengths: list[int]  # storage outputs: bytes of each record
    carried: int  # an update: rows carried from the previous generation (the executor's)


class PartitionSummary(SummaryExtra):
    """What one partition task returns (and records as its marker)."""

    index: int
    start: int
    written: list[Any]  # experiment ids written, in row order
    skipped: list[SkippedRecord]
    bytes: int  # written by the sink
    bytes_decoded: int  # of the records produced (decoded and transformed): the transform output
    bytes_decoded_input: NotRequired[int]  # of the records as read and decoded, before transforms
    started: float  # time.time() when the task began
    seconds: float
    read_transform_s: NotRequired[float]
    write_s: NotRequired[float]
    dtypes: dict[str, list[str]]  # alias -> every dtype its records had (str: older markers)
    host: str
    verify_crc: NotRequired[bool]
    # fallback kind -> times taken (guideloom.runtime.fallbacks)
    fallbacks: NotRequired[dict[str, int]]
    # id -> the BLAKE3 digest of the input each row read (guideloom.read.content)
    input_digests: NotRequired[dict[str, str]]
    input_hash_s: NotRequired[float]  # seconds spent hashing them (on a helper thread)
    input_hash_cpu_s: NotRequired[float]  # CPU seconds of that hashing
    input_hash_wait_s: NotRequired[float]  # seconds the partition waited for those hashes


class ViewField(TypedDict):
    """One field of the exported view."""

    alias: str
    source: str
    timesteps: Any  # None, an int or a list, as the view gives it


class Filters(TypedDict):
    """Which experiments the job selected."""

    sim_ids: list[str] | None
    where: str | None


class ChecksumsEntry(TypedDict):
    """What ``export.json`` records about ``checksums.json`` (no digests)."""

    algorithm: str
    file: str
    sha256: str
    groups: dict[str, int]  # group -> units


class DescriptionEntry(TypedDict):
    """The Croissant description beside the data (``croissant.json``) and its sha256."""

    file: str
    sha256: str


class ManifestHead(TypedDict):
    """The entries of ``export.json`` written before a format's own (:class:`ManifestExtra`)."""

    format: str
    format_version: int
    kind: str
    view: str
    view_fields: list[ViewField]
    fields: dict[str, dict[str, Any]]  # alias -> {"shape", "dtype", ...} (the format's)
    count: int
    sim_ids_sha256: str
    sim_ids_dtype: str
    filters: Filters
    transforms: dict[str, str | None]
    record_transform: str | None
    on_error: str
    verify_crc: bool
    skipped: list[SkippedRecord]
    missing: list[str]
    partition_size: int
    n_partitions: int
    identity: str
    options: dict[str, str | int | bool]


class ManifestExtra(TypedDict, total=False):
    """The keys the built-in formats add to ``export.json``."""

    storage: dict[str, Any]  # storage outputs: the storage format and its settings
    zarr_all_chunks: bool  # zarr: every chunk has its file
    zarr_carried: dict[str, dict[str, int]]  # zarr update: chunk files linked/copied per alias


class Recipe(TypedDict):
    """``export.json``'s ``recipe``: the sha256 of each part of what makes one experiment's
    rows (output kind, view, ``on_error``, options, transforms' code), and of all; since
    scheme 2 also each transform's components (see :mod:`guideloom.export.recipe`) and the
    user's ``code_version``."""

    sha256: str
    parts: dict[str, str]
    scheme: NotRequired[int]
    code_version: NotRequired[str | None]
    components: NotRequired[dict[str, dict[str, str]]]


class ProvenanceEntry(TypedDict):
    """``export.json``'s ``provenance``: the file recording what each row came from, and
    when the export that took its inputs' evidence started (the "racy" rule)."""

    file: str
    sha256: str
    started_ns: NotRequired[int]


class Generation(TypedDict):
    """One entry of ``export.json``'s ``generations`` (the first: the full export)."""

    generation: int
    created: str
    data_dir: str
    release_version: str  # the DOI's dataset version read ("2.0"), else ""
    added: int
    removed: int
    changed: int
    carried: int
    rows: int
    skipped: int
    export_id: str


class ManifestTail(TypedDict):
    """The entries of ``export.json`` that a format's own cannot replace."""

    checksums: NotRequired[ChecksumsEntry]
    export_id: str
    guideloom_version: str
    placement: dict[str, Any]
    fallbacks: NotRequired[dict[str, int]]  # the partitions' fallbacks, summed
    timings: dict[str, float]
    steps: NotRequired[dict[str, float]]  # wall seconds per step (export/clock.py)
    data_dir: str
    created: str
    description: NotRequired[DescriptionEntry]
    unverified: NotRequired[bool]  # described from an rddac export directory, no export.json
    written_by: NotRequired[str]
    recipe: NotRequired[Recipe]
    provenance: NotRequired[ProvenanceEntry]
    generations: NotRequired[list[Generation]]


class ExportManifest(ManifestHead, ManifestExtra, ManifestTail):
    """``export.json``: what a published export holds and how it was made (the head, the
    format's entries, the tail)."""


class TransformNames(TypedDict):
    """The names of a job's transforms as ``export.json`` records them."""

    transforms: dict[str, str | None]
    record_transform: str | None
