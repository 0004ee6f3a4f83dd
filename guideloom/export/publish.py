"""A Croissant 1.1 description of a published export, so it can be catalogued like a dataset.

:func:`describe_export` turns an export's ``export.json`` dict and its files into a JSON-LD
document that mlcroissant validates: one ``FileObject`` per file (size and sha256), a
``sim_ids`` record set (the key), and one record set per exported field, a row per experiment
joined to ``sim_ids`` (``references`` on the key), whose value field carries the dtype (as a
Croissant ``dataType``), the per-record shape (``isArray`` / ``arrayShape``) and where it came
from (view field, HDF5 source, timestep slicing as a ``jsonPath``, transforms). The view, the
filters and the transforms are also listed as ``additionalProperty`` values of the dataset.

Example:
    >>> paths = guideloom.export_to_numpy("force-signals", "out", dataset=ds)  # doctest: +SKIP
    >>> manifest = json.loads(Path("out/export.json").read_text())            # doctest: +SKIP
    >>> doc = describe_export(manifest, paths)                                  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from guideloom.formats.layout import CROISSANT_FILE
from guideloom.read.views import timesteps_to_json_path
from guideloom.select.write import CROISSANT_CONTEXT

__all__ = ["CROISSANT_NAME", "describe_export"]

#: Suggested file name of the description inside the export directory.
CROISSANT_NAME = CROISSANT_FILE
#: Files and file sets get ``@id`` ``files/<name>``, apart from the record sets' ids.
FILE_ID_PREFIX = "files/"


_ENCODINGS = {".npy": "application/x-npy", ".npz": "application/x-npz",
              ".json": "application/json", ".gls": "application/octet-stream"}


def _data_type(dtype: str, dtypes: list[str] | None = None) -> str:
    if dtypes:  # records of different dtypes: one type when they are all of one kind
        types = {_data_type(d) for d in dtypes}
        return types.pop() if len(types) == 1 else "sc:Text"
    kind = np.dtype(dtype).kind
    if kind == "b":
        return "sc:Boolean"
    if kind in "iu":
        return "sc:Integer"
    if kind in "fc":
        return "sc:Float"
    return "sc:Text"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 23):
            digest.update(chunk)
    return digest.hexdigest()


def _file_object(key: str, path: Path, root: Path,
                 digests: Mapping[str, str] | None = None) -> dict[str, Any]:
    name = os.path.relpath(path, root) if path.is_relative_to(root) else path.name
    known = (digests or {}).get(os.path.abspath(path))
    return {
        "@type": "cr:FileObject",
        "@id": f"{FILE_ID_PREFIX}{name}",
        "name": name,
        "description": f"export file of {key!r}",
        "contentUrl": name,
        "contentSize": f"{path.stat().st_size} B",
        "encodingFormat": _ENCODINGS.get(path.suffix, "application/octet-stream"),
        "sha256": known or _sha256(path),
    }


def _file_set(key: str, path: Path, root: Path) -> dict[str, Any]:
    name = os.path.relpath(path, root) if path.is_relative_to(root) else path.name
    return {
        "@type": "cr:FileSet",
        "@id": f"{FILE_ID_PREFIX}{name}",
        "name": name,
        "description": f"export files of {key!r} (a directory)",
        "encodingFormat": "application/octet-stream",
        "includes": f"{name}/**",
    }


def _pattern_set(key: str, pattern: str) -> dict[str, Any]:
    suffix = Path(pattern.replace("*", "x")).suffix
    return {
        "@type": "cr:FileSet",
        "@id": f"{FILE_ID_PREFIX}{pattern}",
        "name": pattern,
        "description": f"export files of {key!r}",
        "encodingFormat": _ENCODINGS.get(suffix, "application/octet-stream"),
        "includes": pattern,
    }


def _large_file_set(key: str, path: Path, root: Path) -> dict[str, Any]:
    entry = _pattern_set(key, os.path.relpath(path, root))
    entry["description"] = (f"export file of {key!r} ({path.stat().st_size} B; not hashed when "
                            "published, to spare a second full read)")
    return entry


def _provenance(view_field: Mapping[str, Any] | None, manifest: Mapping[str, Any],
                alias: str) -> str:
    if view_field is None:
        return f"made by the record transform {manifest.get('record_transform')!r}"
    text = f"view {manifest['view']!r} field {alias!r} from {view_field['source']}"
    steps = view_field.get("timesteps")
    if steps is not None:
        path = timesteps_to_json_path(steps if isinstance(steps, int) else tuple(steps))
        text += f", timesteps {path}"
    transform = (manifest.get("transforms") or {}).get(alias)
    if transform:
        text += f", transform {transform}"
    if manifest.get("record_transform"):
        text += f", then the record transform {manifest['record_transform']}"
    return text


def _property(name: str, value: Any) -> dict[str, Any]:
    return {"@type": "sc:PropertyValue", "name": name, "value": str(value)}


_GENERATION_KEYS = ("generation", "created", "release_version", "added", "removed", "changed",
                   "carried", "rows", "skipped")


ORIGIN_KEYS = ("name", "url", "citeAs", "license", "creator")  # what a description takes


def origin_of(source: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of a dataset's Croissant dict that :func:`describe_export` carries over
    (without copying the rest: its record sets, the views added)."""
    return {k: source[k] for k in ORIGIN_KEYS if k in source}


