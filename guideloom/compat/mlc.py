"""The ``mlcroissant.Dataset`` face of a :class:`~guideloom.select.manifest.Dataset`, on demand.

Code written for rddac 2.0 / ddacs 3.2 receives an ``mlcroissant.Dataset`` from ``load`` and uses
``ds.metadata.record_sets``, ``ds.mapping`` and ``ds.records(record_set)``. guideloom parses the
manifest natively; these answers are built only when asked for (mlcroissant is an optional
dependency and is imported here, never by ``import guideloom``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["LOOSE_SUBDIR", "local_mapping", "mlcroissant_dataset"]

#: The folder ``rddac download`` writes the archives to, looked in after ``data_dir`` itself.
LOOSE_SUBDIR = "h5"


def local_mapping(ds: Any) -> dict[str, str]:
    """Map each ``FileObject`` ``@id`` of the manifest of ``ds`` (a guideloom ``Dataset``) to
    the local copy of that file.

    A file is looked for at ``data_dir/<name>`` and then ``data_dir/h5/<name>`` (where
    ``rddac download`` writes the archives). Files with no local copy are left out (all of
    them for a release read by URL: mlcroissant then fetches the manifest's ``contentUrl``).
    """
    root = ds.root.local_folder()
    if root is None:  # a release read by URL: nothing is local
        return {}
    mapping: dict[str, str] = {}
    for node in ds.manifest.get("distribution", []):
        types = node.get("@type")
        types = types if isinstance(types, list) else [types]
        if not any(str(t).endswith("FileObject") for t in types):
            continue
        name, node_id = node.get("name"), node.get("@id")
        if not name or not node_id:
            continue
        for folder in (root, root / LOOSE_SUBDIR):
            if (folder / name).is_file():
                mapping[str(node_id)] = str(folder / name)
                break
    return mapping


def mlcroissant_dataset(ds: Any) -> Any:
    """Build the ``mlcroissant.Dataset`` for ``ds`` (its added views included).

    Raises:
        ImportError: mlcroissant is not installed; the message says how to install it.
    """
    try:
        import mlcroissant as mlc
    except ImportError as exc:
        raise ImportError(
            "this needs mlcroissant (the guideloom Dataset answers .metadata, .mapping and "
            ".records() through it); install it with `pip install mlcroissant`, or use "
            "guideloom.streaming.iter_view, which does not need it"
        ) from exc
    return mlc.Dataset(jsonld=ds.to_jsonld(), mapping=local_mapping(ds) or None)

