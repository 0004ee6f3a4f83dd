"""Where processed files go and how each is published complete or absent.

Each ``<out>/<id>.h5`` is written beside as ``.<id>.h5.tmp-<pid>-<hex>``, closed, fsynced and
renamed over its name: a kill at any point leaves the previous file or none (and a temporary
file the next run removes). The folder holds rddac's marker ``.rddac-processed`` (so either
tool's raw-directory guard accepts it), and each file records, in the root attribute
``guideloom_preprocess``, its raw input's identity and per stage the processing fingerprint
and status: what a rerun compares to skip what is current. The raw index table is copied in
(:func:`write_index`), so views and exports read the folder with ``data_dir=<out>``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

import h5py

from guideloom.export.extract import clean_stale_tmp
from guideloom.runtime.faults import fault_point

logger = logging.getLogger(__name__)

MARKER = ".rddac-processed"
RECORD_ATTR = "guideloom_preprocess"
#: The step boundaries of one file's publish (``GUIDELOOM_FAULT_POINT`` kills the run there).
FAULT_POINTS = ("preprocess-temp-written", "preprocess-temp-synced", "preprocess-renamed")


def guard_out_dir(data_dir: str | None, out_dir: str) -> None:
    """Refuse an output folder that is the raw folder, or looks like a raw dataset (zips or a
    ``metadata.json``) without the processed marker.

    Raises:
        ValueError: One line saying which and what to use instead.
    """
    if data_dir is not None and os.path.realpath(out_dir) == os.path.realpath(data_dir):
        raise ValueError(f"the output folder is the raw data folder {os.path.abspath(out_dir)}: "
                         "processed files never go into the raw dataset; use a subfolder "
                         "such as DATA_DIR/processed")
    if os.path.isdir(out_dir) and not os.path.isfile(os.path.join(out_dir, MARKER)):
        raw = sorted(n for n in os.listdir(out_dir) if n.endswith(".zip") or n == "metadata.json")
        if raw:
            raise ValueError(f"the output folder {os.path.abspath(out_dir)} looks like a raw "
                             f"dataset ({', '.join(raw)}): choose an empty or processed folder, "
                             "such as DATA_DIR/processed")


RUN_FOLDER = ".preprocess-run.tmp-"  # + "<pid>-<hex>": a forked run's task summaries


def prepare_out_dir(out_dir: str) -> list[str]:
    """Create the output folder with its marker; remove temporary files and run folders of
    dead runs (those of live processes are kept). Returns what was removed."""
    os.makedirs(out_dir, exist_ok=True)
    marker = os.path.join(out_dir, MARKER)
    if not os.path.exists(marker):
        Path(marker).touch()
    removed = clean_stale_tmp(out_dir)
    for entry in os.scandir(out_dir):
        if not entry.name.startswith(RUN_FOLDER) or not entry.is_dir(follow_symlinks=False):
            continue
        pid = entry.name[len(RUN_FOLDER):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def output_name(sim_id: Any) -> str:
    """The processed file's name: ``0042.h5`` as rddac names it (text ids as they are)."""
    return f"{sim_id:04d}.h5" if isinstance(sim_id, int) else f"{sim_id}.h5"


def read_record(path: str) -> dict[str, Any] | None:
    """The record of a processed file (``{"input": ..., "stages": {name: {"fingerprint",
    "status"}}}``), or ``None`` when there is no file, no record or the file is damaged."""
    if not os.path.isfile(path):
        return None
    try:
        with h5py.File(path, "r") as f:
            text = f.attrs.get(RECORD_ATTR)
            groups = set(f.keys())
    except (OSError, ValueError):
        logger.info("%s cannot be read: it is redone", path)
        return None
    if text is None:
        return None
    try:
        record = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("stages"), dict):
        return None
    record["groups"] = sorted(groups)
    record["path"] = path
    return record


def temp_path(out_dir: str, name: str) -> str:
    """A fresh temporary name beside ``name`` (one :func:`clean_stale_tmp` recognises)."""
    return os.path.join(out_dir, f".{name}.tmp-{os.getpid()}-{secrets.token_hex(6)}")


def publish(tmp: str, final: str) -> None:
    """Make the closed file ``tmp`` durable and rename it to ``final`` (atomically replacing a
    previous one)."""
    fault_point("preprocess-temp-written")
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fault_point("preprocess-temp-synced")
    os.replace(tmp, final)
    fault_point("preprocess-renamed")


def write_index(out_dir: str, relpath: str, data: bytes) -> None:
    """Put the raw dataset's index table into the processed folder (written beside, renamed;
    left alone when it already holds these bytes), so that ``data_dir=<out>`` with the raw
    manifest as ``source`` reads the processed files as rddac's users do.

    Raises:
        ValueError: ``relpath`` would leave the folder.
    """
    rel = os.path.normpath(relpath)
    if os.path.isabs(rel) or rel == ".." or rel.startswith(".." + os.sep):
        raise ValueError(f"the index table's name {relpath!r} leaves the processed folder")
    final = os.path.join(out_dir, rel)
    with contextlib.suppress(OSError), open(final, "rb") as fh:
        if fh.read() == data:
            return
    os.makedirs(os.path.dirname(final), exist_ok=True)
    tmp = temp_path(os.path.dirname(final), os.path.basename(final))
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def fsync_dir(path: str) -> None:
    """Make the renames in folder ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
