"""What each row of an export came from: ``provenance.json``, written beside the data.

Version 2 records, for every published row (in ``sim_ids`` order):

- ``inputs``: the cheap evidence of the experiment's input
  (:func:`guideloom.read.fingerprint.input_evidence`: the file's size, ``mtime_ns``,
  ``ctime_ns``, inode and device, a zip member's name, stored size, CRC-32 and offset; a remote
  file's size and server checksum) and ``blake3``, the content digest of its stored bytes
  (:mod:`guideloom.read.content`), hashed while the export read it;
- ``row``: a short digest of its typed index-table row.

``export.json``'s ``provenance`` entry keeps the file's sha256 (checked when it is read) and
``started_ns``, when the export that recorded the evidence started (the "racy" rule of
:func:`guideloom.read.fingerprint.trusted`; kept out of the file, so that two exports of the
same inputs write the same bytes). An update (:mod:`guideloom.export.update`) compares them
with the new selection's. Version 1 (guideloom before issue 38) recorded one short digest of
the cheap evidence per row and no content digest: its rows are all read again by the next
update.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fsspec

from guideloom.formats.layout import PROVENANCE_FILE, fail
from guideloom.read.content import HASH_NAME

PROVENANCE_VERSION = 2
READABLE_VERSIONS = (1, 2)
TOKEN_CHARS = 16  # hex digits of one row digest (64 bits: an accidental equal digest is 2**-64)


@dataclass(frozen=True)
class Provenance:
    """What each row came from, parallel to ``sim_ids``.

    Attributes:
        inputs: Per row, its input's evidence with its content digest under ``blake3``;
            ``None`` for every row of a version 1 file (no digest recorded).
        row: Per row, the digest of its index-table row.
        started_ns: When the export that recorded the evidence started (0: version 1).
        version: The file's version.
    """

    inputs: tuple[Mapping[str, Any] | None, ...]
    row: tuple[str, ...]
    started_ns: int = 0
    version: int = PROVENANCE_VERSION


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:TOKEN_CHARS]


def row_digests(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The digest of each typed index-table row (its columns and values)."""
    return [_short(json.dumps(dict(r), sort_keys=True, default=str)) for r in rows]


def document(inputs: Sequence[Mapping[str, Any]], digests: Sequence[str],
             row: Sequence[str]) -> dict[str, Any]:
    """The ``provenance.json`` document of the published rows: each row's input evidence
    with its content digest ``digests[k]``, and its index-row digest."""
    return {"version": PROVENANCE_VERSION, "hash": HASH_NAME,
            "inputs": [{**evidence, HASH_NAME: digest}
                       for evidence, digest in zip(inputs, digests, strict=True)],
            "row": "".join(row)}


def manifest_entry(blob: bytes, started_ns: int = 0) -> dict[str, Any]:
    """What ``export.json`` records of the file whose bytes are ``blob``: name, sha256, and
    ``started_ns``, when the export that took its evidence started."""
    entry: dict[str, Any] = {"file": PROVENANCE_FILE,
                             "sha256": hashlib.sha256(blob).hexdigest()}
    if started_ns:
        entry["started_ns"] = int(started_ns)
    return entry


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
    version = doc.get("version")
    if version not in READABLE_VERSIONS:
        fail(root, PROVENANCE_FILE, f"version {version!r}; this guideloom reads "
                                    f"{' and '.join(map(str, READABLE_VERSIONS))}")
    rows = _split(doc["row"])
    if version == 1:  # cheap evidence digests only: every row is read again
        return Provenance((None,) * len(_split(doc["data"])), rows, 0, 1)
    if doc.get("hash") != HASH_NAME:
        fail(root, PROVENANCE_FILE, f"content digests of {doc.get('hash')!r}; this guideloom "
                                    f"hashes with {HASH_NAME}")
    inputs = doc.get("inputs")
    if not isinstance(inputs, list) or len(inputs) != len(rows):
        fail(root, PROVENANCE_FILE, "its inputs and rows do not match")
    started = entry.get("started_ns")
    if not isinstance(started, int) or started <= 0:
        fail(root, "export.json", "its provenance entry records no started_ns")
    return Provenance(tuple(inputs), rows, started, 2)


def _split(text: str) -> tuple[str, ...]:
    return tuple(text[k:k + TOKEN_CHARS] for k in range(0, len(text), TOKEN_CHARS))
