"""Every built-in format, and a format defined in a test module, pass the conformance kit
(:class:`guideloom.testing.FormatTests`): round trip against a serial reference, skips, resume,
a crash at every fault point, ``verify`` and the open-time checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import guideloom
from guideloom.formats import get_format
from guideloom.testing import FormatTests
from guideloom.testing.transforms import total_force_stream, total_force_stream_skipping
from tests.jsonl_format import JsonlFormat

STREAM_DTYPE = np.dtype([("force", "<f4"), ("doc", "<u4")])


class TestNpy(FormatTests):
    format_cls = get_format("npy")


class TestNpz(FormatTests):
    format_cls = get_format("npz")
    format_options = {"compressed": True}


class TestZarr(FormatTests):
    format_cls = get_format("zarr")
    format_options = {"compressor": "zstd"}


class TestStorage(FormatTests):
    """Stream rows: each record is the stream slice of its experiment."""

    format_cls = get_format("storage")
    record_transform = staticmethod(total_force_stream)
    skipping_transform = staticmethod(total_force_stream_skipping)

    def options_for(self, target: Path) -> dict[str, Any]:
        return {"storage": guideloom.StreamStorage(str(target),
                                                   guideloom.StreamNumpyFormat(STREAM_DTYPE))}


class TestJsonlFromATestModule(FormatTests):
    format_cls = JsonlFormat
    format_options = {"compact": False, "label": "conformance"}
