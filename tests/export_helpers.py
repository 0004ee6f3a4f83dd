"""Transforms used by the export tests; importable on Dask workers (module-level functions)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
from guideloom.workflows.demo_transforms import resample_and_emit  # noqa: F401 - the seed's transform


def first_rows(rec):
    """Fixed-shape force: the first 100 rows of the raw table."""
    return {"force": np.asarray(rec["force_data"])[:100], "sim": np.int64(rec["_sim_id"])}


def fail_on_multiples_of_7(rec):
    """Raises for ids divisible by 7 (except 0)."""
    if rec["_sim_id"] and rec["_sim_id"] % 7 == 0:
        raise RuntimeError(f"cannot handle {rec['_sim_id']}")
    return first_rows(rec)


# the blocking transforms read the environment (where to block): under the recipe's world rule
# a rerun resumes their interrupted runs only when the job names its code_version
BLOCKING_CODE_VERSION = "tests-blocking-1"


def blocking_first_rows(rec):
    """Like first_rows, but blocks forever on ids >= GUIDELOOM_TEST_BLOCK_FROM when set."""
    gate = os.environ.get("GUIDELOOM_TEST_BLOCK_FROM")
    if gate is not None and rec["_sim_id"] >= int(gate):
        threading.Event().wait()
    return first_rows(rec)


def die_once_first_rows(rec):
    """On id GUIDELOOM_TEST_DIE_ID, the first attempt records its PID and blocks forever.

    The test kills that worker process; Dask re-runs the task elsewhere and the second
    attempt (which finds the attempt file) proceeds normally.
    """
    flag_dir = os.environ.get("GUIDELOOM_TEST_FLAG_DIR")
    if flag_dir and rec["_sim_id"] == int(os.environ["GUIDELOOM_TEST_DIE_ID"]):
        attempt = Path(flag_dir) / "attempt"
        try:
            fd = os.open(attempt, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return first_rows(rec)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        (Path(flag_dir) / "pid").write_text(str(os.getpid()))
        threading.Event().wait()
    return first_rows(rec)


def decode_threads_row(rec):
    """The decode threads of the process that reads this record, next to a bit of data."""
    from guideloom import fastread

    return {"threads": np.int64(fastread.decode_threads()),
            "force": np.asarray(rec["force_data"])[:4]}


def blocking_total_force_stream(rec):
    """``total_force_stream``, blocking forever on ids >= GUIDELOOM_TEST_BLOCK_FROM when set."""
    from guideloom.workflows.demo_transforms import total_force_stream

    gate = os.environ.get("GUIDELOOM_TEST_BLOCK_FROM")
    if gate is not None and rec["_sim_id"] >= int(gate):
        threading.Event().wait()
    return total_force_stream(rec)


def stream_failing_on_multiples_of_7(rec):
    """``total_force_stream`` that raises for ids divisible by 7 (except 0)."""
    from guideloom.workflows.demo_transforms import total_force_stream

    if rec["_sim_id"] and rec["_sim_id"] % 7 == 0:
        raise RuntimeError(f"cannot handle {rec['_sim_id']}")
    return total_force_stream(rec)


def unsorted_fields(rec):
    """Like first_rows, with the keys out of alphabetical order (``sim`` before ``force``)."""
    return {"sim": np.int64(rec["_sim_id"]), "force": np.asarray(rec["force_data"])[:100]}


class EventGate:
    """``first_rows`` that holds ids >= ``from_id`` until the ``distributed.Event`` ``name``
    is set (runs on a Dask worker; the test sets the event when it has looked)."""

    def __init__(self, from_id: int, name: str) -> None:
        self.from_id, self.name = from_id, name

    def __call__(self, rec):
        if rec["_sim_id"] >= self.from_id:
            from distributed import Event

            Event(self.name).wait()
        return first_rows(rec)


def big_rows_failing_on_multiples_of_7(rec):
    """1 MiB float32 rows (one zarr chunk each) from the force table; raises like
    :func:`fail_on_multiples_of_7`."""
    if rec["_sim_id"] and rec["_sim_id"] % 7 == 0:
        raise RuntimeError(f"cannot handle {rec['_sim_id']}")
    column = np.asarray(rec["force_data"], dtype=np.float32)[:, 0]
    return {"scan": np.resize(column, (512, 512))}


COUNT_FILE_ENV = "GUIDELOOM_TEST_COUNT_FILE"
# counted_first_rows reads the environment and writes a file: an update of its exports needs
# the version of its code named (issue 38: the recipe cannot see what it reads)
COUNTED_CODE_VERSION = "counted-first-rows-1"


def counted_first_rows(rec):
    """Like first_rows; appends the experiment id to the file named by
    ``GUIDELOOM_TEST_COUNT_FILE`` when set (which experiments were decoded and transformed)."""
    name = os.environ.get(COUNT_FILE_ENV)
    if name:
        with open(name, "a") as fh:
            fh.write(f"{rec['_sim_id']}\n")
    return first_rows(rec)


def page_rows(rec):
    """Rows of whole pages: the first 512 force samples, 8 float64 each (32 kB)."""
    force = np.zeros((512, 8), dtype="<f8")
    data = np.asarray(rec["force_data"], dtype="<f8")[:512]
    force[:len(data)] = data
    return {"force": force}
