"""Which generation of an export a loader's state belongs to, and how the rest of an epoch
carries over to another generation (issue 38).

An export that is updated (``update=True``) gets a new generation: rows may be added, removed,
changed or moved. A loader state taken on one generation holds positions in *that*
generation's order; applied to another generation's rows they would name other experiments.
So a state of an export records (:func:`state_entries`) the export's generation, its
``export_id`` and a SHA-256 of its ``sim_ids`` (``"export"``), and the ``sim_ids`` its epoch's
order permutes (``"sim_ids"``). Resumed where the ``sim_ids`` differ, the loader either

- continues by ``sim_id`` (``on_generation_change="continue"``, the default): the rest of the
  epoch is the rest of the recorded order, each experiment served from its row in this
  generation (its new values if it changed), experiments removed since skipped; experiments
  added appear from the next epoch, whose order permutes this generation's rows
  (:func:`carried_epoch`); or
- refuses with one line (``"refuse"``; also when the state holds no ``sim_ids`` to continue
  by): :class:`~guideloom.errors.GenerationChangedError`.

A state without ``"export"`` (written before this, or by hand) is positions in the rows as
they are, as before.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from guideloom.errors import GenerationChangedError

__all__ = ["GENERATION_CHANGES", "CarriedEpoch", "ExportIdentity", "carried_epoch",
           "check_resume", "identity_of", "sim_ids_digest", "state_entries"]

logger = logging.getLogger(__name__)

GENERATION_CHANGES = ("continue", "refuse")


def sim_ids_digest(sim_ids: Sequence[Any]) -> str:
    """SHA-256 of ``sim_ids`` in order, as JSON (ints and strings: the same whatever numpy
    dtype held them, and the same after a state's JSON round trip)."""
    text = json.dumps([_plain(s) for s in sim_ids], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


@dataclass(frozen=True)
class ExportIdentity:
    """The generation of an export a loader reads.

    Attributes:
        root: Where the export is (for messages).
        generation: ``export.json``'s last ``generations`` entry's number (``None``: an export
            written without generations).
        export_id: The published export's id (a new one for each generation).
        sim_ids: Its rows' experiment ids, in row order (JSON values); ``None`` when its
            samples are not its rows (a stream storage export served as windows: those
            cannot be followed to another generation, whose records may be longer or
            shorter).
        digest: :func:`sim_ids_digest` of the export's ``sim_ids``.
    """

    root: str
    generation: int | None
    export_id: str | None
    sim_ids: list[Any] | None
    digest: str

    def to_state(self) -> dict[str, Any]:
        """The state's ``"export"`` entry."""
        doc = {"generation": self.generation, "export_id": self.export_id,
               "sim_ids_sha256": self.digest}
        return doc if self.sim_ids is None else {**doc, "rows": len(self.sim_ids)}

    def describe(self) -> str:
        """``generation N of ROOT``, for messages."""
        which = "an export" if self.generation is None else f"generation {self.generation}"
        return f"{which} of {self.root}"


def identity_of(source: Any) -> ExportIdentity | None:
    """The export generation a sample source serves (its ``export_identity()``), else
    ``None`` (storages, datasets, a user's source)."""
    get = getattr(source, "export_identity", None)
    return get() if callable(get) else None


def state_entries(identity: ExportIdentity | None, basis: list[Any] | None) -> dict[str, Any]:
    """What a state adds for an export: ``"export"`` (the generation read now) and
    ``"sim_ids"`` (those the epoch's order permutes: ``basis`` while an epoch begun on another
    generation is finished, else the export's own)."""
    if identity is None:
        return {}
    permuted = identity.sim_ids if basis is None else basis
    permuted = None if permuted is None else list(permuted)  # the caller's to keep or change
    entries: dict[str, Any] = {"export": identity.to_state()}
    return entries if permuted is None else {**entries, "sim_ids": permuted}


def check_resume(state: Mapping[str, Any], identity: ExportIdentity | None,
                 on_change: str) -> list[Any] | None:
    """The basis to resume ``state`` on (``None``: positions in ``identity``'s own order).

    Returns:
        ``None`` when the state permutes the same ``sim_ids`` as the export (or records no
        export: an earlier state, read as before), else the state's ``sim_ids``: the rest of
        its epoch is continued by ``sim_id`` (:func:`carried_epoch`).

    Raises:
        GenerationChangedError: The state is of another generation and ``on_change`` is
            ``"refuse"``, or its ``sim_ids`` differ from the export's and it holds none to
            continue by. One line naming both generations.
        ValueError: The state's export entries are malformed.
    """
    recorded = state.get("export")
    if identity is None or recorded is None:
        if identity is not None:
            logger.debug("state without an export generation: positions in %s",
                         identity.describe())
        return None
    if not isinstance(recorded, Mapping) or "sim_ids_sha256" not in recorded:
        raise ValueError("state_dict's 'export' entry lacks 'sim_ids_sha256'")
    basis = state.get("sim_ids")
    if basis is not None and not isinstance(basis, list):
        raise ValueError("state_dict's 'sim_ids' is not a list")
    was = _described(recorded, identity.root)
    other = recorded.get("export_id") != identity.export_id
    if identity.sim_ids is None:  # windows of a stream: positions only in their generation
        if other:
            raise GenerationChangedError(
                f"the loader state was taken on {was}, the loader reads windows of "
                f"{identity.describe()}, and windows of a stream do not carry over to another "
                "generation: resume on the export it was taken on, or start the next epoch "
                "(loader.set_epoch)")
        return None
    if on_change == "refuse" and (other or recorded["sim_ids_sha256"] != identity.digest):
        raise GenerationChangedError(
            f"the loader state was taken on {was}, the loader reads {identity.describe()} "
            "(on_generation_change='refuse'): resume on the export the state was taken on, or "
            "pass on_generation_change='continue' to continue by sim_id")
    digest = recorded["sim_ids_sha256"] if basis is None else sim_ids_digest(basis)
    if digest == identity.digest:
        return None
    if basis is None:
        raise GenerationChangedError(
            f"the loader state was taken on {was}, whose rows differ from those of "
            f"{identity.describe()}, and it holds no sim_ids to continue by: resume on the "
            "export it was taken on, or start the next epoch (loader.set_epoch)")
    logger.info("loader state of %s resumed on %s: the rest of its epoch continues by sim_id",
                was, identity.describe())
    return basis


def _described(recorded: Mapping[str, Any], root: str) -> str:
    generation = recorded.get("generation")
    which = "an export" if generation is None else f"generation {generation}"
    return f"{which} of {root} (export_id {recorded.get('export_id')})"


@dataclass(frozen=True)
class CarriedEpoch:
    """The rest of an epoch begun on another generation, in this generation's rows.

    Attributes:
        rows: Rows of this export still to deliver, in the recorded order.
        reached: For each of ``rows``, the position in the recorded order just after it (the
            state's ``observation_offset`` once it is delivered).
    """

    rows: np.ndarray
    reached: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)


def carried_epoch(basis: Sequence[Any], order: Callable[[np.ndarray], np.ndarray], offset: int,
                  sim_ids: Sequence[Any]) -> CarriedEpoch:
    """The rest of the epoch whose order ``order`` permutes ``basis`` (another generation's
    ``sim_ids``), from position ``offset``, mapped to the rows of ``sim_ids`` (this
    generation's) by ``sim_id``; experiments no longer there are skipped."""
    row_of = {_plain(s): i for i, s in enumerate(sim_ids)}
    positions = np.arange(offset, len(basis), dtype=np.int64)
    old_rows = order(positions) if len(positions) else positions
    rows, reached = [], []
    for position, old in zip(positions.tolist(), np.asarray(old_rows).tolist(), strict=True):
        row = row_of.get(_plain(basis[old]))
        if row is not None:
            rows.append(row)
            reached.append(position + 1)
    return CarriedEpoch(np.asarray(rows, dtype=np.int64), np.asarray(reached, dtype=np.int64))
