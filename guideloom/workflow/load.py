"""Read a workflow file (TOML), validate it completely, and build the export job from it."""

from __future__ import annotations

import os
import shlex
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from guideloom import config
from guideloom.errors import GuideloomError
from guideloom.export.spec import ExportSpec
from guideloom.formats import ExportFormat, get_format, known_formats
from guideloom.read.roots import DataRoot, folder_of, open_root
from guideloom.select.manifest import load
from guideloom.select.parse import Dataset, add_view
from guideloom.workflow.filters import WhereFilter, build_filter
from guideloom.workflow.references import (
    DeferredReference,
    is_own,
    resolve_reference,
    split_reference,
)
from guideloom.workflow.schema import WorkflowError, validate_document


@dataclass
class PreprocessStep:
    """A workflow's ``[preprocess]`` table: the raw data processed into ``out`` first.

    Attributes:
        modalities: The stages (empty: all installed).
        out: The processed folder (absolute); the export reads it.
        config: The processing parameters of the file's ``config`` TOML, or ``None``.
        overwrite: Recompute what the processed files hold.
    """

    modalities: tuple[str, ...]
    out: Path
    config: dict[str, dict[str, Any]] | None = None
    overwrite: bool = False


@dataclass
class Workflow:
    """A validated workflow file, resolved: dataset loaded, references imported.

    Attributes:
        file: The workflow file.
        name: Its ``name`` (default: the file stem).
        dataset: The loaded dataset (with the ad-hoc view added, if any).
        data_dir: Directory of the experiment files.
        view: The view name.
        output: The output kind: ``"npy"``, ``"npz"``, ``"zarr"``, ``"storage"`` or a
            registered format's.
        target: Output path (absolute) or URL.
        sim_ids: Id allowlist, or ``None``.
        where: The declarative row filter, or ``None``.
        transforms: Per-field transforms.
        record_transform: The whole-record transform, or ``None``.
        compression: The compression name from the file (or the kind's default).
        partition_size: Experiments per Dask task, or ``None`` for the default.
        on_error: ``"raise"`` or ``"skip"``.
        verify_crc: ``[run] verify_crc``: check stored zip members' CRC-32 before use.
        verify_inputs: ``[run] verify_inputs``: an update hashes every carried input again.
        update: ``[output] update``: update the export at ``target`` (see
            :mod:`guideloom.export.update`) instead of writing it again.
        code_version: ``[transforms] code_version``: the version of the transforms' code,
            named by the user (see :mod:`guideloom.export.recipe`), or ``None``.
        scheduler: ``[run] scheduler``, or ``None``.
        dashboard: ``[run] dashboard``, or ``None``.
        cluster: ``[run.cluster]`` (batch-system worker jobs), or ``None``.
        document: The parsed file.
        trusted_roots: ``dataset.trusted_roots`` (absolute): other users' links into them are
            followed while :meth:`trusting` (the command line runs the job so).
        format_options: The writer options the output's format made of ``[output]`` (see
            :meth:`~guideloom.formats.base.ExportFormat.workflow_options`); ``None``: made
            from ``compression`` when asked for.
    """

    file: Path
    name: str
    dataset: Dataset
    data_dir: Path | DataRoot  # the folder, or the root of a release read by URL
    view: str
    output: str
    target: str
    sim_ids: tuple[Any, ...] | None = None
    where: WhereFilter | None = None
    transforms: dict[str, Any] = field(default_factory=dict)
    record_transform: Any = None
    compression: str = "none"
    partition_size: int | None = None
    on_error: str = "raise"
    verify_crc: bool = False
    update: bool = False
    verify_inputs: bool = False
    code_version: str | None = None
    scheduler: str | None = None
    dashboard: str | None = None
    cluster: dict[str, Any] | None = None
    document: dict[str, Any] = field(default_factory=dict)
    format_options: dict[str, Any] | None = None
    trusted_roots: tuple[str, ...] = ()
    preprocess: PreprocessStep | None = None

    @property
    def export_data_dir(self) -> Path | DataRoot:
        """Where the export reads the experiments: the processed folder after a
        ``[preprocess]`` step, else :attr:`data_dir`."""
        return self.preprocess.out if self.preprocess is not None else self.data_dir

    def trusting(self) -> config.set:
        """A context in which the configuration's ``trusted_roots`` also holds the file's
        ``dataset.trusted_roots`` (symbolic links of other users into them are followed)."""
        return _trusting(self.trusted_roots)

    @property
    def storage(self) -> Any:
        """The GuideLoom storage object of a ``"storage"`` output (its option ``storage``)."""
        return self.options().get("storage")

    def options(self) -> dict[str, Any]:
        """Writer options for :func:`guideloom.export.build_spec`, as the output's format
        made them from the file."""
        if self.format_options is not None:
            return dict(self.format_options)
        fmt = get_format(self.output)
        return fmt.workflow_options({"compression": self.compression}, _NO_CONTEXT)

    def client_and_batch_options(self) -> tuple[str | None, dict[str, Any]]:
        """The file's ``client`` text (``[run.cluster]`` as ``"slurm:N"``, else ``[run]
        scheduler``) and the keyword arguments of the batch-system cluster."""
        if self.cluster is None:
            return self.scheduler, {}
        options = {k: v for k, v in self.cluster.items() if k not in ("kind", "jobs")}
        return f"{self.cluster['kind']}:{self.cluster['jobs']}", options

    def to_spec(self, *, overwrite: bool = False, update: bool | None = None) -> ExportSpec:
        """The job description, built by :func:`guideloom.export.build_spec` like the API's;
        ``update`` (default: the file's ``[output] update``) updates the export at the
        target, ``overwrite`` replaces it (and wins over the file's ``update``)."""
        from guideloom.export.api import build_spec

        return build_spec(
            self.view, self.output, self.target, data_dir=self.export_data_dir,
            dataset=self.dataset,
            sim_ids=self.sim_ids, where=self.where,
            where_description=self.where.describe() if self.where else None,
            transforms=self.transforms, record_transform=self.record_transform,
            partition_size=self.partition_size, on_error=self.on_error,  # type: ignore[arg-type]
            overwrite=overwrite, options=self.options(), verify_crc=self.verify_crc,
            sim_ids_order="sim_ids",  # a workflow file's rows follow its sim_ids list
            update=(self.update if update is None else update) and not overwrite,
            verify_inputs=self.verify_inputs,
            code_version=self.code_version,
        )


