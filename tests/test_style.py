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
    assert "guideloom" in folders
    assert "tests" in folders
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


NEEDS_TORCH = ("torch", "guideloom.pytorch")


def _is_torch_skip(node: ast.AST) -> bool:
    """``pytest.importorskip("torch", ...)``, alone or assigned."""
    call = node.value if isinstance(node, ast.Expr | ast.Assign) else None
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr == "importorskip" and bool(call.args)
            and isinstance(call.args[0], ast.Constant) and call.args[0].value == "torch")


def _unguarded_torch_imports(tree: ast.Module) -> list[int]:
    """Lines importing torch (or guideloom.pytorch) before any ``importorskip("torch")`` of the
    module or of the enclosing function."""
    if any(_is_torch_skip(node) for node in tree.body):
        return []
    scopes: list[ast.AST] = [tree, *(n for n in ast.walk(tree)
                                     if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]
    lines = []
    for scope in scopes:
        skips = [n.lineno for n in ast.walk(scope) if _is_torch_skip(n)]
        for node in ast.walk(scope):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            wanted = [n for n in names if n.split(".")[0] == "torch" or n in NEEDS_TORCH]
            if wanted and not any(line < node.lineno for line in skips):
                lines.append(node.lineno)
    return sorted(set(lines))


def test_the_torch_guard_check_finds_unguarded_imports():
    tree = ast.parse("import pytest\n\n\ndef test_a():\n    from torch.utils.data import X\n\n\n"
                     "def test_b():\n    pytest.importorskip('torch')\n    import torch\n\n\n"
                     "def test_c():\n    from guideloom.pytorch import ViewDataset\n")
    assert _unguarded_torch_imports(tree) == [5, 14]
    guarded = ast.parse("import pytest\n\ntorch = pytest.importorskip('torch')\nimport torch.nn\n")
    assert _unguarded_torch_imports(guarded) == []


def test_tests_skip_without_torch():
    """torch is optional (the ``torch`` extra): a test that imports it skips when it is absent."""
    offenders = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        for line in _unguarded_torch_imports(ast.parse(path.read_text())):
            offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == []
