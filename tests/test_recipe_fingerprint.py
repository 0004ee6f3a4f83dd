"""Issue 38, item 1: the recipe fails closed. Each of 19 ordinary ways of writing a transform is
exported, changed as a user would (the module file rewritten and reloaded), and updated: the
update refuses, naming the component that changed, and a fresh export of the changed code
proves the change mattered (its rows differ from the export's). Comment, docstring and
formatting edits (``ruff format`` run for real) update as "up to date"; a value with no
deterministic token and code reading the world refuse unless ``code_version`` names the code;
``code_version`` works from the API, a workflow file and ``guideloom run --code-version``."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.cli import main
from guideloom.errors import UpdateRefusedError

VIEW = "force-curve"
IDS = range(4)

# Each case: (the module's code before, after, what the refusal names). ``{m}`` is the module's
# name, ``{h}`` a helper module's (``HELPER`` before/after, only where the case uses it).
HEAD = "import dataclasses, functools, os, types\nimport numpy as np\n\n\n"
OUT = 'return {"force": np.asarray(rec["force_data"])[:50] * '
CASES = {
    "module constant": (
        f"SCALE = 2.0\n\ndef transform(rec):\n    {OUT}SCALE}}\n",
        f"SCALE = 3.0\n\ndef transform(rec):\n    {OUT}SCALE}}\n",
        "{m}.SCALE changed"),
    "helper function": (
        f"def helper():\n    return 2.0\n\ndef transform(rec):\n    {OUT}helper()}}\n",
        f"def helper():\n    return 3.0\n\ndef transform(rec):\n    {OUT}helper()}}\n",
        "{m}.helper: source changed"),
    "imported local helper": (
        f"import {{h}}\n\ndef transform(rec):\n    {OUT}{{h}}.scale()}}\n",
        None,  # the helper module changes
        "{h}.scale: source changed"),
    "SimpleNamespace config": (
        f"NORM = types.SimpleNamespace(std=2.0, mean=0.0)\n\ndef transform(rec):\n"
        f"    {OUT}NORM.std}}\n",
        f"NORM = types.SimpleNamespace(std=4.0, mean=0.0)\n\ndef transform(rec):\n"
        f"    {OUT}NORM.std}}\n",
        "{m}.NORM.std changed"),
    "dataclass instance": (
        "@dataclasses.dataclass\nclass Cfg:\n    k: float = 1.0\n\nCFG = Cfg(k=2.0)\n\n"
        f"def transform(rec):\n    {OUT}CFG.k}}\n",
        "@dataclasses.dataclass\nclass Cfg:\n    k: float = 1.0\n\nCFG = Cfg(k=5.0)\n\n"
        f"def transform(rec):\n    {OUT}CFG.k}}\n",
        "{m}.CFG.k changed"),
    "keyword-only default": (
        f"def transform(rec, *, k=2.0):\n    {OUT}k}}\n",
        f"def transform(rec, *, k=3.0):\n    {OUT}k}}\n",
        "{m}.transform(default k) changed"),
    "positional default": (
        f"def transform(rec, k=2.0):\n    {OUT}k}}\n",
        f"def transform(rec, k=3.0):\n    {OUT}k}}\n",
        "{m}.transform(default k) changed"),
    "object default": (
        f"def transform(rec, cfg=types.SimpleNamespace(k=2.0)):\n    {OUT}cfg.k}}\n",
        f"def transform(rec, cfg=types.SimpleNamespace(k=3.0)):\n    {OUT}cfg.k}}\n",
        "{m}.transform(default cfg).k changed"),
    "bound method": (
        "class Scaler:\n    def __init__(self, f):\n        self.f = f\n\n"
        f"    def apply(self, rec):\n        {OUT}self.f}}\n\nSCALER = Scaler(2.0)\n"
        "transform = SCALER.apply\n",
        "class Scaler:\n    def __init__(self, f):\n        self.f = f\n\n"
        f"    def apply(self, rec):\n        {OUT}self.f}}\n\nSCALER = Scaler(3.0)\n"
        "transform = SCALER.apply\n",
        "{m}.SCALER.f changed"),
    "callable instance": (
        "class Mul:\n    def __init__(self, k):\n        self.k = k\n\n"
        "    def __call__(self, x):\n        return x * self.k\n\nMUL = Mul(2.0)\n\n"
        f"def transform(rec):\n    {OUT}MUL(1.0)}}\n",
        "class Mul:\n    def __init__(self, k):\n        self.k = k\n\n"
        "    def __call__(self, x):\n        return x * self.k\n\nMUL = Mul(3.0)\n\n"
        f"def transform(rec):\n    {OUT}MUL(1.0)}}\n",
        "{m}.MUL.k changed"),
    "callable instance with __slots__": (
        "class Mul:\n    __slots__ = ('k',)\n\n    def __init__(self, k):\n        self.k = k\n\n"
        "    def __call__(self, x):\n        return x * self.k\n\nMUL = Mul(2.0)\n\n"
        f"def transform(rec):\n    {OUT}MUL(1.0)}}\n",
        "class Mul:\n    __slots__ = ('k',)\n\n    def __init__(self, k):\n        self.k = k\n\n"
        "    def __call__(self, x):\n        return x * self.k\n\nMUL = Mul(3.0)\n\n"
        f"def transform(rec):\n    {OUT}MUL(1.0)}}\n",
        "{m}.MUL.k changed"),
    "partial positional": (
        "def scale(k, x):\n    return k * x\n\nP = functools.partial(scale, 2.0)\n\n"
        f"def transform(rec):\n    {OUT}P(1.0)}}\n",
        "def scale(k, x):\n    return k * x\n\nP = functools.partial(scale, 3.0)\n\n"
        f"def transform(rec):\n    {OUT}P(1.0)}}\n",
        "{m}.P.args[0] changed"),
    "partial keyword": (
        "def scale(x, k=1.0):\n    return k * x\n\nP = functools.partial(scale, k=2.0)\n\n"
        f"def transform(rec):\n    {OUT}P(1.0)}}\n",
        "def scale(x, k=1.0):\n    return k * x\n\nP = functools.partial(scale, k=3.0)\n\n"
        f"def transform(rec):\n    {OUT}P(1.0)}}\n",
        "{m}.P.keywords['k'] changed"),
    "dict of helpers": (
        "def double():\n    return 2.0\n\ndef triple():\n    return 3.0\n\n"
        "OPS = {'a': double, 'b': triple}\n\n"
        f"def transform(rec):\n    {OUT}OPS['a']()}}\n",
        "def double():\n    return 2.0\n\ndef triple():\n    return 3.0\n\n"
        "OPS = {'a': triple, 'b': double}\n\n"
        f"def transform(rec):\n    {OUT}OPS['a']()}}\n",
        "{m}.OPS['a'] changed"),
    "list of helpers": (
        "def double():\n    return 2.0\n\ndef triple():\n    return 3.0\n\n"
        "OPS = [double, triple]\n\n"
        f"def transform(rec):\n    {OUT}OPS[0]()}}\n",
        "def double():\n    return 2.0\n\ndef triple():\n    return 3.0\n\n"
        "OPS = [triple, double]\n\n"
        f"def transform(rec):\n    {OUT}OPS[0]()}}\n",
        "{m}.OPS[0] changed"),
    "class attribute": (  # set outside the class body: only its value tells
        "class Settings:\n    FACTOR = 1.0\n\nSettings.FACTOR = 2.0\n\n"
        f"def transform(rec):\n    {OUT}Settings.FACTOR}}\n",
        "class Settings:\n    FACTOR = 1.0\n\nSettings.FACTOR = 3.0\n\n"
        f"def transform(rec):\n    {OUT}Settings.FACTOR}}\n",
        "{m}.Settings.FACTOR changed"),
    "closure over an object": (
        f"def make(cfg):\n    def transform(rec):\n        {OUT}cfg.k}}\n    return transform\n\n"
        "transform = make(types.SimpleNamespace(k=2.0))\n",
        f"def make(cfg):\n    def transform(rec):\n        {OUT}cfg.k}}\n    return transform\n\n"
        "transform = make(types.SimpleNamespace(k=3.0))\n",
        "{m}.make.<locals>.transform.cfg.k changed"),
    "numpy array global": (
        f"W = np.array([1.0, 2.0])\n\ndef transform(rec):\n    {OUT}W[1]}}\n",
        f"W = np.array([1.0, 3.0])\n\ndef transform(rec):\n    {OUT}W[1]}}\n",
        "{m}.W changed"),
    "environment variable": (
        f"def transform(rec):\n    {OUT}float(os.environ.get('GL_RECIPE_SCALE', '1'))}}\n",
        None,  # the code stays, the variable changes
        "reads os.environ: pass code_version="),
}
HELPER = ("def scale():\n    return 2.0\n", "def scale():\n    return 3.0\n")


class UserCode:
    """A module of transforms in a folder on ``sys.path``, rewritten and reloaded as a user
    edits and re-runs it."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder = folder
        self.name = name
        self.helper = f"{name}_helper"
        self.modules: list[str] = []

    def write(self, code: str, helper: str | None = None) -> None:
        if helper is not None:
            (self.folder / f"{self.helper}.py").write_text(helper)
        (self.folder / f"{self.name}.py").write_text(HEAD + code.replace("{h}", self.helper))

    def load(self):
        """The module, imported or reloaded from its file (helpers first)."""
        for name in (self.helper, self.name):
            if name in sys.modules:
                importlib.reload(sys.modules[name])
            elif (self.folder / f"{name}.py").exists():
                importlib.import_module(name)
        return sys.modules[self.name]


