"""The code identity's syntax text is the same on Python 3.11 and a second interpreter (3.12 added
AST fields, 3.13 changed ``ast.dump``): a job resumed or updated from another Python version must
see the same transform."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from guideloom.export.recipe.canonical import canonical_dump

ROOT = Path(__file__).resolve().parents[1]
MODULE = ROOT / "guideloom" / "export" / "recipe" / "canonical.py"
SECOND_PYTHONS = [Path("/root/.pyenv/versions/3.13.0/bin/python3"),
                  Path("/root/.pyenv/versions/3.12.1/bin/python3")]

SOURCE = '''
import numpy as np

@staticmethod
def scaled(rec, *, factor: float = 2.0, **kw) -> dict:
    """A docstring."""
    rows = [r * factor for r in rec["force"] if r is not None]
    label = {k: v for k, v in kw.items()}
    return {"rows": np.stack(rows), "f": f"{factor:.2f}", "l": label, "x": lambda y=1: y}


class Norm:
    mean = 0.5

    def __call__(self, x, /, y=None):
        try:
            return (x - self.mean) if y is None else y
        except (ValueError, KeyError) as exc:
            raise RuntimeError("no") from exc
'''

DUMP = f"""
import ast, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("canonical", {str(MODULE)!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps(module.canonical_dump(ast.parse(sys.stdin.read()))))
"""


def test_fields_a_version_lacks_or_holds_empty_give_the_same_text():
    tree = ast.parse("def f(x):\n    return x\n")
    function = tree.body[0]
    before = canonical_dump(tree)
    function.type_params = []  # as Python 3.12+ parses it
    assert canonical_dump(tree) == before
    function.returns = ast.Name("int", ast.Load())  # a real difference still shows
    assert canonical_dump(tree) != before


@pytest.mark.parametrize("python", [p for p in SECOND_PYTHONS if p.is_file()] or
                         [pytest.param(None, marks=pytest.mark.skip(
                             reason=f"no second Python: none of {SECOND_PYTHONS} exists"))])
def test_the_same_source_gives_the_same_text_on_a_second_python(python):
    here = canonical_dump(ast.parse(SOURCE))
    there = subprocess.run([str(python), "-c", DUMP], input=SOURCE, capture_output=True,
                           text=True, check=True).stdout
    assert json.loads(there) == here
    # the stdlib's own dump differs between these versions: the reason for canonical_dump
    plain = subprocess.run([str(python), "-c", "import ast, sys; print(ast.dump(ast.parse("
                            "sys.stdin.read()), annotate_fields=False))"], input=SOURCE,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert plain != ast.dump(ast.parse(SOURCE), annotate_fields=False) or sys.version_info >= (
        3, 13)
