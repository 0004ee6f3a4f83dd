"""Croissant out: the ``@context`` guideloom writes and added views as record sets.

:func:`manifest_with_views` is what :meth:`Dataset.to_jsonld
<guideloom.select.parse.Dataset.to_jsonld>` returns: the manifest with the views added in
memory (:func:`~guideloom.select.parse.add_view`) as record sets that mlcroissant validates.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from guideloom.read.views import View, timesteps_to_json_path

#: The JSON-LD ``@context`` of the Croissant documents guideloom writes (the demo manifest,
#: an export's ``croissant.json``): schema.org, the Croissant vocabulary and its terms.
CROISSANT_CONTEXT: dict[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "sc": "https://schema.org/",
    "cr": "http://mlcommons.org/croissant/",
    "dct": "http://purl.org/dc/terms/",
    "arrayShape": "cr:arrayShape",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "containedIn": "cr:containedIn",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileObject": "cr:fileObject",
    "fileProperty": "cr:fileProperty",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isArray": "cr:isArray",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "source": "cr:source",
    "transform": "cr:transform",
}

#: JSON-LD terms that added views use, declared in ``@context`` when a manifest lacks them.
VIEW_TERMS = {
    "field": "cr:field",
    "jsonPath": "cr:jsonPath",
    "references": "cr:references",
    "source": "cr:source",
    "transform": "cr:transform",
}


def manifest_with_views(manifest: Mapping[str, Any], views: Mapping[str, View],
                        index_key: str | None) -> dict[str, Any]:
    """A copy of ``manifest`` whose record sets are the published ones plus the added ones of
    ``views`` (each replacing a record set of its name), with the ``@context`` terms they use;
    ``index_key`` is the ``@id`` of the index table's key column, which a view mixing index
    columns and HDF5 fields joins on."""
    added = {name for name, view in views.items() if view.added}
    doc = copy.deepcopy(dict(manifest))
    context = doc.get("@context")
    if isinstance(context, dict) and added:
        for term, iri in VIEW_TERMS.items():
            context.setdefault(term, iri)
    record_sets = [rs for rs in doc.get("recordSet", []) if rs.get("name", "") not in added]
    record_sets.extend(view_to_record_set(v, index_key) for v in views.values() if v.added)
    doc["recordSet"] = record_sets
    return doc


def view_to_record_set(view: View, index_key: str | None) -> dict[str, Any]:
    """Return ``view`` as a Croissant record set that mlcroissant validates.

    Timestep slicing is a standard ``jsonPath`` transform, and a view that mixes index columns
    with HDF5 fields declares the join: its first HDF5 field ``references`` the index key (the
    encoding rddac 2.0 uses).
    """
    mixed = any(f.is_h5 for f in view.fields) and any(not f.is_h5 for f in view.fields)
    join_on = next((f.alias for f in view.fields if f.is_h5), None) if mixed else None
    fields = []
    for f in view.fields:
        source: dict[str, Any] = {"field": {"@id": f.source_id}}
        json_path = timesteps_to_json_path(f.timesteps)
        if json_path is not None:
            source["transform"] = [{"jsonPath": json_path}]
        entry: dict[str, Any] = {
            "@type": "cr:Field",
            "@id": f"{view.id}/{f.alias}",
            "name": f.alias,
        }
        if f.data_type:
            entry["dataType"] = f.data_type
        if f.alias == join_on and index_key is not None:
            entry["references"] = {"field": {"@id": index_key}}
        entry["source"] = source
        fields.append(entry)
    return {"@type": "cr:RecordSet", "@id": view.id, "name": view.name, "field": fields}
