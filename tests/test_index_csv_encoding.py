"""Index tables as spreadsheets save them (issue 22, unclear errors).

* Excel's "CSV UTF-8" starts the file with a byte-order mark: it is read like the plain file
  (it used to be refused as "id column 'index' is missing" while listing ``index``).
* A Latin-1 file is refused with exit 2 naming the file, the line and what to do (it used to be
  a raw ``UnicodeDecodeError``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import guideloom
from guideloom.errors import ManifestError


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "guideloom", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def demo(tmp_path) -> Path:
    guideloom.make_demo_data(tmp_path / "demo-data", n=6)
    return tmp_path / "demo-data"


def test_csv_with_a_byte_order_mark_reads_like_the_plain_file(demo, tmp_path):
    plain = guideloom.load(data_dir=demo).index().ids
    csv = demo / "process_parameters.csv"
    csv.write_bytes(b"\xef\xbb\xbf" + csv.read_bytes())
    assert guideloom.load(data_dir=demo).index().ids == plain
    assert len(plain) == 6
    views = _cli("views", str(demo), cwd=tmp_path)
    assert views.returncode == 0, views.stderr
    assert "6 experiments in the index" in views.stdout


def test_latin1_csv_is_refused_naming_file_and_line(demo, tmp_path):
    csv = demo / "process_parameters.csv"
    lines = csv.read_text(encoding="utf-8").split("\n")
    lines[3] = lines[3].replace("conc", "conc\xe4").replace("conv", "conv\xe9")  # 4th line
    csv.write_bytes("\n".join(lines).encode("latin-1"))
    with pytest.raises(ManifestError, match=rf"{csv}:4: not UTF-8 text .*save the index table"):
        guideloom.load(data_dir=demo).index()
    for args in (("views", str(demo)), ("run", "force_signals")):
        done = _cli(*args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert f"{csv}:4: not UTF-8 text" in done.stderr or \
            "process_parameters.csv:4: not UTF-8 text" in done.stderr, done.stderr
        assert "UnicodeDecodeError" not in done.stderr
        assert "Traceback" not in done.stderr
