"""Where a partition's first row goes in the published arrays (from the markers and notes of
the partitions before it), and waiting on a Dask worker for those partitions to say."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

PLACED_KEY = "zarr_placed"  # a partition's summary: where its rows went (see ZarrSink)
MAX_WALK = 64  # earlier markers a sink reads to learn where its first row goes


def final_start(stage: Any, index: int) -> tuple[int | None, Mapping[str, Any] | None, int]:
    """Where partition ``index``'s first written row goes in the published arrays, the
    placement of the partition before it, and the partition the answer waits for (``None``
    as the first: an earlier partition has not said yet).

    The markers say it, or the notes partitions write as soon as they know (see
    :meth:`ZarrSink.close`): a placed partition records where its rows end; for the others
    their written rows are counted back to one that was placed (at most :data:`MAX_WALK`).
    """
    if index == 0:
        return 0, None, -1
    count, previous = 0, None
    for q in range(index - 1, max(-1, index - 1 - MAX_WALK), -1):
        marker = stage.marker(q)
        if marker is not None:
            placed, written = marker.get(PLACED_KEY), len(marker["written"])
        else:  # unfinished, but it may have said where its rows end
            note = stage.note(q) if hasattr(stage, "note") else None
            if note is None:
                return None, None, q
            placed = note if "stop" in note else None
            written = int(note.get("written", 0))
        if q == index - 1:
            previous = placed
        if placed is not None:
            return count + int(placed["stop"]), previous, -1
        count += written
        if q == 0:
            return count, previous, -1
    return None, None, -1


def _event_name(stage: Any, index: int) -> str:
    """The ``distributed.Event`` set when partition ``index`` of this staging area has noted."""
    import hashlib

    digest = hashlib.sha256(str(stage.url_of()).encode()).hexdigest()[:16]
    return f"guideloom-zarr-note-{digest}-{index}"


def _in_worker() -> bool:
    try:
        from distributed import get_worker

        get_worker()
    except (ImportError, ValueError):
        return False
    return True


def wake(stage: Any, index: int) -> None:
    """Wake the partitions waiting for partition ``index``'s note (on a Dask worker)."""
    if _in_worker():
        from distributed import Event

        with contextlib.suppress(Exception):  # a lost wake-up costs a wait, not the export
            Event(_event_name(stage, index)).set()


def wait_for(stage: Any, index: int, seconds: float) -> bool:
    """Wait (out of the worker's thread pool) up to ``seconds`` for partition ``index``'s
    note; False when not on a Dask worker or it did not come."""
    if not _in_worker() or seconds <= 0:
        return False
    from distributed import Event, rejoin, secede

    secede()  # the worker runs other tasks meanwhile (the one waited for, perhaps)
    try:
        return bool(Event(_event_name(stage, index)).wait(seconds))
    except Exception:
        return False
    finally:
        rejoin()
