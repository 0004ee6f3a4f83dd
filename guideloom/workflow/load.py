"""Read a workflow file (TOML), validate it completely, and build the export job from it."""

from __future__ import annotations

import os
import shlex
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guideloom.croissant import Dataset, add_view, load
from guideloom.errors import GuideloomError
from guideloom.export.spec import ExportSpec
from guideloom.remote.root import is_remote_root, open_root
from guideloom.workflow.filters import WhereFilter, build_filter
from guideloom.workflow.references import (
    DeferredReference,
    is_own,
    resolve_reference,
    split_reference,
)
from guideloom.workflow.schema import WorkflowError, validate_document

DEFAULT_COMPRESSION = {"npy": "none", "npz": "none", "zarr": "lz4", "storage": "none"}


@dataclass
class Workflow:
    """A validated workflow file, resolved: dataset loaded, references imported.

    Attributes:
        file: The workflow file.
        name: Its ``name`` (default: the file stem).
        dataset: The loaded dataset (with the ad-hoc view added, if any).
        data_dir: Directory of the experiment files.
        view: The view name.
        output: ``"npy"``, ``"npz"``, ``"zarr"`` or ``"storage"``.
        target: Output path (absolute) or URL.
        sim_ids: Id allowlist, or ``None``.
        where: The declarative row filter, or ``None``.
        transforms: Per-field transforms.
        record_transform: The whole-record transform, or ``None``.
        compression: The compression name from the file (or the kind's default).
        partition_size: Experiments per Dask task, or ``None`` for the default.
        on_error: ``"raise"`` or ``"skip"``.
        verify_crc: ``[run] verify_crc``: check stored zip members' CRC-32 before use.
        scheduler: ``[run] scheduler``, or ``None``.
        dashboard: ``[run] dashboard``, or ``None``.
        cluster: ``[run.cluster]`` (batch-system worker jobs), or ``None``.
        document: The parsed file.
        storage: The GuideLoom storage object of a ``"storage"`` output.
    """

    file: Path
    name: str
    dataset: Dataset
    data_dir: Path
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
    scheduler: str | None = None
    dashboard: str | None = None
    cluster: dict[str, Any] | None = None
    document: dict[str, Any] = field(default_factory=dict)
    storage: Any = None

    def options(self) -> dict[str, Any]:
        """Writer options for :func:`guideloom.export.build_spec`."""
        if self.output == "npz":
            return {"compressed": self.compression == "deflate"}
        if self.output == "zarr":
            return {"compressor": None if self.compression == "none" else self.compression}
        if self.output == "storage":
            return {"storage": self.storage}
        return {}

    def client_and_batch_options(self) -> tuple[str | None, dict[str, Any]]:
        """The file's ``client`` text (``[run.cluster]`` as ``"slurm:N"``, else ``[run]
        scheduler``) and the keyword arguments of the batch-system cluster."""
        if self.cluster is None:
            return self.scheduler, {}
        options = {k: v for k, v in self.cluster.items() if k not in ("kind", "jobs")}
        return f"{self.cluster['kind']}:{self.cluster['jobs']}", options

    def to_spec(self, *, overwrite: bool = False) -> ExportSpec:
        """The job description, built by :func:`guideloom.export.build_spec` like the API's."""
        from guideloom.export.api import build_spec

        return build_spec(
            self.view, self.output, self.target, data_dir=self.data_dir, dataset=self.dataset,
            sim_ids=self.sim_ids, where=self.where,
            where_description=self.where.describe() if self.where else None,
            transforms=self.transforms, record_transform=self.record_transform,
            partition_size=self.partition_size, on_error=self.on_error,  # type: ignore[arg-type]
            overwrite=overwrite, options=self.options(), verify_crc=self.verify_crc,
            sim_ids_order="sim_ids",  # a workflow file's rows follow its sim_ids list
        )


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
) -> Workflow:
    """Read, validate and resolve a workflow file; nothing is written and no cluster starts.

    Relative paths in the file are relative to the file's directory, or to the current
    directory with ``paths_relative_to = "cwd"`` (the shipped workflows use that).

    Args:
        path: The ``.toml`` file.
        data_dir: Replaces ``dataset.data_dir`` (relative to the current directory).
        output: Replaces ``output.path`` (relative to the current directory, or a URL).
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
    if is_remote_root(given):  # an https://, fsspec URL or DOI: read by byte ranges
        try:
            root: Any = open_root(given)  # type: ignore[arg-type]
        except (GuideloomError, ValueError) as exc:
            raise WorkflowError(where, data_key, str(exc)) from exc
    else:
        root = Path(data_dir).resolve() if data_dir is not None else _relative_to(
            base, ds_doc["data_dir"])
    if not is_remote_root(root) and not root.is_dir():
        raise WorkflowError(where, data_key, f"data directory not found: {root}; "
                                             f"{_missing_data_hint(root)}")
    manifest = _relative_to(base, ds_doc["manifest"]) if "manifest" in ds_doc else None
    if manifest is not None and not manifest.is_file():
        raise WorkflowError(where, "dataset.manifest", f"manifest not found: {manifest}")
    try:
        dataset = load(root, manifest)
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
    if (kind == "storage") != ("storage" in out):
        key = "output.storage" if kind == "storage" else "output.kind"
        message = ("missing (required for kind 'storage')" if kind == "storage" else
                   f"expected 'storage' when output.storage is given, got {kind!r}")
        raise WorkflowError(where, key, message)
    if output is not None:
        text = os.fspath(output)
        target = text if "://" in text else str(Path(text).resolve())
    else:
        text = out["path"]
        target = text if "://" in text else str(_relative_to(base, text))
    if "://" in target and kind != "zarr":
        raise WorkflowError(where, "output.path",
                            f"{kind!r} outputs are written to local paths; URLs are for zarr, "
                            f"got {target!r}")

    storage = (_storage(out["storage"], target, where, import_user_code)
               if kind == "storage" else None)

    run = doc.get("run", {})
    cluster = dict(run["cluster"]) if "cluster" in run else None
    if cluster is not None and "config_file" in cluster:
        cluster["config_file"] = str(_relative_to(file_dir, cluster["config_file"]))
    return Workflow(
        file=file, name=doc.get("name", file.stem), dataset=dataset, data_dir=root,
        view=view_name, output=kind, target=target, sim_ids=sim_ids, where=where_filter,
        transforms=transforms, record_transform=record_transform,
        compression=out.get("compression", DEFAULT_COMPRESSION[kind]),
        partition_size=out.get("partition_size"), on_error=run.get("on_error", "raise"),
        verify_crc=run.get("verify_crc", False),
        scheduler=run.get("scheduler"), dashboard=run.get("dashboard"), cluster=cluster,
        document=doc,
        storage=storage,
    )


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


_STORAGE_FORMATS = {
    "StreamStorage": "dtype or format_factory",
    "DocumentStorage": "format = \"pickle\" or format_factory",
    "StreamWithMetaStorage": "format_factory",
}


def _storage(doc: Mapping[str, Any], target: str, where: str,
             import_user_code: bool = True) -> Any:
    """Build the storage object of ``[output.storage]`` (class plus format)."""
    import numpy as np

    from guideloom import storage as storages

    cls = doc["class"]
    given = [k for k in ("dtype", "format", "format_factory") if k in doc]
    allowed = {"StreamStorage": ("dtype", "format_factory"),
               "DocumentStorage": ("format", "format_factory"),
               "StreamWithMetaStorage": ("format_factory",)}[cls]
    if len(given) != 1 or given[0] not in allowed:
        key = f"output.storage.{given[0]}" if given else "output.storage"
        raise WorkflowError(where, key, f"{cls} needs exactly one of: {_STORAGE_FORMATS[cls]}")
    if "dtype" in doc:
        fields = []
        for name, text in doc["dtype"].items():
            try:
                fields.append((name, np.dtype(text)))
            except TypeError as exc:
                raise WorkflowError(where, f"output.storage.dtype.{name}",
                                    f"expected a numpy dtype such as '<f4', got {text!r}"
                                    ) from exc
        fmt: Any = storages.StreamNumpyFormat(np.dtype(fields))
    elif "format" in doc:
        fmt = storages.DocumentPickleFormat()
    else:
        factory = _reference(doc["format_factory"], where, "output.storage.format_factory",
                             import_user_code)
        if isinstance(factory, DeferredReference):
            return None  # a dry run calls no factory: the storage is described, not built
        try:
            fmt = factory()
        except Exception as exc:  # noqa: BLE001 - reported with its key
            raise WorkflowError(where, "output.storage.format_factory",
                                f"calling it raised {type(exc).__name__}: {exc}") from exc
    try:
        return getattr(storages, cls)(target, fmt)
    except Exception as exc:  # noqa: BLE001 - e.g. a format without the class's contract
        raise WorkflowError(where, "output.storage",
                            f"{cls} does not accept this format: {exc}") from exc