def describe_export(
    manifest: Mapping[str, Any],
    files: Mapping[str, str | os.PathLike[str]],
    *,
    source: Mapping[str, Any] | None = None,
    root: str | os.PathLike[str] | None = None,
    hash_limit: int | None = None,
    digests: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Return a Croissant 1.1 JSON-LD description of a published export.

    Args:
        manifest: The export's ``export.json`` as a dict (``fields``, ``view``, ``view_fields``,
            ``count``, ``kind``, ``transforms``, ``record_transform``, ``filters``...).
        files: Export key (alias or ``"sim_ids"``) → file or directory, as
            ``export_to_numpy`` returns; paths are written relative to their common directory.
            Files are hashed (sha256), which reads them once.
            A string holding ``*`` is a file pattern relative to ``root`` (a ``FileSet``, e.g.
            ``"*.npz"`` for one file per experiment).
        source: The Croissant dict of the dataset the view came from (``ds.to_jsonld()``, or
            only its :data:`ORIGIN_KEYS`); its name, URL, license and citation are carried
            over when given.
        root: The export directory (default: the files' common directory).
        hash_limit: Files larger than this many bytes are described as a one-file ``FileSet``
            instead of a hashed ``FileObject`` (``None``: hash every file).
        digests: sha256 hex digests already computed, by absolute path: those files are not
            read again.

    Returns:
        The JSON-LD document (``json.dump`` it as ``croissant.json`` in the export directory).

    Raises:
        ValueError: ``manifest`` is not a guideloom export manifest, or a field has no file.
    """
    if manifest.get("format") != "guideloom-export":
        raise ValueError("manifest is not a guideloom export.json (format != 'guideloom-export')")
    patterns = {k: v for k, v in files.items() if isinstance(v, str) and "*" in v}
    paths = {key: Path(value) for key, value in files.items() if key not in patterns}
    missing = [a for a in manifest["fields"] if a not in paths and a not in patterns]
    if missing:
        raise ValueError(f"no file given for field(s) {', '.join(missing)}")
    if root is None:
        root = os.path.commonpath([p.parent if p.is_file() else p for p in paths.values()])
    root = Path(root)
    distribution: list[dict[str, Any]] = []
    file_ids: dict[str, tuple[str, str]] = {}
    # every list below is in sorted order, whatever order the fields came in (a resumed job
    # reads its schema back from job.json, sorted; a fresh one has the transform's order)
    for key, pattern in sorted(patterns.items()):
        entry = _pattern_set(key, pattern)
        if entry["@id"] not in {d["@id"] for d in distribution}:
            distribution.append(entry)
        file_ids[key] = ("fileSet", entry["@id"])
    for key, path in sorted(paths.items()):
        if path.is_dir():
            entry = _file_set(key, path, root)
            file_ids[key] = ("fileSet", entry["@id"])
        elif hash_limit is not None and path.stat().st_size > hash_limit:
            entry = _large_file_set(key, path, root)
            file_ids[key] = ("fileSet", entry["@id"])
        else:
            entry = _file_object(key, path, root, digests)
            file_ids[key] = ("fileObject", entry["@id"])
        distribution.append(entry)

    view = str(manifest["view"])
    by_alias = {f["alias"]: f for f in manifest.get("view_fields", [])}
    record_sets = []
    key_ref = None
    if "sim_ids" in file_ids:
        kind, ref = file_ids["sim_ids"]
        key_ref = "sim_ids/sim_id"
        record_sets.append({
            "@type": "cr:RecordSet",
            "@id": "sim_ids",
            "name": "sim_ids",
            "description": f"the experiment id of each of the {manifest.get('count')} rows",
            "key": {"@id": key_ref},
            "field": [{
                "@type": "cr:Field",
                "@id": key_ref,
                "name": "sim_id",
                "dataType": _data_type(manifest.get("sim_ids_dtype", "<i8")),
                "source": {kind: {"@id": ref}, "extract": {"fileProperty": "content"}},
            }],
        })
    for alias, schema in sorted(manifest["fields"].items()):
        kind, ref = file_ids[alias]
        shape = schema.get("shape")
        value: dict[str, Any] = {
            "@type": "cr:Field",
            "@id": f"{alias}/{alias}",
            "name": alias,
            "description": (
                f"{_provenance(by_alias.get(alias), manifest, alias)}; per record: shape "
                f"{tuple(shape) if shape is not None else 'variable'}, dtype {schema['dtype']}"
                + (f" ({', '.join(schema['dtypes'])})" if schema.get("dtypes") else "")
            ),
            "dataType": _data_type(schema["dtype"], schema.get("dtypes")),
            "source": {kind: {"@id": ref}, "extract": {"fileProperty": "content"}},
        }
        if shape is None or len(shape):
            value["isArray"] = True
            value["arrayShape"] = ",".join(str(d) for d in shape) if shape else "-1"
        fields = [value]
        if key_ref is not None:  # row i is experiment sim_ids[i]: the join on the key
            value["references"] = {"field": {"@id": key_ref}}
            fields.insert(0, {
                "@type": "cr:Field",
                "@id": f"{alias}/sim_id",
                "name": "sim_id",
                "dataType": _data_type(manifest.get("sim_ids_dtype", "<i8")),
                "source": {"field": {"@id": key_ref}},
            })
        record_sets.append({
            "@type": "cr:RecordSet",
            "@id": alias,
            "name": alias,
            "description": f"{alias} of each experiment of view {view!r}, row by row",
            "field": fields,
        })

    # an updated export (guideloom.export.update): what each generation added, removed,
    # changed and carried; a full export's description stays as it was
    history = [{k: g.get(k) for k in _GENERATION_KEYS}
               for g in manifest.get("generations") or []]
    if len(history) < 2:
        history = []
    origin = dict(source or {})
    origin_name = str(origin.get("name") or manifest.get("data_dir") or "an experiment dataset")
    doc: dict[str, Any] = {
        "@context": dict(CROISSANT_CONTEXT),
        "@type": "sc:Dataset",
        "conformsTo": "http://mlcommons.org/croissant/1.1",
        "name": f"{origin_name}: {view} export ({manifest.get('kind')})",
        "description": (
            f"guideloom export of view {view!r} of {origin_name}: {manifest.get('count')} records "
            f"written as {manifest.get('kind')} files. Fields: "
            + "; ".join(f"{a} {tuple(s['shape']) if s.get('shape') is not None else 'variable'}"
                        f" {s['dtype']}" for a, s in sorted(manifest["fields"].items()))
        ),
        "url": str(origin.get("url") or Path(root).resolve().as_uri()),
        # an updated export: its first generation's date, this one's, and its number
        "datePublished": str(history[0].get("created") if history else
                             manifest.get("created", "")),
        "version": (f"{history[-1].get('generation', 1)}.0.0" if history
                    else f"{manifest.get('format_version')}.0.0"),
        "citeAs": str(origin.get("citeAs") or f"guideloom export of {origin_name}"),
        "distribution": distribution,
        "recordSet": record_sets,
        "additionalProperty": [
            _property("view", view),
            _property("view_fields", manifest.get("view_fields")),
            _property("transforms", manifest.get("transforms")),
            _property("record_transform", manifest.get("record_transform")),
            _property("filters", manifest.get("filters")),
            _property("sim_ids_sha256", manifest.get("sim_ids_sha256")),
            _property("guideloom_version", manifest.get("guideloom_version")),
            *([_property("generations", json.dumps(history))] if history else []),
        ],
    }
    if history:
        doc["dateModified"] = str(manifest.get("created", ""))
    for key in ("license", "creator"):
        if key in origin:
            doc[key] = origin[key]
    if origin.get("url"):
        doc["isBasedOn"] = str(origin["url"])
    return doc
