"""What each row of an export came from: ``provenance.json``, written beside the data.

For every published row (in ``sim_ids`` order) two short digests: of the experiment's input
token (:func:`guideloom.read.fingerprint.location_tokens`: zip member name, size and CRC-32, or
a loose file's size and modification time, or a remote file's size and validator) and of its
typed index-table row. An update (:mod:`guideloom.export.update`) compares them with the new
selection's to find the experiments that changed, without reading any member data.
``export.json`` records the file's sha256 (``provenance``), checked when it is read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fsspec

from guideloom.formats.layout import PROVENANCE_FILE, fail
from guideloom.read.fingerprint import location_tokens

PROVENANCE_VERSION = 1
TOKEN_CHARS = 16  # hex digits of one digest (64 bits: an accidental equal digest is 2**-64)


@dataclass(frozen=True)
class Provenance:
    """The input and index-row digest of each row, parallel to ``sim_ids``."""

    data: tuple[str, ...]
    row: tuple[str, ...]


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:TOKEN_CHARS]


def input_digests(locations: Sequence[Any]) -> list[str]:
    """The digest of each experiment's input token (no member data is read)."""
    return [_short(t) for t in location_tokens(locations)]


def row_digests(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The digest of each typed index-table row (its columns and values)."""
    return [_short(json.dumps(dict(r), sort_keys=True, default=str)) for r in rows]


def document(data: Sequence[str], row: Sequence[str]) -> dict[str, Any]:
    """The ``provenance.json`` document of the published rows."""
    return {"version": PROVENANCE_VERSION, "data": "".join(data), "row": "".join(row)}


def manifest_entry(blob: bytes) -> dict[str, str]:
    """What ``export.json`` records of the file whose bytes are ``blob``: name and sha256."""
    return {"file": PROVENANCE_FILE, "sha256": hashlib.sha256(blob).hexdigest()}


def read_provenance(root: str, manifest: Mapping[str, Any]) -> Provenance | None:
    """The provenance of the export at ``root``, or ``None`` when it records none (an export
    of an older guideloom).

    Raises:
        CorruptExportError: The file is missing, damaged or not the one ``export.json``
            records.
    """
    entry = manifest.get("provenance")
    if not isinstance(entry, Mapping):
        return None
    try:
        with fsspec.open(f"{root}/{PROVENANCE_FILE}", "rb") as fh:
            blob = fh.read()
    except FileNotFoundError:
        fail(root, PROVENANCE_FILE, "missing")
    if hashlib.sha256(blob).hexdigest() != entry.get("sha256"):
        fail(root, PROVENANCE_FILE, "does not match the sha256 recorded in export.json")
    doc = json.loads(blob)
    if doc.get("version") != PROVENANCE_VERSION:
        fail(root, PROVENANCE_FILE, f"version {doc.get('version')!r}; this guideloom reads "
                                    f"{PROVENANCE_VERSION}")
    return Provenance(_split(doc["data"]), _split(doc["row"]))


def _split(text: str) -> tuple[str, ...]:
    return tuple(text[k:k + TOKEN_CHARS] for k in range(0, len(text), TOKEN_CHARS))