@pytest.fixture
def user_code(tmp_path, monkeypatch, request):
    """A fresh module name per test (``sys.modules`` is process-wide), never cached as .pyc."""
    folder = tmp_path / "code"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    name = "usr_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:60]
    code = UserCode(folder, name)
    yield code
    for module in (code.name, code.helper):
        sys.modules.pop(module, None)


def export(data: Path, target: Path, transform, **options):
    return guideloom.export.export(VIEW, target, kind="npy", data_dir=data, sim_ids=list(IDS),
                                   record_transform=transform, client="sync",
                                   partition_size=2, **options)


def rows(target: Path) -> list[np.ndarray]:
    with guideloom.load_export(target) as exp:
        return [np.array(exp[i]["force"]) for i in range(len(exp))]


@pytest.mark.parametrize("case", list(CASES))
def test_a_changed_transform_refuses_the_update_naming_what_changed(case, small_loose,
                                                                   user_code, tmp_path,
                                                                   monkeypatch):
    before, after, named = CASES[case]
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    monkeypatch.setenv("GL_RECIPE_SCALE", "2")
    user_code.write(before, HELPER[0])
    export(small_loose, out, user_code.load().transform)
    recorded = (out / "export.json").read_bytes()
    if case == "imported local helper":
        user_code.write(before, HELPER[1])
    elif case == "environment variable":
        monkeypatch.setenv("GL_RECIPE_SCALE", "3")
    else:
        user_code.write(after)
    changed = user_code.load().transform
    with pytest.raises(UpdateRefusedError) as refused:
        export(small_loose, out, changed, update=True)
    line = str(refused.value)
    assert named.format(m=user_code.name, h=user_code.helper) in line, line
    assert "\n" not in line
    assert ("overwrite=True" in line or "code_version=" in line)
    assert (out / "export.json").read_bytes() == recorded  # nothing published
    export(small_loose, fresh, changed)  # the change matters: carrying would have been wrong
    assert not all(np.array_equal(a, b) for a, b in zip(rows(out), rows(fresh), strict=True))


