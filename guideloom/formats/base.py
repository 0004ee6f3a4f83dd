"""The one small abstract class every export format implements: writer, reader, file layout.

The executor calls the writer side (``allocate`` on the driver, ``sink(...).write`` on a worker
for each record of a partition, ``finalize`` and ``write_sim_ids`` on the driver); the reader
calls :meth:`ExportFormat.open_reader`. Neither names a format: both look it up in the registry
(:mod:`guideloom.formats`).
"""

from __future__ import annotations

import abc
import dataclasses
import fnmatch
import hashlib
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from tokenize import TokenError
from typing import Any, ClassVar, NoReturn, Protocol

import numpy as np

from guideloom.errors import CorruptExportError
from guideloom.formats.carry import PreviousRows
from guideloom.formats.checksums import CHECKSUMS_FILE, check_description, files_digests
from guideloom.formats.layout import (
    CROISSANT_FILE,
    EXPORT_MANIFEST,
    PROVENANCE_FILE,
    SIM_IDS_FILE,
)
from guideloom.formats.layout import (
    fail as fail,
)
from guideloom.formats.manifest_types import PartitionSummary
from guideloom.formats.options import NoOptions, has_required, make_options, options_schema
from guideloom.runtime.faults import EXECUTOR_POINTS, SCHEMA_POINTS

_TMP_SUFFIX = re.compile(r"\.tmp-\d+$")  # Staging.write_json's temporary names


class Stage(Protocol):
    """The parts of a job's staging area a format writes into (see ``export/staging.py``).

    Members are read-only (properties) so that frozen dataclasses and classes with properties,
    such as :class:`guideloom.export.staging.Staging`, satisfy the protocol.
    """

    @property
    def is_local(self) -> bool:
        """The staging directory is a local (or shared) path, not an fsspec URL."""

    def path(self, *parts: str) -> str:
        """A path inside the staging directory (``rows/…`` while writing, ``data/…`` final)."""

    def url_of(self, *parts: str) -> str:
        """The same as a URL or local path, for stores such as zarr."""

    def move(self, src: str, dst: str) -> None:
        """Rename ``src`` to ``dst`` on the staging filesystem."""

    def write_marker(self, index: int, summary: PartitionSummary) -> None:
        """Record partition ``index`` as done with its summary (the executor calls it)."""


class Schema(Protocol):
    """Shape (without the record axis) and dtype of one output alias."""

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of one record of the alias."""

    @property
    def dtype(self) -> str:
        """numpy dtype string (``"<f4"``…)."""


class Part(Protocol):
    """The partition a sink writes: its index and its rows ``[start, stop)``."""

    @property
    def index(self) -> int:
        """Partition number (0, 1, …)."""

    @property
    def start(self) -> int:
        """Row of its first record."""

    @property
    def stop(self) -> int:
        """Row after its last record."""


class WorkflowContext(Protocol):
    """What a format's :meth:`ExportFormat.workflow_options` may use of the workflow file being
    loaded (see :func:`guideloom.workflow.load_workflow`)."""

    @property
    def file(self) -> str:
        """The workflow file."""

    @property
    def target(self) -> str:
        """The job's output path (absolute) or URL."""

    @property
    def import_user_code(self) -> bool:
        """False on a dry run: references outside guideloom are not imported."""

    def error(self, key: str, message: str) -> NoReturn:
        """Raise the :class:`~guideloom.errors.WorkflowError` of ``key`` (dotted)."""

    def reference(self, ref: str, key: str) -> Any:
        """The object a ``module:name`` reference names (a stand-in on a dry run, see
        :meth:`deferred`)."""

    def deferred(self, value: Any) -> bool:
        """Whether ``value`` is a reference a dry run did not import."""


