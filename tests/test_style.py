"""The code base stays ruff clean and free of eval/exec (checked on the syntax tree)."""

from __future__ import annotations

import ast
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


def _eval_exec_calls(tree: ast.AST) -> list[int]:
    """Lines calling the builtins eval/exec/compile, by name or as attributes (builtins.exec)."""
    banned = {"eval", "exec", "compile"}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else (
                func.attr if isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name) and func.value.id == "builtins" else None)
            if name in banned:
                lines.append(node.lineno)
    return lines


def test_the_eval_exec_check_finds_calls():
    tree = ast.parse("exec(x)\nimport builtins\nbuiltins.eval('1')\nre.compile('a')\n"
                     "asyncio.create_subprocess_exec('ls')\n")
    assert _eval_exec_calls(tree) == [1, 3]


def test_no_eval_or_exec_of_strings():
    offenders = []
    for path in (ROOT / "guideloom").rglob("*.py"):
        for line in _eval_exec_calls(ast.parse(path.read_text())):
            offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == []
