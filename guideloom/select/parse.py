"""Croissant in: a manifest parsed into a :class:`Dataset` (field map, index columns, views).

The manifest is read as plain JSON (no mlcroissant). Nothing dataset-specific is hard-coded: the
index file, its id column and the field-map record set are found in the manifest, and a
:class:`~guideloom.select.presets.DatasetSpec` names them where a manifest is ambiguous.
:func:`add_view` adds views in memory. Public through :mod:`guideloom.select.manifest`.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

from guideloom.errors import ManifestError
from guideloom.read.files import RemotePath
from guideloom.read.roots import DataRoot, as_root
from guideloom.read.views import Timesteps, View, ViewField, timesteps_from_json_path
from guideloom.select.index import IndexTable, read_index_bytes
from guideloom.select.presets import DatasetSpec
from guideloom.select.write import manifest_with_views

_REGEX_META = re.compile(r"[\\^$.|?*+()\[\]{}]")


@dataclass(frozen=True)
class FieldMapEntry:
    """One HDF5 dataset declared in the field map."""

    id: str
    name: str
    h5_path: str
    data_type: str | None = None
    description: str = ""


@dataclass(frozen=True)
class IndexColumn:
    """One typed column of the index table."""

    id: str
    name: str
    column: str
    data_type: str | None = None


@dataclass
class Dataset:
    """A parsed manifest plus where its files live.

    Use :func:`~guideloom.select.manifest.load` to build one; :func:`add_view` adds views in memory.
    """

    manifest: dict[str, Any]
    manifest_path: Path | None
    root: DataRoot  # where the index table and the experiments' files are read
    spec: DatasetSpec
    name: str
    index_file: str
    id_column: str
    index_record_set: str
    field_map_id: str
    field_map: dict[str, FieldMapEntry]
    columns: dict[str, IndexColumn]
    views: dict[str, View]
    archives: tuple[str, ...]
    _index_cache: IndexTable | None = field(default=None, repr=False, compare=False)
    _index_fetched: bytes | None = field(default=None, repr=False, compare=False)
    _mlc: Any = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        return (f"Dataset({self.name!r}, data_dir={str(self.data_dir)!r}, "
                f"views={len(self.views)}, fields={len(self.field_map)}, "
                f"columns={len(self.columns)})")

    def view(self, name: str) -> View:
        """Return the view called ``name`` (its ``name`` or ``@id``).

        Raises:
            ValueError: The view does not exist; the message lists the views that do.
        """
        found = self.views.get(name)
        if found is None:
            found = next((v for v in self.views.values() if v.id == name), None)
        if found is None:
            raise ValueError(
                f"unknown view {name!r}; views in {self.name!r}: {', '.join(self.views)}"
            )
        return found

    def index(self) -> IndexTable:
        """The typed index table (read once, then cached).

        Raises:
            ManifestError: The manifest names an index table outside the data directory.
        """
        if self._index_cache is None:
            types = {c.column: c.data_type for c in self.columns.values()}
            data, where = self.root.read_bytes(self.index_file, "the index table (the CSV "
                                               "FileObject's 'name')", self.manifest_path)
            self._index_cache = read_index_bytes(data, where, self.id_column, types)
            if self.root.keeps_index_bytes:  # the job identity is taken from these bytes
                self._index_fetched = data
        return self._index_cache

    @property
    def data_dir(self) -> Path | DataRoot:
        """The data directory as :func:`load` has always given it: the absolute folder, or
        the :class:`~guideloom.read.roots.RemoteRoot` of a release read by URL (the root
        itself is :attr:`root`)."""
        folder = self.root.local_folder()
        return self.root if folder is None else folder

    def fetched_index_bytes(self) -> bytes | None:
        """The bytes of the index table as :meth:`index` fetched them from a remote release
        (``None`` before that, and for a local one): the job identity is taken from the
        table the job read, without fetching it again."""
        return self._index_fetched

    @overload
    def file_in_data_dir(self, root: str | Path, name: str, what: str) -> Path: ...

    @overload
    def file_in_data_dir(self, root: DataRoot, name: str, what: str) -> Path | RemotePath: ...

    def file_in_data_dir(self, root: str | Path | DataRoot, name: str, what: str
                         ) -> Path | RemotePath:
        """``root / name`` for a file the manifest names, confined to ``root`` (for a remote
        root, its :class:`~guideloom.read.files.RemotePath`).

        Raises:
            ManifestError: ``name`` is absolute, climbs out with ``..``, or resolves (through
                a symlink) outside ``root``; the message names the manifest entry and the path,
                never the file's contents.
        """
        return as_root(root).file(name, what, self.manifest_path)

    @property
    def id_column_type(self) -> str | None:
        """The Croissant ``dataType`` of the id column."""
        col = self.columns.get(self.id_column)
        return col.data_type if col else None

    def to_jsonld(self) -> dict[str, Any]:
        """Return the manifest as a Croissant dict, with added views as record sets.

        The result validates with mlcroissant: timestep slicing is a ``jsonPath`` transform and
        views mixing index columns with HDF5 fields declare the join on the index key. Pass it to
        :func:`~guideloom.select.manifest.load` (``source=``) to read the views back.
        """
        key = self.columns.get(self.id_column)
        return manifest_with_views(self.manifest, self.views, key.id if key is not None else None)

    # --- what code written for mlcroissant.Dataset (rddac 2.0's load) uses -------------------
    @property
    def jsonld(self) -> dict[str, Any]:
        """The manifest as a Croissant dict, added views included (see :meth:`to_jsonld`)."""
        return self.to_jsonld()

    @property
    def mapping(self) -> dict[str, str]:
        """``FileObject`` ``@id`` -> local file, for the manifest's files found under data_dir."""
        from guideloom.compat.mlc import local_mapping

        return local_mapping(self)

    def mlcroissant(self) -> Any:
        """The ``mlcroissant.Dataset`` of this manifest (built on first use; needs mlcroissant).

        guideloom itself never needs it; it answers :attr:`metadata` and :meth:`records`.
        """
        if self._mlc is None:
            from guideloom.compat.mlc import mlcroissant_dataset

            self._mlc = mlcroissant_dataset(self)
        return self._mlc

    @property
    def metadata(self) -> Any:
        """mlcroissant's ``Metadata`` (``.record_sets``, ``.distribution``, ``.name``...)."""
        return self.mlcroissant().metadata

    def records(self, record_set: str, **kwargs: Any) -> Any:
        """mlcroissant's records of ``record_set``; for HDF5 views prefer
        :func:`guideloom.streaming.iter_view`, which reads only what the view needs."""
        return self.mlcroissant().records(record_set, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_index_cache"] = None  # workers re-read the small index when they need it
        state["_index_fetched"] = None
        state["_mlc"] = None  # rebuilt on demand; mlcroissant objects need not travel
        return state


def parse_manifest(
    manifest: dict[str, Any], manifest_path: Path | None, root: DataRoot,
    spec: DatasetSpec,
) -> Dataset:
    """The :class:`Dataset` of a manifest read from ``manifest_path`` (or given as a dict),
    whose files live under ``root``.

    Raises:
        ManifestError: The manifest lacks what guideloom needs (an index record set, a key, a
            field map, literal HDF5 paths); the message names the manifest.
        ValueError: A view references a field that does not exist.
    """
    where = str(manifest_path or "manifest")
    record_sets = manifest.get("recordSet")
    if not isinstance(record_sets, list) or not record_sets:
        raise ManifestError(f"{where}: no recordSet list")
    distribution = {d.get("@id"): d for d in manifest.get("distribution", []) if "@id" in d}

    index_rs, index_file = _find_index_record_set(record_sets, distribution, spec, where)
    columns = {
        f["name"]: IndexColumn(
            id=f["@id"],
            name=f["name"],
            column=_extract_column(f) or f["name"],
            data_type=f.get("dataType"),
        )
        for f in index_rs.get("field", [])
    }
    id_column = spec.id_column or _key_column(index_rs, columns)
    if id_column is None:
        raise ManifestError(
            f"{where}: record set {index_rs['@id']!r} has no key; "
            "name the id column with DatasetSpec(id_column=...)"
        )
    field_map_rs = _find_field_map(record_sets, spec, where)
    entries = {
        f["name"]: FieldMapEntry(
            id=f["@id"],
            name=f["name"],
            h5_path=_h5_path(f, where),
            data_type=f.get("dataType"),
            description=f.get("description", ""),
        )
        for f in field_map_rs.get("field", [])
    }
    ds = Dataset(
        manifest=manifest,
        manifest_path=manifest_path,
        root=root,
        spec=spec,
        name=str(manifest.get("name", root.name)),
        index_file=index_file,
        id_column=id_column,
        index_record_set=index_rs["@id"],
        field_map_id=field_map_rs["@id"],
        field_map=entries,
        columns=columns,
        views={},
        archives=tuple(
            d["name"]
            for d in distribution.values()
            if d.get("encodingFormat") == "application/zip" and d.get("name")
        ),
    )
    for rs in record_sets:
        if rs["@id"] in (index_rs["@id"], field_map_rs["@id"]):
            continue
        view = _parse_view(ds, rs, where)
        if view is not None:
            ds.views[view.name] = view
    return ds


def _find_index_record_set(
    record_sets: list[dict[str, Any]],
    distribution: Mapping[str, Mapping[str, Any]],
    spec: DatasetSpec,
    where: str,
) -> tuple[dict[str, Any], str]:
    found: list[tuple[dict[str, Any], str]] = []
    for rs in record_sets:
        for f in rs.get("field", []):
            file_id = (f.get("source", {}).get("fileObject") or {}).get("@id")
            obj = distribution.get(file_id) if file_id else None
            if obj is None:
                continue
            name = obj.get("name", "")
            is_csv = obj.get("encodingFormat") == "text/csv" or name.endswith(".csv")
            if is_csv and (spec.index_file is None or spec.index_file == name):
                found.append((rs, spec.index_file or name))
    for rs, name in found:  # rddac's file name first, when several CSVs are read
        if name == spec.process_parameters_file:
            return rs, name
    if found:
        return found[0]
    wanted = f"the CSV {spec.index_file!r}" if spec.index_file else "a CSV FileObject"
    raise ManifestError(f"{where}: no record set reads {wanted} (the index table)")


def _extract_column(f: Mapping[str, Any]) -> str | None:
    return (f.get("source", {}).get("extract") or {}).get("column")


def _key_column(rs: Mapping[str, Any], columns: Mapping[str, IndexColumn]) -> str | None:
    key = rs.get("key")
    if isinstance(key, list):
        key = key[0] if len(key) == 1 else None
    key_id = key.get("@id") if isinstance(key, Mapping) else key
    for col in columns.values():
        if col.id == key_id:
            return col.column
    return None


def _find_field_map(
    record_sets: list[dict[str, Any]], spec: DatasetSpec, where: str
) -> dict[str, Any]:
    if spec.field_map is not None:
        for rs in record_sets:
            if spec.field_map in (rs.get("@id"), rs.get("name")):
                return rs
        raise ManifestError(f"{where}: field-map record set {spec.field_map!r} not found")
    found = [
        rs for rs in record_sets
        if rs.get("field") and all(
            "fileSet" in f.get("source", {}) and _regex_of(f) is not None for f in rs["field"])
    ]
    for rs in found:  # rddac's record set name first, when several qualify
        if spec.field_map_record_set in (rs.get("@id"), rs.get("name")):
            return rs
    if found:
        return found[0]
    raise ManifestError(
        f"{where}: no field-map record set (fields reading a FileSet through a regex transform)"
    )


def _regex_of(f: Mapping[str, Any]) -> str | None:
    transforms = f.get("source", {}).get("transform") or []
    if isinstance(transforms, Mapping):
        transforms = [transforms]
    for t in transforms:
        if isinstance(t, Mapping) and "regex" in t:
            return str(t["regex"])
    return None


def _h5_path(f: Mapping[str, Any], where: str) -> str:
    regex = _regex_of(f)
    if regex is None:
        raise ManifestError(f"{where}: field-map field {f.get('@id')!r} names no HDF5 path")
    literal = regex.strip("^$")
    if _REGEX_META.search(literal):
        raise ManifestError(
            f"{where}: field-map field {f.get('@id')!r} uses the pattern {regex!r}; guideloom "
            "reads literal HDF5 paths only"
        )
    return literal


def _parse_view(ds: Dataset, rs: Mapping[str, Any], where: str) -> View | None:
    fields: list[ViewField] = []
    for f in rs.get("field", []):
        src = f.get("source", {})
        ref = (src.get("field") or {}).get("@id") if isinstance(src, Mapping) else None
        if ref is None:
            return None  # not a view over the field map / index (some other record set)
        timesteps = _timesteps_of(src)
        fields.append(
            _resolve(ds, str(rs.get("name", rs["@id"])), f["name"], ref, timesteps, where)
        )
    if not fields:
        return None
    return View(
        name=str(rs.get("name", rs["@id"])),
        id=str(rs["@id"]),
        fields=tuple(fields),
        description=str(rs.get("description", "")),
    )


def _timesteps_of(src: Mapping[str, Any]) -> Timesteps:
    transforms = src.get("transform") or []
    if isinstance(transforms, Mapping):
        transforms = [transforms]
    for t in transforms:
        if isinstance(t, Mapping) and "jsonPath" in t:
            return timesteps_from_json_path(str(t["jsonPath"]))
        if isinstance(t, Mapping) and "timesteps" in t:  # guideloom before the jsonPath form
            return _check_timesteps(t["timesteps"], "manifest", "timesteps")
    return None


def _resolve(
    ds: Dataset, view: str, alias: str, ref: str, timesteps: Timesteps, where: str
) -> ViewField:
    """Resolve a field reference to a :class:`ViewField`, or raise naming both sides."""
    prefix, _, name = ref.rpartition("/")
    index_prefixes = {ds.index_record_set, _record_set_name(ds, ds.index_record_set)}
    if prefix in index_prefixes and name in ds.columns:
        if timesteps is not None:
            raise ValueError(
                f"view {view!r} field {alias!r}: timestep slicing applies to HDF5 fields only, "
                f"not to the index column {ref!r}"
            )
        col = ds.columns[name]
        return ViewField(alias, col.id, column=col.column, data_type=col.data_type)
    if prefix in ("", ds.field_map_id, _record_set_name(ds, ds.field_map_id)):
        entry = ds.field_map.get(name)
        if entry is not None:
            return ViewField(
                alias, entry.id, h5_path=entry.h5_path, timesteps=timesteps,
                data_type=entry.data_type,
            )
    raise ValueError(
        f"view {view!r} field {alias!r} references {ref!r}, which does not exist in {where}; "
        f"field-map fields: {', '.join(ds.field_map)}; index columns: "
        f"{', '.join(f'{ds.index_record_set}/{c}' for c in ds.columns)}"
    )


def _record_set_name(ds: Dataset, rs_id: str) -> str:
    for rs in ds.manifest.get("recordSet", []):
        if rs.get("@id") == rs_id:
            return str(rs.get("name", rs_id))
    return rs_id


def _check_timesteps(value: object, view: str, alias: str) -> Timesteps:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"view {view!r} field {alias!r}: timesteps must be None, an int or a "
                         f"list of ints, not the bool {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        steps = list(value)
        if not steps:
            raise ValueError(f"view {view!r} field {alias!r}: empty timestep list")
        for s in steps:
            if isinstance(s, bool) or not isinstance(s, numbers.Integral):
                raise ValueError(
                    f"view {view!r} field {alias!r}: timestep {s!r} is not an int"
                )
        return tuple(int(s) for s in steps)
    raise ValueError(
        f"view {view!r} field {alias!r}: timesteps must be None, an int or a list of ints, "
        f"not {type(value).__name__}"
    )


FieldRef = str | tuple[str, int | Sequence[int] | None]

#: rddac 2.0's names for a field reference and a timestep selection in :func:`add_view`.
FieldSpec = FieldRef
TimestepSpec = None | int | list[int]


def add_view(ds: Dataset, name: str, fields: Mapping[str, FieldRef]) -> Dataset:
    """Add a view to ``ds`` in memory (the manifest on disk is never changed).

    Args:
        ds: The dataset; it is changed and returned.
        name: The new view's name. Re-adding a name replaces that added view; published
            views cannot be shadowed.
        fields: ``alias -> reference``: a bare field-map name (``"force_data"``), a
            ``"field-map/<name>"`` id, an index column ``"process-parameters/<column>"``,
            or ``(field_map_ref, timesteps)`` with ``timesteps`` ``None``, an int or a list
            of ints selecting rows along the first HDF5 axis.

    Returns:
        ``ds``, for chaining.

    Raises:
        ValueError: An unknown reference, bad timesteps, or a clash with a published view.
    """
    existing = ds.views.get(name)
    if existing is not None and not existing.added:
        raise ValueError(f"view {name!r} is published in the manifest; choose another name")
    if not fields:
        raise ValueError(f"view {name!r} needs at least one field")
    resolved = []
    for alias, ref in fields.items():
        timesteps: Timesteps = None
        if isinstance(ref, tuple):
            if len(ref) != 2:
                raise ValueError(
                    f"view {name!r} field {alias!r}: expected (field_id, timesteps), got {ref!r}"
                )
            ref, raw_steps = ref
            timesteps = _check_timesteps(raw_steps, name, alias)
        if not isinstance(ref, str):
            raise ValueError(f"view {name!r} field {alias!r}: reference must be a str, not {ref!r}")
        resolved.append(_resolve(ds, name, alias, ref, timesteps, "the dataset"))
    ds.views[name] = View(name=name, id=name, fields=tuple(resolved), added=True)
    ds._mlc = None  # the mlcroissant face, if built, is rebuilt with the new view
    return ds
