"""Every guideloom module path, name and file the Markdown pages name exists: a page never sends
a reader to a deleted or moved path (``guideloom.x.y``, ``guideloom.x.name``,
``guideloom/x/y.py``, ``guideloom/x/``)."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "cluster" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DOTTED = re.compile(r"\bguideloom(?:\.\w+)+")
FILE = re.compile(r"`(guideloom/(?:\w+/)*(?:\w+\.\w+|\w+/?))`")
#: Dotted names on the pages that are not module paths: what they are.
NOT_MODULES = {
    "guideloom.export_formats": "the entry-point group of format plugins (docs/formats.md)",
}
#: The installed package ``guideloom.workflows`` lives in the checkout's ``workflows/``.
PACKAGE_DIRS = {"guideloom.workflows": ROOT / "workflows"}


def module_file(module: str) -> Path | None:
    """The file of a guideloom module path in the checkout (None: no such module)."""
    for package, folder in PACKAGE_DIRS.items():
        if module == package or module.startswith(f"{package}."):
            rest = module[len(package):].lstrip(".").split(".") if module != package else []
            base = folder.joinpath(*rest)
            break
    else:
        base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def missing_dotted(path: str) -> str | None:
    """Why ``path`` (``guideloom.a.b[.name]``) does not exist, or None when it does: its longest
    module prefix is a file of the checkout, and the next part a name of that module."""
    if path in NOT_MODULES:
        return None
    parts = path.split(".")
    for n in range(len(parts), 0, -1):
        module = ".".join(parts[:n])
        if module_file(module) is None:
            continue
        if n == len(parts):
            return None
        if module.startswith(("guideloom.pytorch", "guideloom.loader.torch_adapter")) and \
                importlib.util.find_spec("torch") is None:
            return None  # checked where torch is installed
        if hasattr(importlib.import_module(module), parts[n]):
            return None
        return f"{module} has no {parts[n]!r}"
    return "no such module"


def page_paths(text: str) -> set[str]:
    """The dotted guideloom paths and the guideloom file paths a page names."""
    dotted = {m.rstrip(".") for m in DOTTED.findall(text)}
    return dotted | set(FILE.findall(text))


def missing(path: str) -> str | None:
    if "/" not in path:
        return missing_dotted(path)
    return None if (ROOT / path).exists() else "no such file or folder"


def test_the_checker_sees_a_deleted_module_a_missing_name_and_a_missing_file():
    text = ("`guideloom.read.zipmember.open_span` `guideloom.remote.http` "
            "`guideloom.config.no_such_knob` `guideloom/read/legacy.py` `guideloom/read/` "
            "`guideloom.export_formats` and guideloom.workflows.demo_transforms.")
    found = {p: missing(p) for p in page_paths(text)}
    assert found == {
        "guideloom.read.zipmember.open_span": None,
        "guideloom.remote.http": "guideloom has no 'remote'",
        "guideloom.config.no_such_knob": "guideloom.config has no 'no_such_knob'",
        "guideloom/read/legacy.py": "no such file or folder",
        "guideloom/read/": None,
        "guideloom.export_formats": None,
        "guideloom.workflows.demo_transforms": None,
    }


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_guideloom_path_a_page_names_exists(page):
    text = page.read_text(encoding="utf-8")
    wrong = {p: why for p in sorted(page_paths(text)) if (why := missing(p)) is not None}
    assert wrong == {}, f"{page.name} names paths that do not exist"
