"""The code base stays ruff clean and free of eval/exec."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_clean():
    folders = [d for d in ("guideloom", "tests", "benchmarks", "workflows", "cluster")
               if (ROOT / d).is_dir()]
    assert "guideloom" in folders and "tests" in folders
    result = subprocess.run([sys.executable, "-m", "ruff", "check", *folders],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_eval_or_exec_of_strings():
    offenders = []
    for path in (ROOT / "guideloom").rglob("*.py"):
        text = path.read_text()
        for needle in ("eval(", "exec("):
            if needle in text.replace("literal_eval(", ""):
                offenders.append(f"{path.relative_to(ROOT)}: {needle}")
    assert offenders == []
