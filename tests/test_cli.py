"""The command line: make-demo-data, views, and one-line errors."""

from __future__ import annotations

import subprocess
import sys

from guideloom.cli import main


def run_cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "guideloom", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_make_demo_data_then_views_via_python_m(tmp_path):
    out = run_cli("make-demo-data", str(tmp_path / "d"), "--n", "6", "--scan-shape", "8", "10",
                  "--layout", "loose", "--seed", "2")
    assert out.returncode == 0, out.stderr
    assert "wrote 6 experiments (loose layout, scans 8x10)" in out.stdout
    assert sorted(p.name for p in (tmp_path / "d" / "h5").iterdir()) == \
        [f"{i:04d}.h5" for i in range(6)]
    views = run_cli("views", str(tmp_path / "d"))
    assert views.returncode == 0, views.stderr
    lines = views.stdout.splitlines()
    assert "6 experiments in the index, 6 with local data" in lines[0]
    assert "force-curve" in lines
    assert "pointcloud-op10" in lines
    z_line = next(line for line in lines if line.strip().startswith("pointcloud_op10_z"))
    assert "shape=(80,)" in z_line
    assert "dtype=float32" in z_line


def test_views_errors_are_one_line_exit_2(tmp_path):
    missing = run_cli("views", str(tmp_path / "nope"))
    assert missing.returncode == 2
    expected = f"guideloom: error: data directory not found: {tmp_path / 'nope'}"
    assert missing.stderr.strip() == expected
    no_manifest = run_cli("views", str(tmp_path))
    assert no_manifest.returncode == 2
    assert len(no_manifest.stderr.strip().splitlines()) == 1
    assert "manifest not found" in no_manifest.stderr
    assert "Traceback" not in no_manifest.stderr


def test_main_returns_exit_code(demo_zip, capsys):
    assert main(["views", str(demo_zip)]) == 0
    assert "force_data" in capsys.readouterr().out


def test_an_empty_selection_is_a_usage_error_without_a_resume_hint(demo_zip, tmp_path, capsys):
    job = tmp_path / "job.toml"
    job.write_text(f'''
[dataset]
data_dir = "{demo_zip}"
[view]
name = "force-curve"
[filter.where]
split = "no-such-split"
[output]
kind = "npz"
path = "out"
[run]
scheduler = "sync"
''')
    assert main(["run", str(job)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("guideloom: error: nothing to export from view 'force-curve'")
    assert "resume" not in err[-1]


def test_make_demo_data_refuses_a_foreign_directory_and_regenerates_its_own(tmp_path):
    import guideloom

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "metadata.json").write_text("{}")  # somebody else's dataset
    done = run_cli("make-demo-data", str(foreign), "--n", "3")
    assert done.returncode == 2
    assert "was not made by make-demo-data" in done.stderr
    assert (foreign / "metadata.json").read_text() == "{}"
    assert run_cli("make-demo-data", str(foreign), "--n", "3", "--force").returncode == 0

    own = tmp_path / "demo"
    assert run_cli("make-demo-data", str(own), "--n", "6", "--layout", "loose").returncode == 0
    assert run_cli("make-demo-data", str(own), "--n", "4").returncode == 0  # zips now
    assert not list((own / "h5").glob("*.h5"))  # the old loose files are gone, not mixed in
    ids = [r["_sim_id"] for r in guideloom.streaming.iter_view("force-curve", data_dir=own)]
    assert ids == [0, 1, 2, 3]


def test_cached_demo_data_is_made_once_and_remade_for_another_format(tmp_path):
    import json

    from guideloom.demo import DEMO_FORMAT, cached_demo_data

    first = cached_demo_data(tmp_path, 3, (20, 30), "zip")
    stamp = first / ".complete"
    made = stamp.stat().st_mtime_ns
    assert cached_demo_data(tmp_path, 3, (20, 30), "zip") == first
    assert stamp.stat().st_mtime_ns == made  # not written again
    old = json.loads(stamp.read_text())
    stamp.write_text(json.dumps({**old, "format": DEMO_FORMAT - 1}))
    (first / "left-over.txt").write_text("from the older format")
    assert cached_demo_data(tmp_path, 3, (20, 30), "zip") == first
    assert json.loads(stamp.read_text())["format"] == DEMO_FORMAT
    assert not (first / "left-over.txt").exists()