def _edits() -> dict[str, tuple[str, str]]:
    code = ('SCALE = 2.0\n\n\ndef helper(x):\n    return x * SCALE\n\n\n'
            'def transform(rec):\n    return {"force": helper(np.asarray(rec["force_data"])'
            '[:50])}\n')
    return {
        "comment": (code, code.replace("def helper(x):\n",
                                       "def helper(x):\n    # scales by SCALE (a comment)\n")),
        "docstring": (code, code.replace("def transform(rec):\n",
                                         'def transform(rec):\n    """The first rows."""\n')),
        "formatting": (code.replace("return x * SCALE", "return (x*SCALE)").replace(
            '{"force": helper(', "{'force' :helper( "), ""),  # after: ruff format's
    }


@pytest.mark.parametrize("edit", list(_edits()))
def test_a_comment_docstring_or_formatting_edit_keeps_the_export_up_to_date(edit, small_loose,
                                                                           user_code,
                                                                           tmp_path):
    before, after = _edits()[edit]
    out = tmp_path / "out"
    user_code.write(before)
    export(small_loose, out, user_code.load().transform)
    source = user_code.folder / f"{user_code.name}.py"
    if edit == "formatting":
        formatted = subprocess.run([sys.executable, "-m", "ruff", "format", "--isolated",
                                    str(source)], capture_output=True, text=True, timeout=60)
        assert formatted.returncode == 0, formatted.stderr
        assert source.read_text() != HEAD + before  # ruff changed the file
    else:
        user_code.write(after)
    result = export(small_loose, out, user_code.load().transform, update=True)
    assert result.up_to_date, result.update


