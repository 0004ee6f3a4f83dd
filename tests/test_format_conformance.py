"""Every built-in format, and a format defined in a test module, pass the conformance kit
(:class:`guideloom.testing.FormatTests`): round trip against a serial reference, skips, resume,
a crash at every fault point (in this process), ``verify`` and the open-time checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from tests.format_kits import JsonlKit, NpyKit, NpzKit, StorageKit, ZarrKit


class TestNpy(NpyKit):
    pass


class TestNpz(NpzKit):
    pass


class TestNpzCompressed(NpzKit):
    format_options: ClassVar[Mapping[str, Any]] = {"compressed": True}

    def test_the_files_are_deflated(self, clean_export):
        import zipfile

        files = sorted(clean_export.glob("*.npz"))
        with zipfile.ZipFile(files[0]) as zf:
            assert {i.compress_type for i in zf.infolist()} == {zipfile.ZIP_DEFLATED}


class TestZarr(ZarrKit):
    pass


class TestStorage(StorageKit):
    pass


class TestJsonlFromATestModule(JsonlKit):
    pass
