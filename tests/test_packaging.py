"""guideloom as installed from its wheel, not as checked out.

* The wheel is built from a copy of the source tree and installed into a fresh virtual
  environment (no system site-packages; the dependencies come from the package index this
  machine's pip is configured with). From an empty directory, the commands a new user types work.
* The wheel holds every module of the source tree, the workflow schema and the shipped workflows,
  the ``py.typed`` marker and the LICENSE, and ``pyproject.toml`` lists every package; a type
  checker reads the installed package's hints.
* The core tests run against the installed wheel on a second Python version (pyenv's 3.13 or
  3.12; skipped with a reason where neither is present).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

import guideloom as guideloom_package
from guideloom._version import __version__

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
WORKFLOW_NAMES = sorted(p.stem for p in (ROOT / "workflows").glob("*.toml"))
SECOND_PYTHONS = [Path("/root/.pyenv/versions/3.13.0/bin/python3"),
                  Path("/root/.pyenv/versions/3.12.1/bin/python3")]
# The core tests for the second Python: what runs without torch. (test_loader_*, test_pytorch_*
# need torch; the CLI, cluster-script, SLURM and storage tests are covered on python3 here.)
CORE_TESTS = ["test_manifest.py", "test_params.py", "test_iter_view.py", "test_export.py",
              "test_export_outputs.py", "test_workflow.py", "test_shuffle.py", "test_as_user.py"]
# Tests of those files that use torch, which has no CPU wheel for the second Python on this
# machine (only cp311 is on disk, and PyPI's default torch is a CUDA build): deselected there.
NEEDS_TORCH = ["test_export.py::test_seed_sections_3_to_6",
               "test_export_outputs.py::test_torch_dataloader_with_worker_processes",
               "test_as_user.py::test_readme_python_examples_as_one_plain_script"]
# .venv/venv: a virtual environment made in the clone (python3 -m venv .venv) is not source
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", "venv", "__pycache__", "*.egg-info",
                                     "build", "dist",
                                     ".pytest_cache", ".ruff_cache", ".hypothesis", ".mypy_cache")


def run(cmd: list[str | Path], *, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``cmd``; fail the test with its output unless it exits 0."""
    out = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0, (f"{cmd} exited {out.returncode}\n{out.stdout[-3000:]}\n"
                                 f"{out.stderr[-3000:]}")
    return out


def make_venv(folder: Path, python: str | Path = sys.executable) -> Path:
    """A fresh virtual environment (with pip, without system site-packages); its python."""
    run([python, "-m", "venv", "--clear", folder])
    return folder / "bin" / "python"


def user_env(venv_python: Path) -> dict[str, str]:
    """A user's shell with this virtual environment activated: no PYTHONPATH into the checkout."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["VIRTUAL_ENV"] = str(venv_python.parents[1])
    env["PATH"] = f"{venv_python.parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the source tree (the checkout itself is left untouched)."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "src"
    shutil.copytree(ROOT, source, ignore=COPY_IGNORE)
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", base / "dist", source])
    built = sorted((base / "dist").glob("guideloom-*.whl"))
    assert len(built) == 1, built
    return built[0]


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the wheel (and its dependencies) installed; returns its python."""
    python = make_venv(tmp_path_factory.mktemp("venv") / "venv")
    run([python, "-m", "pip", "install", "-q", wheel], env=user_env(python))
    return python