def test_a_value_without_a_deterministic_token_refuses_naming_it(small_loose, user_code,
                                                                 tmp_path):
    code = ("import threading\n\nLOCK = threading.Lock()\n\n"
            f"def transform(rec):\n    with LOCK:\n        {OUT}1.0}}\n")
    out = tmp_path / "out"
    user_code.write(code)
    transform = user_code.load().transform
    export(small_loose, out, transform)
    with pytest.raises(UpdateRefusedError) as refused:
        export(small_loose, out, transform, update=True)
    assert (f"record transform: value {user_code.name}.LOCK (a lock) cannot be fingerprinted: "
            "pass code_version=") in str(refused.value)
    export(small_loose, out, transform, overwrite=True, code_version="locks-1")
    assert export(small_loose, out, transform, update=True, code_version="locks-1").up_to_date


def test_code_reading_the_world_refuses_each_kind_naming_it(user_code):
    """The world rule on code alone (no export needed): each kind of reading is named."""
    from guideloom.export.recipe import transform_recipe
    from guideloom.export.recipe.compare import untrusted

    readers = {
        "os.environ": "from os import getenv\n\ndef transform(rec):\n    return getenv('X')\n",
        "files": "from pathlib import Path\n\ndef transform(rec):\n"
                 "    return Path('w.txt').read_text()\n",
        "the clock": "import datetime\n\ndef transform(rec):\n"
                     "    return datetime.datetime.now()\n",
        "an unseeded random generator": "def transform(rec):\n    return np.random.rand()\n",
    }
    for kind, code in readers.items():
        user_code.write(code)
        components = transform_recipe(user_code.load().transform).components
        assert untrusted("t", components) == f"t: reads {kind}: pass code_version=", kind
    user_code.write("def transform(rec):\n    return np.random.default_rng(7).random()\n")
    assert untrusted("t", transform_recipe(user_code.load().transform).components) is None


def test_code_version_replaces_the_code_identity(small_loose, user_code, tmp_path):
    out = tmp_path / "out"
    user_code.write(f"def transform(rec):\n    {OUT}2.0}}\n")
    export(small_loose, out, user_code.load().transform, code_version="v1")
    recipe = json.loads((out / "export.json").read_text())["recipe"]
    assert recipe["code_version"] == "v1"
    assert recipe["components"]["record transform"]["code_version"] == "v1"
    first = rows(out)
    # the code changes, its version does not: the user's promise, kept as given (rows carried)
    user_code.write(f"def transform(rec):\n    {OUT}5.0}}\n")
    changed = user_code.load().transform
    assert export(small_loose, out, changed, update=True, code_version="v1").up_to_date
    with pytest.raises(UpdateRefusedError) as refused:
        export(small_loose, out, changed, update=True, code_version="v2")
    assert "record transform: code_version 'v1' is now 'v2'" in str(refused.value)
    with pytest.raises(UpdateRefusedError, match="code_version 'v1' is now None"):
        export(small_loose, out, changed, update=True)
    # the promise broken is the user's: the rows of the old code stayed (docs/updating.md)
    assert [a.tolist() for a in rows(out)] == [a.tolist() for a in first]
    export(small_loose, out, changed, overwrite=True, code_version="v2")
    assert [a.tolist() for a in rows(out)] != [a.tolist() for a in first]