class PartitionSink:
    """Writes the records of one partition (on a worker)."""

    def write(self, row: int, sim_id: Any, arrays: Any) -> None:
        """Write one record at global ``row``."""
        raise NotImplementedError

    def discard(self, row: int) -> None:
        """Forget what :meth:`write` recorded of global ``row`` (checksums, byte counts): its
        record failed after some of its fields were written, and the row is never published
        (formats whose :attr:`ExportFormat.writes_fields` is true)."""
        raise NotImplementedError

    def write_apart(self) -> None:
        """From now on, write every call's bytes before it returns: the caller writes each
        field as soon as it is decoded (:mod:`guideloom.export.streamed`) and wants a failed
        write raised by that call. A sink that holds small rows back to write several at once
        (npy) stops doing so; the default does nothing."""

    def carry(self, row: int, old_row: int, count: int, previous: PreviousRows) -> None:
        """Write rows ``row .. row+count-1`` as the previous generation's rows ``old_row ..``
        hold them (an update's unchanged experiments). The default reads each row back with
        the format's reader and writes it again; formats do better (npy copies the bytes in
        the kernel, npz links the files)."""
        fields = previous.fields
        for k in range(count):
            arrays = previous.reader.row(old_row + k, fields)
            self.write(row + k, previous.sim_ids[old_row + k], arrays)

    def close(self) -> int:
        """Make the data durable; return the bytes written."""
        return 0

    def abort(self) -> None:
        """Release resources after a failure."""
        self.close()

    def extra_summary(self) -> dict[str, Any]:
        """Facts the finalize step needs beyond the written ids (e.g. record lengths)."""
        return {}


def check_sim_ids(root: str, manifest: Mapping[str, Any], sim_ids: np.ndarray) -> None:
    """Raise :class:`CorruptExportError` unless ``sim_ids`` has the recorded count and sha256."""
    count = int(manifest["count"])
    if len(sim_ids) != count:
        raise CorruptExportError(f"{root}: sim_ids has {len(sim_ids)} entries but export.json "
                                 f"records {count} rows")
    digest = hashlib.sha256(np.ascontiguousarray(sim_ids).tobytes()).hexdigest()
    if manifest.get("sim_ids_sha256") not in (None, digest):
        raise CorruptExportError(f"{root}: sim_ids do not match the checksum in export.json "
                                 "(reordered or edited)")


class FormatReader:
    """Reads rows of one published export of a format (see :class:`guideloom.Export`).

    Attributes:
        reads_lazily: Files are opened per read (npz, zarr chunks), not when the reader is
            made; :class:`guideloom.Export` then checks after each read that the directory was
            not replaced.
    """

    reads_lazily: ClassVar[bool] = False

    def __init__(self, root: str, manifest: Mapping[str, Any]):
        self.root, self.manifest = root, manifest

    def sim_ids(self) -> np.ndarray:
        """Experiment id of each row.

        Raises:
            CorruptExportError: ``sim_ids.npy`` is missing or not a valid ``.npy`` file.
        """
        try:
            ids: np.ndarray = np.load(f"{self.root}/{SIM_IDS_FILE}", allow_pickle=False)
            return ids
        except FileNotFoundError:
            fail(self.root, SIM_IDS_FILE, "missing")
        except (ValueError, SyntaxError, TokenError, EOFError) as exc:
            fail(self.root, SIM_IDS_FILE, f"not a valid .npy file ({type(exc).__name__}: {exc})")

    def row(self, i: int, fields: Sequence[str]) -> dict[str, np.ndarray]:
        """Row ``i`` as ``{field: array}``."""
        raise NotImplementedError

    def row_views(self, fields: Sequence[str]) -> tuple[tuple[str, np.ndarray], ...] | None:
        """``(field, array)`` pairs whose ``array[i, ...]`` is row ``i``'s value of the field,
        for a reader whose rows are views of arrays it holds open (memory maps); ``None``
        (the default) when rows are read some other way. :class:`guideloom.Export` indexes
        them itself, so reading a row costs no call into the reader."""
        del fields
        return None

    def batch(self, idx: np.ndarray, fields: Sequence[str]) -> dict[str, np.ndarray]:
        """Rows ``idx`` stacked per field."""
        raise NotImplementedError

    def rows(self, indices: Sequence[int], fields: Sequence[str]) -> list[dict[str, np.ndarray]]:
        """Rows ``indices`` as a list of row dicts (default: one :meth:`row` each)."""
        return [self.row(int(i), fields) for i in indices]


