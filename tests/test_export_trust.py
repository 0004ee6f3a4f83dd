"""What an export can make its reader do: nothing from an export runs code without trust=True."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import guideloom
from guideloom import DocumentPickleFormat, DocumentStorage
from guideloom.errors import UntrustedExportError

MARKER_ENV = "GUIDELOOM_TEST_PICKLE_MARKER"


class FileOnUnpickle:
    """Unpickling this object creates the file it names: stands for an author's code."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def booby_trapped(rec):
    """A document whose unpickling creates the marker file."""
    return {"sim": rec["_sim_id"], "payload": FileOnUnpickle(os.environ[MARKER_ENV])}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "guideloom", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_a_pickled_export_runs_no_code_without_trust(demo_zip, tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    monkeypatch.setenv(MARKER_ENV, str(marker))
    storage = DocumentStorage(tmp_path / "shared", DocumentPickleFormat())
    guideloom.export_to_storage("force-curve", storage, data_dir=demo_zip,
                                record_transform=booby_trapped, client="sync",
                                sim_ids=[0, 1, 2])
    assert not marker.exists()  # writing pickles, it never unpickles

    with pytest.raises(UntrustedExportError, match="trust=True"):
        guideloom.load_export(storage.directory)
    assert not marker.exists()

    for command in ("inspect", "verify"):
        done = _cli(command, str(storage.directory), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert not marker.exists(), f"guideloom {command} unpickled the export"
    from guideloom.reader import open_sealed

    sealed = open_sealed(storage.directory)
    assert sealed.verify().line()
    with pytest.raises(UntrustedExportError, match="trust=True"):
        sealed[0]
    assert not marker.exists()

    trusted = guideloom.load_export(storage.directory, trust=True)
    assert trusted[0]["sim"] == 0
    assert marker.exists()  # the attack is real: trusting it runs the author's code