def test_an_export_recorded_by_the_older_recipe_asks_for_one_full_export(small_loose,
                                                                         user_code, tmp_path):
    out = tmp_path / "out"
    user_code.write(f"def transform(rec):\n    {OUT}2.0}}\n")
    transform = user_code.load().transform
    export(small_loose, out, transform)
    manifest = json.loads((out / "export.json").read_text())
    recipe = manifest["recipe"]  # as guideloom before issue 38 wrote it: parts only
    recipe["parts"]["record_transform"] = "0" * 64
    recipe["sha256"] = "1" * 64
    for key in ("components", "scheme", "code_version"):
        del recipe[key]
    (out / "export.json").write_text(json.dumps(manifest))
    with pytest.raises(UpdateRefusedError) as refused:
        export(small_loose, out, transform, update=True)
    line = str(refused.value)
    assert "recorded by an older guideloom" in line
    assert "overwrite=True" in line
    export(small_loose, out, transform, overwrite=True)
    assert export(small_loose, out, transform, update=True).up_to_date


RECIPE_TRANSFORM = '''
import dataclasses, functools, types
import numpy as np

@dataclasses.dataclass
class Cfg:
    k: float = 2.0
    tags: frozenset = frozenset({"a", "b", "c"})

NORM = types.SimpleNamespace(std=2.0, names={"x", "y", "z"})
OPS = {"a": lambda x: x + 1, "b": functools.partial(max, 0)}
W = np.arange(6.0)

def transform(rec, *, cfg=Cfg()):
    return {"force": np.asarray(rec["force_data"])[:5] * NORM.std * cfg.k + OPS["a"](W[0])}
'''
PRINT_FINGERPRINT = '''
import sys
sys.path.insert(0, sys.argv[1])
import usr_recipe_proc
from guideloom.export.fingerprint import callable_fingerprint
print(callable_fingerprint(usr_recipe_proc.transform))
'''


