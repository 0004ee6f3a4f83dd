"""The generic storage types import on Python 3.11, 3.12 and 3.13 with only declared packages.

``guideloom/storage/types.py`` gives its type variables PEP 696 defaults (typing has them from
3.13, typing_extensions before). Each Python gets a fresh virtual environment (no system
site-packages) holding only the packages ``pyproject.toml`` declares for what the module
imports, installed by pip with their environment markers; the source tree is on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DECLARED = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
# the third-party packages ``import guideloom.storage`` loads (checked below: nothing else)
NEEDED = ("numpy", "typing_extensions")
RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"
PYTHONS = {  # the running Python for its own version, pyenv's for the others
    version: Path(sys.executable) if version == RUNNING else Path(path)
    for version, path in {"3.11": "/root/.pyenv/versions/3.11.7/bin/python3",
                          "3.12": "/root/.pyenv/versions/3.12.1/bin/python3",
                          "3.13": "/root/.pyenv/versions/3.13.0/bin/python3"}.items()
}

CHECK = textwrap.dedent("""
    import json
    import sys
    from importlib import metadata

    before = set(sys.modules)
    from guideloom.storage import DocumentStorage, StreamStorage, StreamWithMetaStorage
    from guideloom.storage.types import DocumentStorageFormat, StreamStorageFormat


    class MyDoc:
        pass


    class MyDocs(DocumentStorageFormat[MyDoc]):  # one argument: in = out = MyDoc
        def pack(self, data):
            return b""

        def unpack(self, encoded, shard):
            return MyDoc()


    class Structural:  # no base class: a Protocol match
        def pack(self, data):
            return b""

        def unpack(self, encoded, shard):
            return None


    loaded = {m.split(".")[0] for m in set(sys.modules) - before}
    print(json.dumps({
        "python": "%d.%d" % sys.version_info[:2],
        "one_argument": [repr(c[int].__args__) for c in
                         (DocumentStorageFormat, DocumentStorage, StreamStorage,
                          StreamWithMetaStorage)],
        "two_arguments": repr(StreamStorageFormat[int, str].__args__),
        "protocol_match": isinstance(MyDocs(), DocumentStorageFormat)
                          and isinstance(Structural(), DocumentStorageFormat),
        "third_party": sorted(loaded - set(sys.stdlib_module_names) - {"guideloom"}),
        "installed": sorted(d.metadata["Name"].lower().replace("-", "_")
                            for d in metadata.distributions()),
    }))
    """)


def declared(name: str) -> str:
    """The requirement ``pyproject.toml`` declares for the distribution ``name``."""
    found = [r for r in DECLARED
             if re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower().replace("-", "_") == name]
    assert len(found) == 1, f"{name} is imported by guideloom.storage but not declared"
    return found[0]


@pytest.mark.fast_case("3.13")
@pytest.mark.timeout(600)
@pytest.mark.parametrize("version", sorted(PYTHONS))
def test_storage_types_import_with_only_the_declared_packages(version, tmp_path):
    python = PYTHONS[version]
    if not python.is_file():
        pytest.skip(f"no Python {version} at {python}")
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONNOUSERSITE"}}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", venv], check=True, timeout=300)
    # the venv's own pip: environment markers are evaluated for that Python
    install = subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "install", "-q", "--only-binary=:all:",
         *[declared(name) for name in NEEDED]],
        env=env, capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stdout + install.stderr
    done = subprocess.run([venv / "bin" / "python", "-s", "-c", CHECK], cwd=tmp_path,
                          env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["python"] == version
    needs_backport = version in ("3.11", "3.12")
    assert ("typing_extensions" in report["installed"]) is needs_backport, report
    assert report["third_party"] == (list(NEEDED) if needs_backport else ["numpy"]), report
    # the same generic types on every version
    # streams take GuideLoom 1.1's third parameter (the element type), defaulting to Any
    assert report["one_argument"] == ["(<class 'int'>, ~InDataT)"] * 2 + [
        "(<class 'int'>, ~InDataT, typing.Any)"] * 2, report
    assert report["two_arguments"] == "(<class 'int'>, <class 'str'>, typing.Any)"
    assert report["protocol_match"] is True
