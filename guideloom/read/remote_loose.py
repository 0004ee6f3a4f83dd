"""Loose ``.h5`` files of a remote release (``h5/<id>.h5`` served one by one, no zip).

:func:`loose_locations` finds them as :func:`guideloom.read.scan.scan_locations` finds local
ones (files named by ``member_pattern``, in ``h5/`` over the top folder), by what the remote
side can tell:

* a listed root (a DOI): its file list;
* an fsspec root that can list (``s3://``, ``memory://``, ...): one listing per folder, which
  also gives each file's size and ETag;
* a plain ``https://`` directory, which cannot be listed: one ``HEAD`` per wanted experiment,
  the name formed from its id (``DatasetSpec.id_format``, then ``{:04d}`` and ``{}``); the
  first found name's folder and format are asked first for the others, concurrently. When
  none of the first :data:`PROBE_FIRST` experiments has a file, the release is taken to have
  no loose files (their ids are then reported missing, as locally).

Each file becomes a :class:`~guideloom.read.locations.RemoteLocation` whose ``member`` is
``None``: its bytes are read by ranges through the same native reader and cache as members.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from guideloom.errors import GuideloomError, ManifestError
from guideloom.read.files import LOOSE_SUBDIR, RemoteFiles, ScannedDataset
from guideloom.read.fsspec_source import fsspec_filesystem
from guideloom.read.locations import RemoteLocation
from guideloom.read.remote_scan import info_validator, loose_location, stat_file
from guideloom.read.scan import id_parser

logger = logging.getLogger(__name__)

PROBE_FIRST = 8  # experiments asked for one by one before the release is taken to be zipped
PROBE_THREADS = 16  # HEAD requests in flight while looking for loose files
FALLBACK_FORMATS = ("{:04d}", "{}")  # rddac's file names, then the bare id


def loose_locations(ds: ScannedDataset, root: RemoteFiles, ids: Iterable[Any]
                    ) -> dict[Any, RemoteLocation]:
    """The loose files of the remote release ``root`` by experiment id.

    Raises:
        GuideloomError: A folder cannot be listed (naming its URL).
        ManifestError: Two loose files in one folder hold one experiment.
    """
    pattern = re.compile(ds.spec.member_pattern)
    to_id = id_parser(ds)
    if root.listed:
        listing = [(f.relpath, f.url, f.size, f.checksum) for f in root.files]
        return _from_listing(listing, pattern, to_id, root)
    if not root.url.lower().startswith(("http://", "https://")):
        return _from_listing(_fsspec_listing(root), pattern, to_id, root)
    return _probe(ds, root, list(ids), pattern, to_id)


def _from_listing(files: Iterable[tuple[str, str, int | None, str]], pattern: re.Pattern[str],
                  to_id: Callable[[str], Any], root: RemoteFiles) -> dict[Any, RemoteLocation]:
    """Locations of the ``(relpath, url, size, validator)`` files named like experiments at
    the top or in ``h5/`` (``h5/`` wins, as locally)."""
    found: dict[Any, RemoteLocation] = {}
    by_folder: dict[str, dict[Any, str]] = {"": {}, LOOSE_SUBDIR: {}}
    for relpath, url, size, validator in sorted(files, key=lambda f: (f[0].count("/"), f[0])):
        folder, _, name = relpath.rpartition("/")
        m = pattern.match(name) if folder in by_folder else None
        if m is None:
            continue
        sim_id = to_id(m.group("id"))
        here = by_folder[folder]
        if sim_id in here:
            raise ManifestError(f"two loose files hold experiment {sim_id!r}: {here[sim_id]} "
                                f"and {url}; keep one of them")
        here[sim_id] = url
        if size is None:
            size, validator = stat_file(url, root)
        found[sim_id] = loose_location(sim_id, url, int(size), validator, root)
    return found


def _fsspec_listing(root: RemoteFiles) -> list[tuple[str, str, int | None, str]]:
    """``(relpath, url, size, validator)`` of the files at the top and in ``h5/``."""
    out: list[tuple[str, str, int | None, str]] = []
    for folder in ("", LOOSE_SUBDIR):
        url = f"{root.url}/{folder}" if folder else root.url
        try:
            fs, path = fsspec_filesystem(url, dict(root.options))
            fs.invalidate_cache(path)  # listed afresh on every scan: a replaced file is noticed
            entries = fs.ls(path, detail=True)
        except FileNotFoundError:
            continue
        except Exception as exc:
            raise GuideloomError(f"cannot list {url} for loose HDF5 files: "
                                 f"{type(exc).__name__}: {exc}") from exc
        for info in entries:
            if info.get("type") != "file":
                continue
            name = str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
            rel = f"{folder}/{name}" if folder else name
            out.append((rel, f"{root.url}/{rel}", int(info["size"]), info_validator(info)))
    return out


def _names(ds: ScannedDataset, sim_id: Any, pattern: re.Pattern[str],
           to_id: Callable[[str], Any]
           ) -> list[str]:
    """The loose file names that may hold ``sim_id`` (id formats that name it)."""
    names: list[str] = []
    for fmt in dict.fromkeys((ds.spec.id_format, *FALLBACK_FORMATS)):
        try:
            name = f"{fmt.format(sim_id)}.h5"
        except (ValueError, TypeError, IndexError, KeyError):
            continue
        m = pattern.match(name)
        if m is not None and to_id(m.group("id")) == sim_id and name not in names:
            names.append(name)
    return names


def _probe(ds: ScannedDataset, root: RemoteFiles, ids: list[Any], pattern: re.Pattern[str],
           to_id: Callable[[str], Any]) -> dict[Any, RemoteLocation]:
    """Loose files of a directory that cannot be listed, asked for by name (``HEAD``)."""
    candidates = {i: _names(ds, i, pattern, to_id) for i in ids}
    order = [(folder, k) for folder in (LOOSE_SUBDIR, "")
             for k in range(len(FALLBACK_FORMATS) + 1)]

    def look(sim_id: Any, first: tuple[str, int] | None = None
             ) -> tuple[RemoteLocation | None, tuple[str, int] | None]:
        """The file of ``sim_id`` (its folder and name format asked ``first``) and where it
        was found."""
        names = candidates[sim_id]
        for folder, k in ([first] if first else []) + [c for c in order if c != first]:
            if k >= len(names):
                continue
            entry = root.entry(f"{folder}/{names[k]}" if folder else names[k])
            assert entry is not None  # an unlisted root has every name
            try:
                size, validator = stat_file(entry.url, root)
            except FileNotFoundError:
                continue
            return loose_location(sim_id, entry.url, size, validator, root), (folder, k)
        return None, None

    found: dict[Any, RemoteLocation] = {}
    hit = None
    rest = list(ids)
    while rest and hit is None and len(found) == 0 and len(ids) - len(rest) < PROBE_FIRST:
        sim_id = rest.pop(0)  # one by one until a file is found
        loc, hit = look(sim_id)
        if loc is not None:
            found[sim_id] = loc
    if not found:
        return found  # none of the first experiments has a loose file: not a loose release
    with ThreadPoolExecutor(max_workers=min(PROBE_THREADS, max(1, len(rest)))) as pool:
        for sim_id, (loc, _) in zip(rest, pool.map(lambda i: look(i, hit), rest), strict=True):
            if loc is not None:
                found[sim_id] = loc
    return found
