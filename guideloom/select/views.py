"""Describing a dataset's views: fields, sources, shapes and dtypes from one experiment."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from guideloom.errors import ExperimentReadError
from guideloom.read.records import RecordReader
from guideloom.read.views import View
from guideloom.select.manifest import load
from guideloom.select.selection import Selection, select

_PROBE_LIMIT = 20  # experiments tried per view before giving up on a shape


def describe_views(data_dir: str | Path, source: str | Path | None = None) -> Iterator[str]:
    """Yield printable lines: one per view, one per field with its shape and dtype.

    Shapes come from the first experiment (of the first few) whose file has every field.
    """
    ds = load(data_dir, source)  # a URL or DOI too: the first experiments read by ranges
    selection = select(ds, ds.root, warn_missing=False)
    yield f"{ds.name}: {len(ds.index())} experiments in the index, " \
          f"{len(selection.locations)} with " \
          f"{ds.root.data_phrase}"
    for view in ds.views.values():
        yield f"{view.name}"
        probe = _probe(view, selection)
        for vf in view.fields:
            src = vf.h5_path if vf.is_h5 else f"{ds.index_file}:{vf.column}"
            if probe is None:
                shape = "(no experiment with these fields found)"
            else:
                value = np.asarray(probe[vf.alias])
                shape = f"shape={value.shape} dtype={value.dtype}"
            yield f"  {vf.alias:32s} {src:34s} {shape}"


def _probe(view: View, selection: Selection) -> dict[str, Any] | None:
    reader = RecordReader(view)
    for loc, row in list(zip(selection.locations, selection.rows, strict=True))[:_PROBE_LIMIT]:
        try:
            return reader.read(loc, row)
        except ExperimentReadError:
            continue
    return None