def _trusting(roots: tuple[str, ...]) -> config.set:
    """``config.set`` adding ``roots`` to ``trusted_roots`` (nothing when there are none)."""
    if not roots:
        return config.set()
    kept = (config.get("trusted_roots") or "").split(os.pathsep)
    return config.set(trusted_roots=[*filter(None, kept), *roots])


def read_document(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a TOML workflow file (no validation)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"workflow file not found: {file}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkflowError(str(file), None, f"cannot read it ({exc})") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise WorkflowError(str(file), None, f"not valid TOML ({exc})") from exc


def load_workflow(
    path: str | os.PathLike[str],
    *,
    data_dir: str | os.PathLike[str] | None = None,
    output: str | os.PathLike[str] | None = None,
    import_user_code: bool = True,
    storage_options: Mapping[str, Any] | None = None,
) -> Workflow:
    """Read, validate and resolve a workflow file; nothing is written and no cluster starts.

    Relative paths in the file are relative to the file's directory, or to the current
    directory with ``paths_relative_to = "cwd"`` (the shipped workflows use that).

    Args:
        path: The ``.toml`` file.
        data_dir: Replaces ``dataset.data_dir`` (relative to the current directory).
        output: Replaces ``output.path`` (relative to the current directory, or a URL).
        storage_options: fsspec options for a remote data directory, over those of
            ``dataset.storage_options`` (key by key; the command line's ``--storage-option``).
        import_user_code: Import the modules the file references (``False`` for a dry run:
            references outside guideloom become :class:`DeferredReference`, no format
            factory is called and ``python_path`` is not added to ``sys.path``, so that no
            module there can stand in for one that guideloom or Dask imports later).

    Raises:
        WorkflowError: The file is invalid; the message names the file, the key and what was
            expected.
        FileNotFoundError: The file does not exist.
    """
    file = Path(path)
    where = str(file)
    doc = read_document(file)
    validate_document(doc, where)
    file_dir = file.resolve().parent
    base = Path.cwd() if doc.get("paths_relative_to") == "cwd" else file_dir

    for entry in doc.get("python_path", []) if import_user_code else ():
        folder = str(_relative_to(file_dir, entry))
        if folder not in sys.path:
            sys.path.insert(0, folder)

    ds_doc = doc["dataset"]
    data_key = "dataset.data_dir" if data_dir is None else "--data-dir"
    given = data_dir if data_dir is not None else ds_doc["data_dir"]
    options = {**ds_doc.get("storage_options", {}), **(storage_options or {})}
    root: Path | DataRoot  # Workflow.data_dir: the folder, or a release's root
    if folder_of(given) is None:  # an https://, fsspec URL or DOI: read by byte ranges
        try:
            root = open_root(given, storage_options=options)
        except (GuideloomError, ValueError) as exc:
            raise WorkflowError(where, data_key, str(exc)) from exc
    elif options:
        raise WorkflowError(where, "dataset.storage_options",
                            f"storage options apply to a remote data directory (s3://, "
                            f"https://, a DOI), not to the local folder {given}: remove them "
                            "or give the release's URL")
    else:
        root = Path(data_dir).resolve() if data_dir is not None else _relative_to(
            base, ds_doc["data_dir"])
        if not root.is_dir():
            raise WorkflowError(where, data_key, f"data directory not found: {root}; "
                                                 f"{_missing_data_hint(root)}")
    manifest = _relative_to(base, ds_doc["manifest"]) if "manifest" in ds_doc else None
    if manifest is not None and not manifest.is_file():
        raise WorkflowError(where, "dataset.manifest", f"manifest not found: {manifest}")
    trusted = tuple(str(_relative_to(base, t)) for t in ds_doc.get("trusted_roots", ()))
    with _trusting(trusted):  # the manifest, the index table and the views are read here
        try:
            dataset = load(root, manifest)
        except PermissionError:  # names the file, its owner and mode: not the workflow's fault
            raise
        except (GuideloomError, FileNotFoundError, ValueError) as exc:
            raise WorkflowError(where, "dataset", str(exc)) from exc

        view_name = _resolve_view(doc["view"], dataset, where)
        view = dataset.view(view_name)

        sim_ids, where_filter = _resolve_filter(doc.get("filter", {}), dataset, where)

    tf_doc = doc.get("transforms", {})
    transforms: dict[str, Any] = {}
    for alias, ref in tf_doc.get("fields", {}).items():
        if alias not in view.aliases:
            raise WorkflowError(where, f"transforms.fields.{alias}",
                                f"view {view_name!r} has no field {alias!r}; its fields: "
                                f"{', '.join(view.aliases)}")
        transforms[alias] = _reference(ref, where, f"transforms.fields.{alias}",
                                       import_user_code)
    record = tf_doc.get("record")
    record_transform = (_reference(record, where, "transforms.record", import_user_code)
                        if record else None)

    out = doc["output"]
    kind = out["kind"]
    fmt = get_format(kind)
    _check_tables(out, fmt, where)
    if output is not None:
        text = os.fspath(output)
        target = text if "://" in text else str(Path(text).resolve())
    else:
        text = out["path"]
        target = text if "://" in text else str(_relative_to(base, text))
    problem = fmt.url_problem(target) if "://" in target else None
    if problem is not None:
        remote = [f.kind for f in known_formats() if f.url_problem(target) is None]
        where_to = f"URLs are for {', '.join(remote)}" if remote else "no format writes URLs"
        raise WorkflowError(where, "output.path",
                            f"{kind!r} outputs are {problem}; {where_to}, got {target!r}")
    format_options = fmt.workflow_options(out, _Context(where, target, import_user_code))

    run = doc.get("run", {})
    cluster = dict(run["cluster"]) if "cluster" in run else None
    if cluster is not None and "config_file" in cluster:
        cluster["config_file"] = str(_relative_to(file_dir, cluster["config_file"]))
    return Workflow(
        file=file, name=doc.get("name", file.stem), dataset=dataset, data_dir=root,
        view=view_name, output=kind, target=target, sim_ids=sim_ids, where=where_filter,
        transforms=transforms, record_transform=record_transform,
        compression=out.get("compression", fmt.default_compression()),
        partition_size=out.get("partition_size"), on_error=run.get("on_error", "raise"),
        verify_crc=run.get("verify_crc", False), update=bool(out.get("update", False)),
        verify_inputs=bool(run.get("verify_inputs", False)),
        code_version=tf_doc.get("code_version"),
        scheduler=run.get("scheduler"), dashboard=run.get("dashboard"), cluster=cluster,
        document=doc, format_options=format_options, trusted_roots=trusted,
        preprocess=_preprocess_step(doc, base, file_dir, where),
    )


def _preprocess_step(doc: Mapping[str, Any], base: Path, file_dir: Path, where: str
                     ) -> PreprocessStep | None:
    """The ``[preprocess]`` table resolved (paths absolute, the config file read and checked).

    Raises:
        WorkflowError: The config file cannot be read or holds a bad value.
    """
    table = doc.get("preprocess")
    if table is None:
        return None
    from guideloom.preprocess import params

    config = None
    if "config" in table:
        path = _relative_to(file_dir, table["config"])
        try:
            config = params.load(str(path))
        except (OSError, ValueError) as exc:
            raise WorkflowError(where, "preprocess.config", str(exc)) from exc
    return PreprocessStep(tuple(table.get("modalities", ())), _relative_to(base, table["out"]),
                          config, bool(table.get("overwrite", False)))


def _check_tables(out: Mapping[str, Any], fmt: type[ExportFormat], where: str) -> None:
    """``[output.<kind>]`` is there when the kind needs it, and no other kind's table is."""
    for other in known_formats():
        if other.kind != fmt.kind and other.takes_table() and other.kind in out:
            raise WorkflowError(where, "output.kind", f"expected {other.kind!r} when "
                                f"output.{other.kind} is given, got {fmt.kind!r}")
    if fmt.table_required() and fmt.kind not in out:
        raise WorkflowError(where, f"output.{fmt.kind}",
                            f"missing (required for kind {fmt.kind!r})")


@dataclass(frozen=True)
class _Context:
    """What a format's ``workflow_options`` may use of the file being loaded."""

    file: str
    target: str
    import_user_code: bool = True

    def error(self, key: str, message: str) -> NoReturn:
        raise WorkflowError(self.file, key, message)

    def reference(self, ref: str, key: str) -> Any:
        return _reference(ref, self.file, key, self.import_user_code)

    def deferred(self, value: Any) -> bool:
        return isinstance(value, DeferredReference)


_NO_CONTEXT = _Context("<workflow>", "")


def _missing_data_hint(root: Path) -> str:
    """How to get data where a workflow looked for it: demo data, or the user's own."""
    try:
        shown = root.relative_to(Path.cwd())
    except ValueError:
        shown = root
    return (f"write demo data there with `guideloom make-demo-data {shlex.quote(str(shown))}`, "
            "or point at your data with --data-dir DIR")


def _relative_to(base: Path, text: str) -> Path:
    path = Path(text).expanduser()
    return path if path.is_absolute() else (base / path).resolve()


def _resolve_view(view_doc: Mapping[str, Any], dataset: Dataset, where: str) -> str:
    name = view_doc["name"]
    fields = view_doc.get("fields")
    if fields is None:
        try:
            dataset.view(name)
        except ValueError as exc:
            raise WorkflowError(where, "view.name", str(exc)) from None
        return name
    if name in dataset.views and not dataset.views[name].added:
        raise WorkflowError(where, "view.name",
                            f"{name!r} is a published view; an ad-hoc view with fields needs "
                            "another name (or drop view.fields to use the published one)")
    refs: dict[str, Any] = {}
    for alias, ref in fields.items():
        refs[alias] = ref if isinstance(ref, str) else (ref["field"], ref.get("timesteps"))
        try:  # check each field alone, so the message names its key
            add_view(dataset, name, {alias: refs[alias]})
        except ValueError as exc:
            raise WorkflowError(where, f"view.fields.{alias}", str(exc)) from None
    add_view(dataset, name, refs)
    return name


def _resolve_filter(
    filter_doc: Mapping[str, Any], dataset: Dataset, where: str
) -> tuple[tuple[Any, ...] | None, WhereFilter | None]:
    sim_ids = None
    if "sim_ids" in filter_doc:
        ids = filter_doc["sim_ids"]
        try:
            index = dataset.index()
        except PermissionError:  # names the file, its owner and mode: not the workflow's fault
            raise
        except (GuideloomError, FileNotFoundError, ValueError) as exc:
            raise WorkflowError(where, "dataset", str(exc)) from exc
        unknown = [i for i in ids if i not in index]
        if unknown:
            raise WorkflowError(where, "filter.sim_ids",
                                f"ids not in the index table {index.path.name}: {unknown[:10]}")
        if len(set(ids)) != len(ids):
            raise WorkflowError(where, "filter.sim_ids", "an id is listed more than once")
        sim_ids = tuple(ids)
    where_filter = None
    if filter_doc.get("where"):
        types = {c.column: c.data_type for c in dataset.columns.values()}
        where_filter, problems = build_filter(filter_doc["where"], types)
        if problems:
            key, message = problems[0]
            raise WorkflowError(where, f"filter.where.{key}", message)
    return sim_ids, where_filter


def _reference(ref: str, where: str, key: str, import_user_code: bool = True) -> Any:
    try:
        if not import_user_code and not is_own(ref):
            split_reference(ref)  # the form is still checked
            return DeferredReference(ref)
        return resolve_reference(ref)
    except ValueError as exc:
        raise WorkflowError(where, key, str(exc)) from None
