"""The previous generation of an export, as a partition sink carries rows from it.

An update (:mod:`guideloom.export.update`) hands each sink the rows whose output the previous
generation already holds; the sink copies, links or reuses them
(:meth:`~guideloom.formats.base.PartitionSink.carry`) and takes their checksums from the
previous generation's ``checksums.json`` instead of hashing them again. One
:class:`PreviousRows` per process and generation (:func:`previous_rows`): its
``checksums.json`` is read once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from functools import cached_property
from typing import Any

import numpy as np

from guideloom.errors import GuideloomError
from guideloom.formats.checksums import DIGEST_CHARS, read_sidecar
from guideloom.formats.layout import read_export_manifest
from guideloom.formats.own_files import check_tree

logger = logging.getLogger(__name__)

_cache: dict[str, PreviousRows] = {}
_lock = threading.Lock()


class PreviousRows:
    """Rows of a published export, for a sink to carry.

    Attributes:
        root: The export's directory (or store URL).
        manifest: Its ``export.json``.
    """

    def __init__(self, root: str, manifest: Mapping[str, Any]):
        self.root, self.manifest = root, manifest

    @cached_property
    def _groups(self) -> Mapping[str, Any]:
        if not self.manifest.get("checksums"):
            return {}
        groups: Mapping[str, Any] = read_sidecar(self.root, self.manifest)["groups"]
        return groups

    def digest(self, group: str, row: int) -> str | None:
        """The recorded checksum of unit ``row`` of ``group`` (a row, or an experiment's
        file), or ``None`` when the export records none for it."""
        entry = self._groups.get(group)
        if entry is None or "rows" in entry:  # units of several rows: not one row's
            return None
        text = entry["digests"]
        found = text[row * DIGEST_CHARS:(row + 1) * DIGEST_CHARS]
        return found if len(found) == DIGEST_CHARS else None

    def unit_digest(self, group: str, unit: int) -> str | None:
        """The recorded checksum of unit ``unit`` of ``group`` whatever rows it covers (e.g.
        one shard file of a storage), or ``None`` when the export records none for it."""
        entry = self._groups.get(group)
        if entry is None:
            return None
        text = entry["digests"]
        found = text[unit * DIGEST_CHARS:(unit + 1) * DIGEST_CHARS]
        return found if unit >= 0 and len(found) == DIGEST_CHARS else None

    @cached_property
    def reader(self) -> Any:
        """The format's reader of the export (for sinks that carry a row by rewriting it)."""
        from guideloom.formats import get_format

        return get_format(str(self.manifest["kind"])).open_reader(self.root, self.manifest)

    @cached_property
    def sim_ids(self) -> np.ndarray:
        """The id of each row."""
        ids: np.ndarray = self.reader.sim_ids()
        return ids

    @property
    def fields(self) -> tuple[str, ...]:
        """The export's fields (output aliases)."""
        return tuple(self.manifest["fields"])


def previous_rows(root: str, export_id: str) -> PreviousRows:
    """The :class:`PreviousRows` of the export at ``root``, checked to be generation
    ``export_id`` (an update never carries rows of another generation than the one it
    planned against). A local export whose tree holds a link or anything but regular files
    and folders is refused (:func:`~guideloom.formats.own_files.check_tree`)."""
    with _lock:
        found = _cache.get(export_id)
        if found is not None and found.root == root:
            return found
    path, manifest = read_export_manifest(root)
    if str(manifest.get("export_id", "")) != export_id:
        raise GuideloomError(f"{root} is no longer the export this update started from "
                           f"(export_id {export_id}): another run replaced it; run the "
                           "update again")
    if "://" not in path:
        check_tree(path)  # nothing carried through a link (see guideloom.formats.own_files)
    rows = PreviousRows(path, manifest)
    with _lock:
        _cache.clear()  # one generation at a time per process
        _cache[export_id] = rows
    return rows