def guideloom(python: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``guideloom ARGS`` as typed in a shell where the venv is active."""
    out = run(["guideloom", *args], cwd=cwd, env=user_env(python), timeout=300)
    assert "Traceback" not in out.stderr, out.stderr
    return out


# --- a. installed, from an empty directory ------------------------------------------------
@pytest.mark.slow
def test_installed_commands_from_an_empty_directory(installed, tmp_path):
    where = run([installed, "-c", "import guideloom; print(guideloom.__file__)"],
                cwd=tmp_path, env=user_env(installed)).stdout.strip()
    assert Path(where).is_relative_to(installed.parents[1]), where  # the wheel, not the checkout
    assert not list(tmp_path.iterdir())
    command = shutil.which("guideloom", path=user_env(installed)["PATH"])
    assert command == str(installed.parent / "guideloom")  # the venv's console script

    version = guideloom(installed, tmp_path, "--version").stdout.strip()
    assert version == f"guideloom {__version__}"

    listed = guideloom(installed, tmp_path, "workflows").stdout.splitlines()
    assert len(WORKFLOW_NAMES) == 5
    assert sorted(line.split()[0] for line in listed if line and not line[0].isspace()
                  and not line.startswith("run one with")) == WORKFLOW_NAMES

    demo = guideloom(installed, tmp_path, "demo")
    assert re.search(r"^wrote \d+ records of view 'force-signals'", demo.stdout, re.M), demo.stdout
    assert "check    : sum of max_total_force" in demo.stdout

    guideloom(installed, tmp_path, "make-demo-data", "demo-data", "--n", "12")
    ran = guideloom(installed, tmp_path, "run", "force_signals")
    assert "wrote 12 records of view 'force-signals'" in ran.stdout, ran.stdout
    shown = guideloom(installed, tmp_path, "inspect", "exports/force-signals").stdout
    assert re.search(r"^records: 12$", shown, re.M), shown


@pytest.mark.cluster
@pytest.mark.slow
def test_installed_plain_script_on_a_local_cluster(installed, tmp_path):
    make = run([installed, "-m", "guideloom", "make-demo-data", "data", "--n", "6"],
               cwd=tmp_path, env=user_env(installed))
    assert "wrote 6 experiments" in make.stdout
    (tmp_path / "export.py").write_text(textwrap.dedent("""
        import logging
        import numpy as np
        import guideloom
        from guideloom.streaming import export_to_numpy, load_export

        logging.getLogger("guideloom").addHandler(logging.StreamHandler())  # its messages
        logging.getLogger("guideloom").setLevel(logging.INFO)
        print("top level ran")
        ds = guideloom.load(data_dir="./data")
        guideloom.add_view(ds, "peaks", fields={"force": "force_data"})


        def peak(rec):
            return {"peak": np.float32(np.asarray(rec["force"])[:, 7].max()),
                    "sim": np.int64(rec["_sim_id"])}


        export_to_numpy("peaks", "./exports/peaks", dataset=ds, record_transform=peak,
                        client="local:2")
        export = load_export("./exports/peaks")
        print("rows", len(export), sorted(export.fields))
        print("sims", [int(s) for s in export.sim_ids], [int(r["sim"]) for r in export])
        print("module", guideloom.__file__)
        """))
    out = run([installed, "export.py"], cwd=tmp_path, env=user_env(installed), timeout=300)
    assert out.stdout.count("top level ran") == 1, out.stdout
    assert "Traceback" not in out.stderr, out.stderr
    assert "guideloom: running local-cluster" in out.stderr
    assert "rows 6 ['peak', 'sim']" in out.stdout
    sims = re.search(r"^sims (\[.*\]) (\[.*\])$", out.stdout, re.M)
    assert sims
    assert sims.group(1) == sims.group(2)
    module = Path(out.stdout.split("module ", 1)[1].split()[0])
    assert module.is_relative_to(installed.parents[1])


# --- b. the wheel's contents --------------------------------------------------------------
def test_the_version_has_one_home():
    """``guideloom/_version.py`` holds the version; the package and the wheel's metadata take
    it from there (pyproject.toml declares it dynamic, read from that attribute)."""
    assert "version" not in PYPROJECT["project"]
    assert "version" in PYPROJECT["project"]["dynamic"]
    attr = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "guideloom._version.__version__"
    assert guideloom_package.__version__ == __version__
    assert __version__.count(".") == 2


def test_pyproject_lists_every_package():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "guideloom").rglob("__init__.py") if "__pycache__" not in p.parts}
    assert found <= listed, f"not in [tool.setuptools] packages: {sorted(found - listed)}"
    mapped = PYPROJECT["tool"]["setuptools"].get("package-dir", {})
    for package in listed - found:  # packages living elsewhere in the tree (workflows/)
        assert (ROOT / mapped[package] / "__init__.py").is_file(), package


def test_wheel_holds_every_module_schema_and_workflow(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    expected = {p.relative_to(ROOT).as_posix() for p in (ROOT / "guideloom").rglob("*.py")
                if "__pycache__" not in p.parts}
    expected |= {f"guideloom/workflows/{p.name}" for p in (ROOT / "workflows").glob("*.py")}
    expected |= {f"guideloom/workflows/{p.name}" for p in (ROOT / "workflows").glob("*.toml")}
    expected |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "guideloom").rglob("*.json")}
    assert "guideloom/workflow/schema.json" in expected
    assert len([n for n in expected if n.endswith(".toml")]) == len(WORKFLOW_NAMES) == 5
    assert not expected - names, f"missing from {wheel.name}: {sorted(expected - names)}"
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheel) as zf:
        assert "guideloom = guideloom.cli:main" in zf.read(entry).decode()


def test_wheel_holds_the_type_marker_and_the_license(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(f"{info}/METADATA").decode()
        license_text = zf.read(f"{info}/licenses/LICENSE").decode()
    assert "guideloom/py.typed" in names  # PEP 561
    assert license_text == (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in license_text
    assert re.search(r"^License-Expression: Apache-2.0$", metadata, re.M), metadata[:2000]
    assert re.search(r"^License-File: LICENSE$", metadata, re.M), metadata[:2000]


TYPED_USER_CODE = """
    from guideloom import DocumentStorage
    from guideloom.storage.types import DocumentStorageFormat


    class MyDoc:
        pass


    class MyDocs(DocumentStorageFormat[MyDoc]):
        def pack(self, data: MyDoc) -> bytes:
            return b""

        def unpack(self, encoded: bytes, shard: int) -> MyDoc:
            return MyDoc()


    reveal_type(DocumentStorage("d", MyDocs()).sync_reader().read(0))
"""


@pytest.mark.slow  # the installed wheel costs ~25 s to set up
def test_a_type_checker_reads_the_hints_of_the_installed_wheel(installed, tmp_path):
    pytest.importorskip("mypy", reason="mypy (test extra) is not installed")
    (tmp_path / "user.py").write_text(textwrap.dedent(TYPED_USER_CODE))
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "MYPYPATH"}}
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "user.py", "--python-executable", str(installed),
         "--no-incremental", "--cache-dir", str(tmp_path / "cache"), "--follow-imports=silent",
         "--no-error-summary"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert "missing library stubs or py.typed marker" not in out.stdout, out.stdout
    revealed = [line for line in out.stdout.splitlines() if "Revealed type" in line]
    assert len(revealed) == 1, out.stdout + out.stderr
    assert '"user.MyDoc"' in revealed[0], out.stdout + out.stderr


# --- c. the core tests on a second Python -------------------------------------------------
def second_python() -> Path | None:
    return next((p for p in SECOND_PYTHONS if p.is_file()), None)


NO_SECOND_PYTHON = f"no second Python: none of {[str(p) for p in SECOND_PYTHONS]} exists"


@pytest.fixture(scope="module")
def second_venv(wheel, tmp_path_factory) -> Path:
    """A venv of the second Python with the wheel, the test tools and this environment's numpy
    version (job identities count installed packages by version); returns its python."""
    import numpy

    python = make_venv(tmp_path_factory.mktemp("venv2") / "venv", second_python())
    run([python, "-m", "pip", "install", "-q", wheel, f"numpy=={numpy.__version__}",
         "pytest>=8", "pytest-timeout>=2.3", "hypothesis>=6.100", "ipython>=8"],
        env=user_env(python))
    return python


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(second_python() is None, reason=NO_SECOND_PYTHON)
def test_core_tests_on_a_second_python_against_the_wheel(second_venv, tmp_path):
    python = second_venv
    env = user_env(python)
    work = tmp_path / "run"
    shutil.copytree(ROOT / "tests", work / "tests", ignore=COPY_IGNORE)
    shutil.copy(ROOT / "pyproject.toml", work / "pyproject.toml")  # the pytest settings
    reference = ROOT.parent / "shared" / "reference"  # where tests/conftest.py looks for it
    if reference.is_dir():
        shutil.copytree(reference, tmp_path / "shared" / "reference")
    (work / "tests" / "test_zz_which_guideloom.py").write_text(textwrap.dedent("""
        import sys

        import guideloom


        def test_which_guideloom():
            print(f"\\nguideloom from {guideloom.__file__} on Python {sys.version.split()[0]}")
        """))
    out = subprocess.run(
        [python, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
         *[f"tests/{name}" for name in CORE_TESTS], "tests/test_zz_which_guideloom.py",
         *[f"--deselect=tests/{test}" for test in NEEDS_TORCH]],
        cwd=work, env=env, capture_output=True, text=True, timeout=900)
    failures = [line for line in out.stdout.splitlines()
                if line.startswith(("FAILED", "ERROR", "SKIPPED"))]
    tail = "\n".join(failures) + "\n" + out.stdout[-3000:] + out.stderr[-1000:]
    assert out.returncode == 0, tail
    which = re.search(r"^guideloom from (\S+) on Python (\S+)$", out.stdout, re.M)
    assert which, tail
    assert Path(which.group(1)).is_relative_to(python.parents[1]), which.group(0)
    wanted = str(second_python().parents[1].name)  # e.g. "3.13.0"
    assert which.group(2) == wanted
    summary = out.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary), summary
    assert "failed" not in summary, summary
    # IPython is installed there; the published manifest is copied when it is beside the repo
    allowed = 0 if (ROOT.parent / "shared" / "reference").is_dir() else 1
    skipped = re.search(r"(\d+) skipped", summary)
    assert (int(skipped.group(1)) if skipped else 0) == allowed, tail
    assert f"{len(NEEDS_TORCH)} deselected" in summary, summary


# --- d. one job identity on both Pythons ---------------------------------------------------
USER_MODULE = '''
import numpy as np

SCALE = 0.5
LABELS = {"concave": 0, "convex": 1}


def _peak(force):
    return np.float32(np.asarray(force)[:, 7].max() * SCALE)


def transform(rec):
    rows = [r for r in np.asarray(rec["force"])[:3]]  # a comprehension: nested code
    return {"peak": _peak(rec["force"]), "head": np.stack(rows).astype(np.float32),
            "label": np.int8(LABELS[rec["geometry"]])}
'''

EXPORT_SCRIPT = '''
import json
import sys

import numpy

import guideloom
import usercode
from guideloom.streaming import export_to_numpy

ds = guideloom.load(data_dir="demo-data")
guideloom.add_view(ds, "peaks", fields={"force": "force_data",
                                        "geometry": "process-parameters/geometry"})
export_to_numpy("peaks", sys.argv[1], dataset=ds, record_transform=usercode.transform,
                client="sync", partition_size=3)
with open(f"{sys.argv[1]}/export.json") as fh:
    identity = json.load(fh)["identity"]
print(json.dumps({"identity": identity, "python": sys.version.split()[0],
                  "numpy": numpy.__version__, "guideloom": guideloom.__version__}))
'''


def _job_ids(python: Path, env: dict[str, str], folder: Path, name: str) -> tuple[str, dict]:
    """The dry-run job id of the shipped force_signals workflow and the API export's result."""
    env = {**env, "PYTHONHASHSEED": "random"}
    dry = run([python, "-m", "guideloom", "run", "force_signals", "--dry-run"], cwd=folder,
              env=env)
    job = re.search(r"^partitions: .*\(job (\w+),", dry.stdout, re.M)
    assert job, dry.stdout
    out = run([python, "export.py", f"exports/{name}"], cwd=folder, env=env)
    return job.group(1), json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # the second Python's venv costs ~20 s to set up
@pytest.mark.skipif(second_python() is None, reason=NO_SECOND_PYTHON)
def test_job_identities_are_the_same_on_python_3_11_and_the_second_python(second_venv,
                                                                          tmp_path):
    from guideloom.demo import make_demo_data

    make_demo_data(tmp_path / "demo-data", n=8)
    (tmp_path / "usercode.py").write_text(USER_MODULE)
    (tmp_path / "export.py").write_text(EXPORT_SCRIPT)
    here_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    here = _job_ids(Path(sys.executable), here_env, tmp_path, "here")
    there = _job_ids(second_venv, user_env(second_venv), tmp_path, "there")
    # the identity counts installed packages by version: the transforms touch numpy only
    assert here[1]["numpy"] == there[1]["numpy"]
    assert here[1]["guideloom"] == there[1]["guideloom"]
    assert here[1]["python"].split(".")[:2] != there[1]["python"].split(".")[:2], (here, there)
    assert here[0] == there[0], (here, there)  # the shipped workflow
    assert here[1]["identity"] == there[1]["identity"], (here, there)  # helper and constant
