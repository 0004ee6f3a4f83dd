"""The offline rehearsal holds what the documentation reads (issue 41): ``guideloom serve-release
--demo`` serves a release whose ``sample.zip`` has the published sample's experiment ids, so
rddac's streaming tutorial (a seed text in ``../shared/seeds``, where ``rddac`` is
``guideloom``) runs verbatim against it after ``guideloom download --small``. The tutorial is
read at test time, never copied here; without ``../shared`` that test skips, and the copy-free
check (the ids the tutorial and notebooks use are in the served sample) still runs."""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import h5py
import pytest

import guideloom
from guideloom.demo import member_name
from guideloom.releases.server import PUBLISHED_SAMPLE_IDS, make_demo_release, serve_release

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT.parent / "shared" / "seeds"
TUTORIAL_ID = 4500  # the tutorial's `export.by_sim_id(4500)`


def tutorial_text() -> str | None:
    """The streaming tutorial among the seeds (the one that exports and reads by id)."""
    if not SEEDS.is_dir():
        return None
    for path in sorted(SEEDS.glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        if "export_to_numpy" in text and "by_sim_id(" in text and "SAMPLE_IDS" in text:
            return text
    return None


def code_cells(text: str) -> list[str]:
    """The tutorial's code, cell by cell: every paragraph that parses as Python, except the
    paragraph after an ``Output...:`` line (printed output); ``rddac`` read as ``guideloom``."""
    cells: list[str] = []
    skip = False
    for paragraph in re.split(r"\n\s*\n", text):
        block = paragraph.strip("\n")
        if skip:
            skip = False
            continue
        if re.fullmatch(r"Output\b[^\n]*:", block.strip()):
            skip = True
            continue
        try:
            ast.parse(block)
        except SyntaxError:
            continue  # prose, headings
        cells.append(re.sub(r"\brddac\b", "guideloom", block))
    return cells


def test_the_served_sample_holds_the_published_sample_ids(tmp_path):
    """Copy-free: the demo release's sample.zip is the published sample's 18 ids (4500 among
    them), and after `download --small` a by-id read of 4500 works."""
    release = make_demo_release(tmp_path / "rel", n=2)
    with zipfile.ZipFile(release / "sample.zip") as zf:
        names = zf.namelist()
    assert names == [member_name(i) for i in sorted(PUBLISHED_SAMPLE_IDS)]
    assert member_name(TUTORIAL_ID) in names
    assert len(names) == 18
    with serve_release(release) as server:
        guideloom.download(tmp_path / "data", small=True, server=server.url,
                           show_progress=False)
    data = tmp_path / "data"
    assert sorted(p.name for p in (data / "h5").iterdir()) == ["sample.zip"]
    out = tmp_path / "export"
    guideloom.export_to_numpy("force-curve", out, data_dir=data, client="sync",
                              sim_ids=list(PUBLISHED_SAMPLE_IDS),
                              record_transform=lambda r: {"n": len(r["force_data"])})
    export = guideloom.load_export(out)
    assert export.sim_ids.tolist() == list(PUBLISHED_SAMPLE_IDS)
    with zipfile.ZipFile(data / "h5" / "sample.zip") as zf:
        with zf.open(member_name(TUTORIAL_ID)) as member, h5py.File(member) as h5:
            rows = h5["force/data"].shape[0]
    assert int(export.by_sim_id(TUTORIAL_ID)["n"]) == rows


@pytest.mark.timeout(600)
def test_the_streaming_tutorial_runs_verbatim_against_serve_release(tmp_path):
    """serve-release --demo, download --small, then the tutorial's cells as one script in the
    folder a user runs it from (``DATA_DIR = Path('./data')``)."""
    pytest.importorskip("torch", reason="the tutorial builds a torch DataLoader")
    text = tutorial_text()
    if text is None:
        pytest.skip(f"no streaming tutorial among the seeds in {SEEDS} (../shared absent)")
    cells = code_cells(text)
    assert any("by_sim_id(4500)" in cell for cell in cells), "the tutorial changed: look at it"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen([sys.executable, "-m", "guideloom", "serve-release", "rel", "--demo"],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        first = server.stdout.readline()  # serving ... at URL (127.0.0.1 only)
        assert "(127.0.0.1 only)" in first, first + server.stderr.read()
        url = first.split(" at ")[1].split()[0]
        done = subprocess.run([sys.executable, "-m", "guideloom", "download", "--small", "--yes",
                               "--server", url], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.communicate(timeout=60)
    script = tmp_path / "tutorial.py"
    script.write_text("\n\n".join(cells) + "\n")
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=500)
    assert run.returncode == 0, run.stderr[-3000:]
    ids = ", ".join(map(str, PUBLISHED_SAMPLE_IDS))
    assert "len(export)    = 18" in run.stdout
    assert f"export.sim_ids = [{ids}]" in run.stdout
    assert re.search(r"^max total force = [\d.]+ kN$", run.stdout, re.M), run.stdout
    assert re.search(r"^iter_view   : 18 experiments in ", run.stdout, re.M), run.stdout
    assert (tmp_path / "data" / "tutorial_export" / "sim_ids.npy").is_file()
    assert len(list((tmp_path / "data" / "raw_export").glob("*.npz"))) == 18
