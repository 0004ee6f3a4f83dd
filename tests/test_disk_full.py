"""A full disk names the file and what to do (issue 22, unclear errors).

The export's target is on a real, tiny tmpfs mounted by the test (root only): reserving the
rows of an npy export fails with ``ENOSPC``, which used to read ``[Errno 28] No space left on
device`` and nothing else.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.export import export


@pytest.fixture
def tiny_disk(tmp_path) -> Path:
    """A 2 MiB tmpfs at ``tmp_path/disk``, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2M", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def big_rows(rec):
    """About 2 MiB per record: six of them never fit on the tiny disk."""
    return {"force": np.tile(np.asarray(rec["force_data"], dtype=np.float32)[:1000], (64, 1))}


def test_full_disk_names_the_file_it_could_not_write(tiny_disk, tmp_path):
    guideloom.make_demo_data(tmp_path / "data", n=6)
    with pytest.raises(OSError) as caught:
        export("force-curve", tiny_disk / "out", kind="npy", data_dir=tmp_path / "data",
               record_transform=big_rows, client="sync")
    message = str(caught.value)
    assert caught.value.errno == errno.ENOSPC
    assert str(tiny_disk / ".out.guideloom-staging" / "rows" / "force.npy.alloc") in message
    assert "free space there or write the export elsewhere" in message
    staged = list((tiny_disk / ".out.guideloom-staging" / "rows").iterdir())
    assert staged == []  # the reservation was given back


def test_full_disk_from_the_command_line(tiny_disk, tmp_path):
    guideloom.make_demo_data(tmp_path / "demo-data", n=6)
    (tmp_path / "rows.py").write_text(
        "import numpy as np\n\n\ndef big_rows(rec):\n"
        "    return {'force': np.tile(np.asarray(rec['force_data'], dtype=np.float32)[:1000],"
        " (64, 1))}\n")
    (tmp_path / "job.toml").write_text(f"""
python_path = ["."]
[dataset]
data_dir = "demo-data"
[view]
name = "force-curve"
[transforms]
record = "rows:big_rows"
[output]
kind = "npy"
path = "{tiny_disk / 'out'}"
""")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-m", "guideloom", "run", "job.toml", "--scheduler",
                           "sync"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stderr
    assert "force.npy.alloc: No space left on device; free space there" in done.stderr
    assert "Traceback" not in done.stderr