class ExportFormat(abc.ABC):
    """One output kind: how it is written (bound to a staging area) and how it is read.

    Attributes:
        kind: The name in ``export.json`` and the registry (``"npy"``…).
        needs_schema: Rows have one shape per alias, probed from the first record.
        fixed_keys: Every record has the aliases of the first record (probed like the schema,
            shapes and dtypes may vary); a record with other keys is refused naming them.
        allow_text: Text fields may be written (as numpy string arrays).
        raw_records: The record goes to the format as the transform returned it.
        copies_records: The sink's ``write`` has copied the arrays when it returns (so the
            executor may decode the next record into the same buffers).
        writes_fields: The sink's ``write`` takes any subset of a record's fields, each
            written apart, and :meth:`PartitionSink.discard` forgets a row (so the executor
            writes each field while the next decodes: :mod:`guideloom.export.streamed`).
        local_only: The format writes local (or shared) paths only, not fsspec URLs.
        file_group: The checksum group whose units are whole files (see :meth:`group_files`).
        description: One line saying what the output is (``guideloom formats``, the docs,
            the workflow schema).
        Options: A frozen dataclass of the format's options with their defaults (see
            :mod:`guideloom.formats.options`); ``self.settings`` is an instance of it.
        fault_points: Names of this format's own steps where a crash must be survivable
            (it calls :func:`guideloom.runtime.faults.fault_point` there); with the executor's
            (:meth:`every_fault_point`) they are what :class:`guideloom.testing.FormatTests`
            crashes at.
        skip_fault_points: Points of the format reached only when experiments were skipped
            (rows are compacted).
        compressions: The values ``[output] compression`` takes in a workflow file for this
            kind, the default first; ``None``: the key is not checked (and not used).
        workflow_table: The options come from the workflow file's ``[output.<kind>]`` table
            (schema :meth:`table_schema`); ``None``: when :attr:`Options` has fields.
        updatable: An export of this format can be updated (``update=True``): its sinks
            carry unchanged rows (:meth:`PartitionSink.carry`) so that the result equals a
            full export of the new selection.
        keeps_partitions: A partition is a unit of the published layout (a storage's shard):
            an update without a ``partition_size`` of the user's keeps the previous
            generation's, so that its units stay whole where rows were only appended.
    """

    kind: ClassVar[str]
    needs_schema: ClassVar[bool] = True
    fixed_keys: ClassVar[bool] = False
    allow_text: ClassVar[bool] = False
    raw_records: ClassVar[bool] = False
    copies_records: ClassVar[bool] = False
    writes_fields: ClassVar[bool] = False
    local_only: ClassVar[bool] = True
    file_group: ClassVar[str | None] = None
    description: ClassVar[str] = ""
    Options: ClassVar[type] = NoOptions
    fault_points: ClassVar[tuple[str, ...]] = ()
    skip_fault_points: ClassVar[tuple[str, ...]] = ()
    compressions: ClassVar[tuple[str, ...] | None] = ("none",)
    workflow_table: ClassVar[bool | None] = None
    updatable: ClassVar[bool] = False
    keeps_partitions: ClassVar[bool] = False

    def __init__(self, stage: Stage, options: Mapping[str, Any]):
        self.stage = stage
        self.options = dict(options)

    @property
    def settings(self) -> Any:
        """The options as an instance of :attr:`Options` (defaults for what was not given)."""
        return make_options(self.Options, self.options)

    # --- declarations (the registry, the workflow schema and the test kit read them) -------
    @classmethod
    def every_fault_point(cls) -> tuple[str, ...]:
        """The executor's points this format passes, then its own (:attr:`fault_points`,
        :attr:`skip_fault_points`)."""
        schema = SCHEMA_POINTS if cls.needs_schema else ()
        return (*schema, *EXECUTOR_POINTS, *cls.fault_points, *cls.skip_fault_points)

    @classmethod
    def takes_table(cls) -> bool:
        """Whether a workflow file gives this format's options as ``[output.<kind>]``."""
        if cls.workflow_table is not None:
            return cls.workflow_table
        return bool(dataclasses.fields(cls.Options))

    @classmethod
    def table_required(cls) -> bool:
        """Whether ``[output.<kind>]`` must be given (an option has no default)."""
        return cls.takes_table() and has_required(cls.Options)

    @classmethod
    def table_schema(cls) -> dict[str, Any]:
        """The JSON Schema of ``[output.<kind>]``: derived from :attr:`Options` unless a
        format declares its own."""
        return options_schema(cls.Options, cls.description and
                              f"the options of a {cls.kind!r} output: {cls.description}")

    @classmethod
    def default_compression(cls) -> str:
        """The ``compression`` a workflow file gets when it names none."""
        return cls.compressions[0] if cls.compressions else "none"

    @classmethod
    def workflow_options(cls, output: Mapping[str, Any], context: WorkflowContext
                         ) -> dict[str, Any]:
        """The writer options of a workflow file's ``[output]`` table (already checked
        against the schema): by default its ``[output.<kind>]`` table as :attr:`Options`
        with the defaults filled in."""
        table = output.get(cls.kind, {}) if cls.takes_table() else {}
        return dataclasses.asdict(cls.Options(**table))

    @classmethod
    def url_problem(cls, url: str) -> str | None:
        """Why this format cannot write to the fsspec URL ``url``, or ``None``."""
        if cls.local_only:
            return "written to local paths"
        return None

    # --- writing -------------------------------------------------------------------------
    def allocate(self, n_rows: int, schema: Mapping[str, Schema], partition_size: int) -> None:
        """Create the row arrays (driver). Must keep the rows of a resumed job."""
        return

    def reuse_rows(self, previous: PreviousRows, n_rows: int, schema: Mapping[str, Schema]
                   ) -> bool:
        """Instead of :meth:`allocate`, for an update that only appends rows after the
        previous generation's (driver): make the previous generation's row files this job's,
        extended to ``n_rows``, so that its rows are neither copied nor decoded. The previous
        generation must stay readable as it is until this job publishes. Default: ``False``
        (not supported: the rows are allocated and carried)."""
        return False

    @abc.abstractmethod
    def sink(self, part: Part, schema: Mapping[str, Schema] | None) -> PartitionSink:
        """Open the writer of one partition (worker)."""

    def finalize(self, keep: np.ndarray | None) -> None:
        """Move the rows into ``data/``, leaving out rows where ``keep`` is False (driver)."""
        return

    def row_files(self, schema: Mapping[str, Schema]) -> dict[str, tuple[str, int, int]]:
        """Files the sinks write rows into in place, each published under its name in
        ``data/``: ``{name: (path while staged, offset of row 0, bytes per row)}`` (driver,
        after :meth:`allocate`). An in-process export hashes their final rows while later
        partitions run (see :mod:`guideloom.export.prehash`); default: none."""
        return {}

    def write_sim_ids(self, sim_ids: np.ndarray, summaries: Sequence[Mapping[str, Any]]) -> None:
        """Write the id of each published row (driver); default ``sim_ids.npy``."""
        with open(self.stage.path("data", SIM_IDS_FILE), "wb") as fh:
            np.save(fh, sim_ids)

    def fields(self, seen: dict[str, Any]) -> dict[str, Any]:
        """The fields a reader of this output sees (default: what the records held)."""
        return seen

    def manifest_extra(self) -> dict[str, Any]:
        """Format-specific entries of ``export.json``."""
        return {}

    def checksummed_files(self) -> list[str]:
        """Small files in ``data/`` (beyond the rows the sinks hash) that the driver checksums
        whole at finalize (e.g. ``record_offsets.npy``)."""
        return []

    def user_objects(self) -> list[Any]:
        """Objects of the user's code this format carries to the workers (e.g. a storage
        format class), so that their modules travel by value like transforms do."""
        return []

    # --- reading -------------------------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def open_reader(cls, root: str, manifest: Mapping[str, Any],
                    trust: bool = False) -> FormatReader:
        """A reader of the published export at ``root``.

        Args:
            root: The export directory or URL.
            manifest: Its ``export.json``.
            trust: The caller opted in to formats whose reading runs code the export's author
                chose (pickle); without it such a reader refuses to decode rows.
        """

    @classmethod
    def check_published(cls, root: str, manifest: Mapping[str, Any]) -> None:
        """Cheap checks when an export is opened: every file there, with the dtype, shape and
        size ``export.json`` records, and ``sim_ids`` matching its count and checksum.

        Raises:
            CorruptExportError: Naming the file and what differs.
        """
        check_sim_ids(root, manifest, cls.open_reader(root, manifest).sim_ids())
        check_description(root, manifest)

    @classmethod
    def unit_digests(cls, root: str, manifest: Mapping[str, Any], group: str,
                     n_units: int) -> Iterator[tuple[str, str, int]]:
        """Recompute the checksums of one group recorded at write time (see
        :mod:`guideloom.formats.checksums`), streaming: ``(file, checksum, bytes)`` per unit,
        in order. The default handles :attr:`file_group` (one unit per file of
        :meth:`group_files`) and a whole file named ``group`` (one unit); formats override it for
        the other groups their sinks record.
        """
        import fsspec

        if cls.file_group is not None and group == cls.file_group:
            yield from files_digests(root, cls.group_files(root, manifest, n_units))
            return
        yield from files_digests(root, [group], fsspec.open)

    @classmethod
    def group_files(cls, root: str, manifest: Mapping[str, Any], n_units: int) -> Iterable[str]:
        """The files of :attr:`file_group`, in the order their checksums were recorded."""
        raise NotImplementedError

    @classmethod
    def described_files(cls, manifest: Mapping[str, Any]) -> dict[str, str]:
        """Export key (alias or ``"sim_ids"``) → its file, folder or ``*`` pattern, relative to
        the export directory, for the export's Croissant description."""
        return {"sim_ids": SIM_IDS_FILE}

    # --- ownership (what ``overwrite=True`` may replace) -----------------------------------
    @classmethod
    def own_entries(cls, root: str, manifest: Mapping[str, Any]) -> list[str]:
        """Names (``fnmatch`` patterns) of the top-level files a published export holds."""
        return [EXPORT_MANIFEST, CHECKSUMS_FILE, CROISSANT_FILE, PROVENANCE_FILE,
                *cls.described_files(manifest).values()]

    @classmethod
    def foreign_entries(cls, fs: Any, root: str, manifest: Mapping[str, Any]) -> list[str]:
        """Entries of the export at ``root`` on ``fs`` that this format did not write (a
        directory ends in ``/``); default: any directory and any file not in
        :meth:`own_entries`."""
        patterns = cls.own_entries(root, manifest)
        exact = {p for p in patterns if not any(c in p for c in "*?[")}
        wild = [p for p in patterns if p not in exact]
        foreign = []
        for info in fs.ls(root, detail=True):
            name = posixpath.basename(str(info["name"]).rstrip("/"))
            own = _TMP_SUFFIX.sub("", name)  # a temporary file of ours an interrupted write left
            if info.get("type") == "directory":
                foreign.append(f"{name}/")
            elif own not in exact and not any(fnmatch.fnmatchcase(own, p) for p in wild):
                foreign.append(name)
        return sorted(foreign)
