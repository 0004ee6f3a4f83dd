"""The quick start of docs/loader.md runs and prints what the page shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("guideloom.storage")

ROOT = Path(__file__).resolve().parents[1]


def test_quick_start_runs_as_documented() -> None:
    page = (ROOT / "docs" / "loader.md").read_text()
    code = re.findall(r"```python\n(.*?)```", page, re.S)[0]
    shown = re.findall(r"```text\n(.*?)```", page, re.S)[0]
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == shown
