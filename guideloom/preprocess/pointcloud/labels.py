"""Where the fin labels come from: rddac publishes them (CC BY 4.0, annotations of the RDDAC
dataset, doi:10.18419/DARUS-5589) inside its 2.0.0 distribution. They are read from a folder
given with ``--labels``, else from an installed ``rddac`` distribution, else from the rddac
2.0.0 wheel fetched once from PyPI into guideloom's cache and checked against a pinned sha256.
They are never copied into guideloom.

One label file per labelled (experiment, operation): ``<id>_<op>.npz`` holding
``outlier_mask``, a boolean grid of the raw scan (True: an artefact to remove).
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

TASK_NAME = re.compile(r"^(\d{4})_(op10|op20)\.npz$")
#: Where the labels sit inside the rddac 2.0.0 distribution.
PACKAGE_FOLDER = "rddac/_preprocess/labels/"
WHEEL_NAME = "rddac-2.0.0-py3-none-any.whl"
WHEEL_URL = f"https://files.pythonhosted.org/packages/py3/r/rddac/{WHEEL_NAME}"
WHEEL_SHA256 = "aaa2fd895be212e5531f736e903e894e2ae58bf6ea770feb25075bec82a8f13b"
WHEEL_SIZE = 558810


@dataclass(frozen=True)
class Task:
    """One labelled scan: ``name`` (``0344_op10``), experiment id and operation."""

    name: str
    experiment: int
    op: str


@dataclass(frozen=True)
class Labels:
    """A set of label files: ``kind`` is ``folder``, ``installed`` or ``wheel``; ``path`` the
    folder, the installed distribution's root, or the wheel file."""

    kind: str
    path: str

    def _names(self) -> list[str]:
        if self.kind == "wheel":
            with zipfile.ZipFile(self.path) as zf:
                inside = [n[len(PACKAGE_FOLDER):] for n in zf.namelist()
                          if n.startswith(PACKAGE_FOLDER)]
            return [n for n in inside if TASK_NAME.match(n)]
        folder = Path(self.path) / (PACKAGE_FOLDER if self.kind == "installed" else "")
        return [p.name for p in folder.iterdir() if TASK_NAME.match(p.name)]

    def read(self, filename: str) -> bytes:
        """The bytes of one label file (``0344_op10.npz``)."""
        if self.kind == "wheel":
            with zipfile.ZipFile(self.path) as zf:
                return zf.read(PACKAGE_FOLDER + filename)
        folder = Path(self.path) / (PACKAGE_FOLDER if self.kind == "installed" else "")
        return (folder / filename).read_bytes()

    def tasks(self) -> list[Task]:
        """The labelled scans, sorted by name."""
        found = []
        for filename in self._names():
            match = TASK_NAME.match(filename)
            assert match is not None
            found.append(Task(filename[:-4], int(match.group(1)), match.group(2)))
        return sorted(found, key=lambda t: t.name)

    def mask(self, name: str) -> np.ndarray:
        """The outlier mask of one task (bool grid of the raw scan)."""
        with np.load(io.BytesIO(self.read(f"{name}.npz"))) as data:
            return np.asarray(data["outlier_mask"]).astype(bool)

    def sha256(self) -> str:
        """Digest over the label files' names and bytes in name order (the model's identity)."""
        digest = hashlib.sha256()
        for filename in sorted(self._names()):
            digest.update(filename.encode())
            digest.update(self.read(filename))
        return digest.hexdigest()

    def __str__(self) -> str:
        return f"{self.kind} labels at {self.path}"


def installed() -> Labels | None:
    """The labels of an installed ``rddac`` 2.x distribution, or None."""
    try:
        dist = metadata.distribution("rddac")
    except metadata.PackageNotFoundError:
        return None
    if not dist.version.startswith("2."):
        logger.info("installed rddac %s has no labels of 2.x; not used", dist.version)
        return None
    root = Path(str(dist.locate_file("")))
    if not (root / PACKAGE_FOLDER).is_dir():
        return None
    return Labels("installed", str(root))


def cached_wheel(cache: Path, *, url: str = WHEEL_URL, sha256: str = WHEEL_SHA256,
                 size: int | None = WHEEL_SIZE) -> Labels:
    """The labels of the rddac wheel in ``cache``, fetched first if missing (checked against
    ``sha256``; a file that does not match is fetched again).

    Raises:
        guideloom.errors.DownloadError: The wheel cannot be fetched or fails its checksum.
    """
    from guideloom.net.fetch import Checksum, Expected, Settings, fetch_file

    target = cache / Path(url).name
    if target.is_file() and _sha256(target) == sha256:
        return Labels("wheel", str(target))
    if target.is_file():
        logger.warning("%s does not match its pinned sha256: fetched again", target)
        target.unlink()
    expected = Expected(size=size, checksums=(Checksum("sha256", sha256, "guideloom's pin"),))
    logger.info("fetching the rddac labels from %s into %s", url, target)
    fetch_file(url, target, expected, settings=Settings(), label=Path(url).name)
    return Labels("wheel", str(target))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def default_cache() -> Path:
    """``rddac-labels/`` in guideloom's cache folder (``GUIDELOOM_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/guideloom``, else ``~/.cache/guideloom``)."""
    import os

    from guideloom import config

    explicit = config.get("cache_dir")
    if explicit:
        return Path(explicit) / "rddac-labels"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "guideloom" / "rddac-labels"


def find(folder: str | None = None, *, cache: Path | None = None) -> Labels:
    """The labels to train from: ``folder`` if given, else an installed rddac, else the wheel.

    Raises:
        FileNotFoundError: ``folder`` holds no ``<id>_<op>.npz`` file.
    """
    if folder is not None:
        labels = Labels("folder", str(Path(folder).resolve()))
        if not Path(folder).is_dir() or not labels.tasks():
            raise FileNotFoundError(f"--labels {folder}: no <id>_<op>.npz label files there")
        return labels
    found = installed()
    if found is not None:
        return found
    if cache is None:
        cache = default_cache()
    cache.mkdir(parents=True, exist_ok=True)
    return cached_wheel(cache)
