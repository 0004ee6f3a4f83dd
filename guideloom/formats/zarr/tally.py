"""How finalize completed the final arrays' chunks, counted and reported as it goes."""

from __future__ import annotations

from collections.abc import Callable

FINALIZE_KEY = "zarr_finalize"  # export.json: how finalize completed the chunks (ChunkTally)


class ChunkTally:
    """How the final arrays' chunks were completed at finalize (``placed``: by the
    partitions; ``done_before``: by an interrupted finalize; ``moved``: renamed from the
    planned rows; ``assembled``: written from planned rows and pieces), reported as they go."""

    def __init__(self, total: int, report: Callable[[int, int], None] | None = None):
        import threading

        self.counts = {"chunks": total, "placed": 0, "done_before": 0, "moved": 0,
                       "assembled": 0}
        self.done = 0
        self._report = report
        self._lock = threading.Lock()
        if report is not None:
            report(0, total)

    def add(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self.counts[kind] += n
            self.done += n
            if self._report is not None:
                self._report(self.done, self.counts["chunks"])
