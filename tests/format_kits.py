"""The conformance kit (:class:`guideloom.testing.FormatTests`) set up for each format the tests
know: the four built-ins with their default options, and the jsonl format of
``tests/jsonl_format.py`` with options of its own. Not collected (no ``Test`` prefix): the
conformance tests subclass these, and the fault tests run exports with them, in this process
or in a subprocess (:data:`RUN`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

import guideloom
from guideloom.formats import get_format
from guideloom.testing import FormatTests
from guideloom.testing.transforms import (
    chunk_sized_rows,
    chunk_sized_rows_skipping,
    total_force_stream,
    total_force_stream_skipping,
)
from tests.jsonl_format import JsonlFormat

STREAM_DTYPE = np.dtype([("force", "<f4"), ("doc", "<u4")])


class NpyKit(FormatTests):
    format_cls = get_format("npy")


class NpzKit(FormatTests):
    format_cls = get_format("npz")


class ZarrKit(FormatTests):
    """Rows of one chunk each: partitions place rows of several per chunk themselves, so only
    rows this large still reach the gap closing at finalize (``compacted-chunk``)."""

    format_cls = get_format("zarr")
    record_transform = staticmethod(chunk_sized_rows)
    skipping_transform = staticmethod(chunk_sized_rows_skipping)


class StorageKit(FormatTests):
    """Stream rows: each record is the stream slice of its experiment."""

    format_cls = get_format("storage")
    record_transform = staticmethod(total_force_stream)
    skipping_transform = staticmethod(total_force_stream_skipping)

    def options_for(self, target: Path) -> dict[str, Any]:
        return {"storage": guideloom.StreamStorage(str(target),
                                                   guideloom.StreamNumpyFormat(STREAM_DTYPE))}


class JsonlKit(FormatTests):
    format_cls = JsonlFormat
    format_options: ClassVar[Mapping[str, Any]] = {"compact": False, "label": "conformance"}


BUILT_IN_KITS: dict[str, type[FormatTests]] = {"npy": NpyKit, "npz": NpzKit, "zarr": ZarrKit,
                                               "storage": StorageKit}

# one export with a kit, in a fresh interpreter: python -c RUN KIND DATA TARGET IDS
RUN = """
import sys
from pathlib import Path
from tests.format_kits import BUILT_IN_KITS

kind, data, target, ids = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
BUILT_IN_KITS[kind]().run_export(Path(data), Path(target), [int(i) for i in ids.split(",")])
"""
