"""Whether a processed file was made from the raw input that is there now: the evidence export
updates use (:mod:`guideloom.read.fingerprint`, :mod:`guideloom.read.content`).

A processed file records its input's cheap evidence (size, times, inode, device, the member's
entry; a remote file's server checksum), whether that evidence was settled when its run
started (the "racy" rule: the input last changed well before; recorded as a flag, not the time,
so that two runs write the same file), and a BLAKE3 digest of the input's stored bytes (local
inputs). A rerun trusts equal evidence only when it was settled; otherwise it hashes the input
now and compares digests. A remote input is trusted while its server checksum is unchanged,
and redone when it changed (no digest is fetched: that would read every member whole).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from guideloom.read.content import content_digest
from guideloom.read.fingerprint import evidence_differs, input_evidence, trusted
from guideloom.read.locations import Location

logger = logging.getLogger(__name__)


def evidence_of(locations: Sequence[Location]) -> list[dict[str, Any]]:
    """The cheap evidence of each raw input (one ``stat`` per file, no data read)."""
    return input_evidence(locations)


def record(loc: Location, evidence: Mapping[str, Any], started_ns: int) -> dict[str, Any]:
    """What a processed file records of its input: the evidence, whether it was settled when
    the run started at ``started_ns`` and (local inputs) the content digest, hashed now."""
    digest = content_digest(loc).digest if loc.is_local else None
    return {"evidence": dict(evidence), "settled": trusted(evidence, started_ns),
            "digest": digest}


def unchanged(recorded: Any, loc: Location, evidence: Mapping[str, Any]) -> bool:
    """Whether the input recorded as ``recorded`` is proven to be the one at ``loc`` now."""
    if not isinstance(recorded, Mapping) or not isinstance(recorded.get("evidence"), Mapping):
        return False  # no record, or one of an earlier guideloom: redo
    old = recorded["evidence"]
    differs = evidence_differs(old, evidence)
    if not differs and recorded.get("settled") is True:
        return True
    if not loc.is_local or not recorded.get("digest"):
        return False
    same = content_digest(loc).digest == recorded["digest"]
    logger.debug("experiment %s: re-hashed its input (%s): %s", loc.sim_id,
                 "; ".join(differs) or "changed close to the run's start",
                 "unchanged" if same else "changed")
    return same
