"""Fanning partition tasks out over Dask (or running them in-process) with a progress bar."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

NB_HYPHEN = "\u2011"  # looks like "-" but does not split Dask key names


def dashboard_label(*words: str) -> str:
    """A Dask task-prefix name shown whole on the dashboard, e.g. ``read-transform-write op10``.

    Dask groups tasks by ``key_split(key)``, which cuts a name at the first hyphenated word
    holding a digit or a dot ("pointcloud-op10" would show as "pointcloud"). Non-breaking
    hyphens keep the whole label together.
    """
    return " ".join(words).replace("-", NB_HYPHEN)


class _NoProgress:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(show: bool, total: int, *, initial: int = 0, unit: str, desc: str) -> Any:
    """A tqdm bar, or a silent stand-in when ``show`` is false."""
    if not show:
        return _NoProgress()
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, unit=unit, desc=desc)


def run_partitions(
    dask: Any,
    fn: Callable[..., dict[str, Any]],
    parts: Sequence[Any],
    *,
    args: tuple[Any, ...],
    key: Callable[[Any], tuple[Any, ...]],
    done: Callable[[dict[str, Any]], int],
    progress: Any,
) -> list[dict[str, Any]]:
    """Run ``fn(*args, part)`` for every part; return the summaries as they complete.

    With ``dask=None`` the parts run here, one after the other. Otherwise each part is one task
    keyed ``key(part)``; the first failing task cancels the rest and its exception is raised
    with the worker's traceback. ``done(summary)`` counts the progress a summary stands for.
    """
    results: list[dict[str, Any]] = []
    try:
        if dask is None:
            for part in parts:
                summary = fn(*args, part)
                results.append(summary)
                progress.update(done(summary))
            return results
        from distributed import as_completed

        futures = [dask.submit(fn, *args, part, key=key(part), pure=False) for part in parts]
        try:
            with dask.as_current():
                completed = as_completed(futures)
            for future in completed:
                if future.status == "error":
                    error = future.exception()
                    dask.cancel([f for f in futures if f is not future])
                    raise error.with_traceback(future.traceback())
                summary = future.result()
                results.append(summary)
                progress.update(done(summary))
        finally:
            dask.cancel([f for f in futures if not f.done()])
        return results
    finally:
        progress.close()
