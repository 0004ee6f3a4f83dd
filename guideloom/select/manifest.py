"""Croissant 1.1 manifests: record sets, the HDF5 field map, the index table and views.

This module is the public face of the manifest (rddac's and ddacs' ``croissant`` is this module
itself): :func:`load` reads a manifest, :func:`add_view` adds a view in memory, and the rddac /
ddacs helpers below answer questions about a loaded dataset. The work is done in three modules
of their own: :mod:`~guideloom.select.presets` (:class:`DatasetSpec` and the known dataset
identities), :mod:`~guideloom.select.parse` (the manifest into a :class:`Dataset`) and
:mod:`~guideloom.select.write` (added views back into Croissant).

Example:
    >>> import guideloom
    >>> ds = guideloom.load(data_dir="./data")                      # doctest: +SKIP
    >>> guideloom.add_view(ds, "force-signals", fields={
    ...     "force": "force_data",                                   # field-map entry
    ...     "geometry": "process-parameters/geometry",               # index column
    ...     "first_rows": ("force_data", [0, 1, 2]),                 # timestep slicing
    ... })                                                           # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from guideloom.read.files import confined as confined
from guideloom.read.manifest import read_manifest
from guideloom.read.roots import DataRoot
from guideloom.read.roots import refuse_local_storage_options as refuse_local_storage_options
from guideloom.read.views import Timesteps as Timesteps
from guideloom.read.views import View as View
from guideloom.read.views import ViewField as ViewField
from guideloom.read.views import timesteps_from_json_path as timesteps_from_json_path
from guideloom.read.views import timesteps_to_json_path as timesteps_to_json_path
from guideloom.select.parse import Dataset as Dataset
from guideloom.select.parse import FieldMapEntry as FieldMapEntry
from guideloom.select.parse import FieldRef as FieldRef
from guideloom.select.parse import FieldSpec as FieldSpec
from guideloom.select.parse import IndexColumn as IndexColumn
from guideloom.select.parse import TimestepSpec as TimestepSpec
from guideloom.select.parse import add_view as add_view
from guideloom.select.parse import parse_manifest
from guideloom.select.presets import DDACS_SAMPLE_SIM_ID as DDACS_SAMPLE_SIM_ID
from guideloom.select.presets import DDACS_SPEC as DDACS_SPEC
from guideloom.select.presets import DEFAULT_DATA_DIR as DEFAULT_DATA_DIR
from guideloom.select.presets import DEFAULT_FIELD_DATA_TYPE as DEFAULT_FIELD_DATA_TYPE
from guideloom.select.presets import FIELD_MAP_RECORD_SET as FIELD_MAP_RECORD_SET
from guideloom.select.presets import MANIFEST_NAME as MANIFEST_NAME
from guideloom.select.presets import RDDAC_SPEC as RDDAC_SPEC
from guideloom.select.presets import DatasetSpec as DatasetSpec
from guideloom.select.write import CROISSANT_CONTEXT as CROISSANT_CONTEXT


def load(
    data_dir: str | os.PathLike[str] | DataRoot | Mapping[str, Any] | None = None,
    source: str | Path | Mapping[str, Any] | None = None,
    *,
    spec: DatasetSpec | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Dataset:
    """Read a dataset's Croissant manifest.

    Both argument orders work: guideloom's ``load(data_dir, source)`` and rddac's
    ``load(source, data_dir)``. A first positional argument that is a manifest (a parsed dict,
    or a path ending in ``.json``) is taken as ``source``, and the second then as ``data_dir``.

    Args:
        data_dir: Directory with the index table and the HDF5 files (zipped or loose);
            a relative path is made absolute against the current directory. Default: the
            manifest's folder when ``source`` is a path, else ``./data``. An ``https://`` or
            fsspec URL of a release, or its DOI (``doi:10.18419/DARUS-5589``), is read
            remotely by byte ranges (:mod:`guideloom.read.roots`).
        source: The manifest: a path to a JSON file, a parsed dict, or ``None`` for
            ``data_dir/metadata.json``.
        spec: Overrides for what the manifest leaves open (see :class:`DatasetSpec`).
        storage_options: For a remote ``data_dir``: fsspec options (credentials, endpoint,
            as ``xarray.open_zarr`` takes them), kept with the dataset and sent to the Dask
            workers that read it; never written to an export or a log.

    Returns:
        The parsed :class:`Dataset`.

    Raises:
        FileNotFoundError: The data directory or the manifest does not exist.
        ManifestError: The manifest is not valid JSON or lacks what guideloom needs.
        ValueError: ``storage_options`` with a local ``data_dir``.
    """
    if is_manifest(data_dir) and not is_manifest(source):
        data_dir, source = source, data_dir  # rddac's order: load(source, data_dir)
    spec = spec or DatasetSpec()
    manifest, manifest_path, root = read_manifest(data_dir, source, spec.metadata_file,
                                                  spec.default_data_dir, storage_options)
    return parse_manifest(manifest, manifest_path, root, spec)


def is_manifest(value: object) -> bool:
    """True for what can only be a manifest: a dict, or a path naming a ``.json`` file."""
    if isinstance(value, Mapping):
        return True
    return (isinstance(value, str | os.PathLike) and os.fspath(value).lower().endswith(".json")
            and not os.path.isdir(value))


# --- rddac 2.0 / ddacs 3.2 helpers over a loaded dataset (theirs take an mlcroissant.Dataset;
# these take a guideloom Dataset, or an mlcroissant one) ------------------------------------


def field_map(ds: Any) -> dict[str, Any]:
    """Map each field-map field name to its mlcroissant ``Field`` (needs mlcroissant).

    ``field_map(ds)["force_data"].source.transforms[0].regex`` is the HDF5 path, as in rddac.
    guideloom's own parse of the same entries is ``ds.field_map`` (no mlcroissant needed).
    """
    rs_id = ds.field_map_id if isinstance(ds, Dataset) else "field-map"
    rs = next((r for r in ds.metadata.record_sets if r.id == rs_id), None)
    return {} if rs is None else {f.name: f for f in rs.fields}


def process_parameters_descriptions(ds: Any) -> dict[str, str]:
    """Map each index-table column to its description in the manifest (``""`` when none)."""
    if isinstance(ds, Dataset):
        for rs in ds.manifest.get("recordSet", []):
            if rs.get("@id") == ds.index_record_set:
                return {str(f["name"]): str(f.get("description") or "")
                        for f in rs.get("field", [])}
        return {}
    rs = next((r for r in ds.metadata.record_sets if r.id == "process-parameters"), None)
    return {} if rs is None else {f.name: (f.description or "") for f in rs.fields}


def dataset_name(ds: Any) -> str:
    """The manifest's ``name`` (``""`` when it has none)."""
    if isinstance(ds, Dataset):
        return str(ds.manifest.get("name") or "")
    return ds.metadata.name or ""


def resolve_source(source: str | Path | None = None, data_dir: str | Path | None = None,
                   spec: DatasetSpec | None = None) -> str:
    """The manifest :func:`load` reads: ``source`` if given, else ``data_dir/metadata.json``.

    guideloom never downloads: where rddac falls back to the DaRUS URL, this raises.

    Raises:
        FileNotFoundError: Neither is given or the manifest is not in ``data_dir``.
    """
    if source is not None:
        return str(source)
    spec = spec or DatasetSpec()
    local = Path(data_dir if data_dir is not None else spec.default_data_dir) / spec.metadata_file
    if local.is_file():
        return str(local)
    raise FileNotFoundError(
        f"Croissant manifest not found: {local}; download the dataset first (guideloom reads "
        "local files only)")