def test_another_interpreter_gives_the_same_fingerprint(tmp_path, monkeypatch):
    """This process and a fresh one with another string hash seed (sets of strings iterate in
    another order) agree on a transform reaching sets, a dataclass, a lambda and a partial."""
    from guideloom.export.fingerprint import callable_fingerprint

    (tmp_path / "usr_recipe_proc.py").write_text(RECIPE_TRANSFORM)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "usr_recipe_proc", raising=False)
    here = callable_fingerprint(importlib.import_module("usr_recipe_proc").transform)
    seed = "1" if os.environ.get("PYTHONHASHSEED") != "1" else "2"
    done = subprocess.run([sys.executable, "-c", PRINT_FINGERPRINT, str(tmp_path)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONHASHSEED": seed})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == here
    assert here.startswith("usr_recipe_proc:transform#")
    sys.modules.pop("usr_recipe_proc", None)


WORKFLOW = '''
name = "recipe-test"
[dataset]
data_dir = "{data}"
[view]
name = "force-curve"
[transforms]
record = "{module}:transform"
{code_version}
[output]
kind = "npy"
path = "{out}"
partition_size = 2
[run]
scheduler = "sync"
'''


def test_code_version_from_the_command_line_and_the_workflow_file(small_loose, user_code,
                                                                  tmp_path, monkeypatch,
                                                                  capsys):
    user_code.write(f"def transform(rec):\n    {OUT}float(os.environ.get('GL_S', '1'))}}\n")
    out = tmp_path / "out"
    workflow = tmp_path / "wf.toml"

    def write(code_version: str = "") -> str:
        workflow.write_text(WORKFLOW.format(data=small_loose, module=user_code.name, out=out,
                                            code_version=code_version))
        return str(workflow)

    assert main(["run", write(), "--update"]) == 0  # nothing there: a full export
    capsys.readouterr()
    assert main(["run", write(), "--update"]) == 2  # reads the environment: refused
    assert "record transform: reads os.environ: pass code_version=" in capsys.readouterr().err
    assert main(["run", write(), "--overwrite", "--code-version", "env-1"]) == 0
    assert main(["run", write(), "--update", "--code-version", "env-1"]) == 0
    assert "up to date" in capsys.readouterr().out
    assert main(["run", write('code_version = "env-1"'), "--update"]) == 0  # the file's key
    assert "up to date" in capsys.readouterr().out
    assert main(["run", write('code_version = "env-1"'), "--update",
                 "--code-version", "env-2"]) == 2  # the command line's wins
    assert "code_version 'env-1' is now 'env-2'" in capsys.readouterr().err
    shutil.rmtree(out)


def test_a_file_edited_after_its_import_is_not_taken_for_the_running_code(small_loose,
                                                                           user_code,
                                                                           tmp_path):
    """The source on disk describes the code only while it is the code that runs: a module
    edited but not reloaded (a notebook session) refuses the update instead of recording the
    new source for rows of the old code."""
    out = tmp_path / "out"
    user_code.write(f"def transform(rec):\n    {OUT}2.0}}\n")
    running = user_code.load().transform
    export(small_loose, out, running)
    user_code.write(f"def transform(rec):\n    {OUT}3.0}}\n")  # edited, not reloaded
    with pytest.raises(UpdateRefusedError) as refused:
        export(small_loose, out, running, update=True)
    assert (f"record transform: {user_code.name}.transform: "
            f"{user_code.folder / user_code.name}.py was edited after it was imported"
            ) in str(refused.value)
    user_code.write(f"def transform(rec):\n    {OUT}2.0}}\n")  # as it was: trusted again
    assert export(small_loose, out, running, update=True).up_to_date


REACHED = {  # code reached in ways the matrix above does not write: each edit must count
    "a module's attributes named by two functions": (
        "import {h}\n\ndef helper(rec):\n    return {h}.b(rec)\n\n"
        "def transform(rec):\n    return {h}.a(rec) + helper(rec)\n", "transform"),
    "a function wrapped by functools.lru_cache": (
        "import {h}\n\n@functools.lru_cache\ndef transform(rec):\n    return {h}.b(rec)\n",
        "transform"),
    "a function held by np.vectorize": (
        "import {h}\n\nV = np.vectorize({h}.b)\n\ndef transform(rec):\n    return V(rec)\n",
        "transform"),
    "a function under a decorator of one's own": (
        "import {h}\n\ndef deco(f):\n    @functools.wraps(f)\n    def wrapper(*a):\n"
        "        return f(*a)\n    return wrapper\n\n@deco\ndef transform(rec):\n"
        "    return {h}.b(rec)\n", "transform"),
}
REACHED_HELPER = ("def a(x):\n    return x\n\ndef b(x):\n    return x * {k}\n")


@pytest.mark.parametrize("case", list(REACHED))
def test_code_reached_through_modules_wrappers_and_installed_objects_counts(case, user_code):
    from guideloom.export.recipe import transform_recipe
    from guideloom.export.recipe.compare import differences, untrusted

    code, name = REACHED[case]
    user_code.write(code, REACHED_HELPER.format(k=2))
    before = transform_recipe(getattr(user_code.load(), name)).components
    assert untrusted("t", before) is None
    user_code.write(code, REACHED_HELPER.format(k=3))
    after = transform_recipe(getattr(user_code.load(), name)).components
    assert f"{user_code.helper}.b: source changed" in str(differences("t", before, after))


def test_a_job_keeps_the_recipe_of_its_start_when_the_file_is_edited_meanwhile(small_loose,
                                                                               user_code,
                                                                               tmp_path):
    """The executor replaces the spec on its way (the previous generation, the partition
    size); the recipe it records at the end is the one of the code as the job began."""
    from guideloom.export import build_spec

    user_code.write(f"def transform(rec):\n    {OUT}2.0}}\n")
    spec = build_spec(VIEW, "npy", tmp_path / "out", data_dir=small_loose,
                      record_transform=user_code.load().transform)
    at_start = spec.recipe()
    user_code.write(f"def transform(rec):\n    {OUT}3.0}}\n")  # edited while the job runs
    assert spec.replaced(partition_size=3).recipe() == at_start
    made_anew = spec.replaced(code_version=None, partition_size=3).recipe()  # (made again)
    assert any(k.startswith("stale ") for k in made_anew["components"]["record transform"])


@pytest.mark.parametrize(("before", "after", "named"), [
    ("W = {'a': 1.0, 'b': 2.0}", "W = {'b': 2.0, 'a': 1.0}", ".W changed"),
    ("W = {'a': np.sin, 'b': np.cos}", "W = {'b': np.cos, 'a': np.sin}", ".W (dict keys) changed"),
])
def test_a_dict_in_another_order_is_another_value(before, after, named, user_code):
    """A transform iterating a dict sees its order (dask's normalisation sorts dict items)."""
    from guideloom.export.recipe import transform_recipe
    from guideloom.export.recipe.compare import differences

    code = "{}\n\ndef transform(rec):\n    return [f for f in W.values()]\n"
    user_code.write(code.format(before))
    first = transform_recipe(user_code.load().transform).components
    user_code.write(code.format(after))
    second = transform_recipe(user_code.load().transform).components
    assert f"{user_code.name}{named}" in str(differences("t", first, second))


STALE_CODE = ("SCALE = 5.0\nOTHER = 7.0\n\n\ndef transform(x, k=1.0):\n"
              "    return {{'force': x {op} SCALE * k * 2.0}}\n")
EDITED_AFTER_IMPORT = {  # (before, after: the file as edited and not reloaded, found stale)
    "an operator": ({"op": "+"}, {"op": "-"}, True),
    "a number of the same width": (
        {"op": "+"}, {"op": "+", "tail": ("* 2.0}", "* 3.0}")}, True),
    "a name of the same length": ({"op": "+"}, {"op": "+", "tail": ("SCALE * k", "OTHER * k")},
                                  True),
    "formatting that keeps every position": (
        {"op": "+"}, {"op": "+", "tail": ("{'force'", '{"force"')}, False),
    "a comment": ({"op": "+"}, {"op": "+", "tail": ("2.0}\n", "2.0}  # scaled\n")}, False),
    # positions are the only evidence the compiler leaves of where code stood: an edit moving
    # code is not told from one changing it, so it counts as stale (fail closed)
    "formatting that moves code": ({"op": "+"}, {"op": "+", "tail": ("x + SCALE", "x+SCALE")},
                                   True),
}


def _stale_source(edit: dict[str, object]) -> str:
    text = STALE_CODE.format(op=edit["op"])
    if "tail" in edit:
        old, new = edit["tail"]  # type: ignore[misc]
        assert old in text
        text = text.replace(old, new)
    return text


@pytest.mark.parametrize("edit", list(EDITED_AFTER_IMPORT))
def test_an_edit_after_import_is_found_by_the_code_it_changes(edit, user_code):
    """Without compiling the file: the running code against the file's definition now."""
    from guideloom.export.recipe import transform_recipe

    before, after, stale = EDITED_AFTER_IMPORT[edit]
    source = user_code.folder / f"{user_code.name}.py"
    source.write_text(_stale_source(before))
    running = user_code.load().transform
    components = transform_recipe(running).components
    assert not any(k.startswith("stale ") for k in components)  # written before its import
    source.write_text(_stale_source(after))  # edited, not reloaded
    components = transform_recipe(running).components
    assert any(k.startswith("stale ") for k in components) is stale, components


def test_a_file_older_than_the_process_is_trusted_without_comparing(user_code, monkeypatch):
    import json
    import time

    from guideloom.export.recipe import code, running

    start = running.process_start_ns()
    assert start is not None
    assert start <= time.time_ns()
    assert running.older_than_process(json.__file__)  # installed before this process began
    source = user_code.folder / f"{user_code.name}.py"
    source.write_text(_stale_source({"op": "+"}))
    transform = user_code.load().transform
    assert not running.older_than_process(str(source))  # written by this test
    assert running.older_than_process(str(source), start_ns=time.time_ns() + 10**10)

    def compared(*args):
        raise AssertionError("a file older than the process is not compared")

    monkeypatch.setattr(code, "code_matches", compared)
    monkeypatch.setattr(code, "older_than_process", lambda filename: True)
    source.write_text(_stale_source({"op": "-"}))  # (the clock says: before the process)
    assert code.SourceIndex().runs_as_on_disk(transform)
    monkeypatch.setattr(code, "older_than_process", lambda filename: False)
    with pytest.raises(AssertionError, match="not compared"):
        code.SourceIndex().runs_as_on_disk(transform)
