"""The README's Python examples run, in order, on the demo dataset."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from guideloom.demo import make_demo_data

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_examples_run(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) >= 3
    make_demo_data(tmp_path / "demo-data", n=36)
    script = "\n".join(['if __name__ == "__main__":'] +
                       ["    " + line for block in blocks for line in block.splitlines()])
    (tmp_path / "readme_examples.py").write_text(script + "\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "readme_examples.py"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "exports" / "force-signals" / "export.json").is_file()
    assert "('blankholder_force', 'force', 'label_geometry', 'max_total_force')" in result.stdout
