"""guideloom's warnings name the user's line, however deep in the package they are raised."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import pytest

import guideloom
from guideloom.errors import MissingDataWarning, SkippedDataWarning

ROOT = Path(__file__).resolve().parents[1]
MISSING = 10


@pytest.fixture
def one_missing(demo_copy: Path) -> Path:
    """The demo data with experiment 10 removed from its archive."""
    archive = demo_copy / "convex.zip"
    with zipfile.ZipFile(archive) as zf:
        payload = {m: zf.read(m) for m in zf.namelist() if m != f"{MISSING:04d}.h5"}
    assert len(payload) == 17
    with zipfile.ZipFile(archive, "w") as zf:
        for member, data in payload.items():
            zf.writestr(member, data)
    return demo_copy


def here() -> int:
    """The line number of the caller's next line."""
    return sys._getframe(1).f_lineno + 1


def located(caught: list[warnings.WarningMessage], category: type[Warning]) -> list[tuple]:
    return [(Path(w.filename), w.lineno) for w in caught if issubclass(w.category, category)]


def fails_on_3(record: dict) -> dict:
    if record["_sim_id"] == 3:
        raise ValueError("cannot use experiment 3")
    return {"rows": record["force_data"][:4]}


def test_iter_view_warns_at_the_users_loop(one_missing):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = here()
        records = list(guideloom.iter_view("force-curve", data_dir=one_missing))
    assert len(records) == 35
    assert located(caught, MissingDataWarning) == [(Path(__file__), line)]


@pytest.mark.parametrize("client", ["sync", "local:2"])
def test_export_to_numpy_warns_at_the_users_call(one_missing, tmp_path, client):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = here()
        paths = guideloom.export_to_numpy("force-curve", tmp_path / "out", data_dir=one_missing,
                                          record_transform=fails_on_3, on_error="skip",
                                          client=client)
    assert paths["rows"].is_file()
    assert located(caught, SkippedDataWarning) == [(Path(__file__), line)]
    missing = located(caught, MissingDataWarning)
    assert missing
    assert set(missing) == {(Path(__file__), line)}


def test_a_warning_about_the_configuration_names_the_line_that_first_uses_it(tmp_path):
    # the configuration is read at first use, not at import (issue 24): importing warns of
    # nothing, and the warning names the user's line that needed the inflate back end
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GUIDELOOM_INFLATE": "no-such-back-end"}
    (tmp_path / "user.py").write_text("import os\nimport guideloom.fastread.inflate\n"
                                      "print(guideloom.fastread.INFLATE_BACKEND)\n")
    done = subprocess.run([sys.executable, "-W", "always::RuntimeWarning", "user.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(f"{tmp_path / 'user.py'}:3: ConfigWarning: "
                                  "GUIDELOOM_INFLATE='no-such-back-end' cannot be used"), \
        done.stderr
