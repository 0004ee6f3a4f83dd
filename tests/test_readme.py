"""The README's Python examples run on the demo dataset, each block on its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from guideloom.demo import make_demo_data

ROOT = Path(__file__).resolve().parents[1]


def run_block(folder: Path, name: str, code: str) -> subprocess.CompletedProcess:
    """Run one block as a plain script (no ``__main__`` guard) in a fresh interpreter."""
    (folder / name).write_text(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, name], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_readme_python_examples_run_each_on_its_own(tmp_path):
    pytest.importorskip("torch", reason="the README's examples use torch (optional)")
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) >= 4
    make_demo_data(tmp_path / "demo-data", n=36)
    outputs = []
    for i, block in enumerate(blocks, 1):
        done = run_block(tmp_path, f"block_{i}.py", block)
        assert done.returncode == 0, f"block {i}:\n{done.stderr[-3000:]}"
        outputs.append(done.stdout)
        if "export_to_numpy(" in block:  # the export block runs twice: a rerun must work too
            again = run_block(tmp_path, f"block_{i}_again.py", block)
            assert again.returncode == 0, f"block {i}, second run:\n{again.stderr[-3000:]}"
    assert (tmp_path / "exports" / "force-signals" / "export.json").is_file()
    assert any("('blankholder_force', 'force', 'label_geometry', 'max_total_force')" in out
               for out in outputs)


def test_every_download_line_of_the_readme_runs_without_a_prompt():
    """A download line copied into a script, a CI job or a SLURM job must not stop at the
    ``[y/N]`` question: each passes ``--yes`` (or ``--quiet``, which implies it)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = [line.split("#")[0] for line in text.splitlines()
             if line.lstrip().startswith("guideloom download")]
    assert len(lines) >= 3, lines
    asking = [line for line in lines if "--yes" not in line and "--quiet" not in line]
    assert asking == [], asking

