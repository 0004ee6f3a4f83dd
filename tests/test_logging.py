"""Library code logs and never prints; the host's logger levels survive our clusters."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import guideloom
from guideloom.cluster import dask_logs, embedded

ROOT = Path(__file__).resolve().parents[1]

EXPORT = ("import sys, guideloom\n"
          "guideloom.export_to_numpy('pointcloud-op10', sys.argv[2], data_dir=sys.argv[1], "
          "where=lambda row: row['has_pointcloud'], client='sync')\n")


def _python(code: str, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GUIDELOOM_")}
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=cwd,
                          env={**clean, "PYTHONPATH": str(ROOT), **env}, capture_output=True,
                          text=True, timeout=300, check=True)


def test_a_sync_export_from_python_prints_nothing(demo_zip, tmp_path):
    done = _python(EXPORT, demo_zip, tmp_path / "out", cwd=tmp_path)
    assert (done.stdout, done.stderr) == ("", "")
    assert (tmp_path / "out" / "export.json").is_file()


def test_with_logging_configured_the_same_messages_are_log_records(demo_zip, tmp_path):
    code = ("import logging\n"
            "logging.basicConfig(level=logging.INFO, format='%(name)s|%(levelname)s|%(message)s')\n"
            + EXPORT)
    done = _python(code, demo_zip, tmp_path / "out", cwd=tmp_path)
    assert done.stdout == ""
    assert ("guideloom.cluster.runtime|INFO|guideloom: running in-process: client='sync'"
            in done.stderr.splitlines())


def test_fallbacks_are_logged_at_debug_and_counted_in_export_json(tmp_path):
    data = guideloom.make_demo_data(tmp_path / "data", n=4, scan_shape=(400, 640)).data_dir
    code = ("import logging\n"
            "logging.basicConfig(level=logging.DEBUG,\n"
            "                    format='%(name)s|%(levelname)s|%(message)s')\n" + EXPORT)
    done = _python(code, data, tmp_path / "out", cwd=tmp_path, GUIDELOOM_INFLATE="zlib")
    manifest = json.loads((tmp_path / "out" / "export.json").read_text())
    assert manifest["fallbacks"].get("inflate:zlib", 0) >= 1  # datasets zlib inflated
    assert ("guideloom.fastread.inflate|DEBUG|inflate back end: zlib (asked for 'zlib')"
            in done.stderr.splitlines())
    assert all(isinstance(v, int) and v > 0 for v in manifest["fallbacks"].values())


def test_a_chunk_the_fast_path_cannot_read_is_counted(tmp_path):
    import h5py
    import numpy as np

    from guideloom import fastread
    from guideloom.runtime import fallbacks

    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("d", data=np.arange(1 << 16, dtype="f8"), chunks=(4096,),
                         compression="lzf")  # a filter the fast path does not decode
    before = fallbacks.snapshot()
    with h5py.File(path) as f:
        data = fastread.read_dataset(f["d"], fastread.RawSource(f.id.get_vfd_handle()),
                                     min_bytes=0)
    assert (data == np.arange(1 << 16)).all()
    assert fallbacks.since(before) == {"fastread:unsupported": 1}


def _levels() -> dict[str, int]:
    return {name: logging.getLogger(name).level for name in dask_logs.QUIET_LOGGERS}


def test_the_embedded_cluster_quiets_dask_only_while_it_runs(demo_zip, tmp_path):
    import distributed  # noqa: F401 - its own logging set-up is part of "before"

    embedded.close_cluster()  # another test's cluster would hold the loggers quiet already
    assert dask_logs.holders() == 0
    logging.getLogger("asyncio").setLevel(logging.WARNING)  # the host's choice
    before = _levels()
    assert before["asyncio"] == logging.WARNING
    try:
        guideloom.export_to_numpy("pointcloud-op10", tmp_path / "out", data_dir=demo_zip,
                                  where=lambda row: row["has_pointcloud"], client="local:1")
        assert embedded.running_cluster() is not None  # kept for the next export
        assert set(_levels().values()) == {logging.CRITICAL}
    finally:
        embedded.close_cluster()
    assert _levels() == before
    assert dask_logs.holders() == 0


def test_the_cli_leaves_the_host_logging_as_it_found_it(demo_zip, capsys):
    from guideloom.cli import main

    root = logging.getLogger("guideloom")
    handlers, level, before = list(root.handlers), root.level, _levels()
    assert main(["views", str(demo_zip)]) == 0
    assert "force-curve" in capsys.readouterr().out
    assert (list(root.handlers), root.level, _levels()) == (handlers, level, before)


def test_a_record_the_native_reader_cannot_read_is_counted_in_export_json(demo_copy, tmp_path,
                                                                           caplog):
    """An lzf-compressed force table: h5py reads it, and the export says the native reader
    fell back (``fallbacks`` in export.json) and logs why at DEBUG."""
    import h5py
    import numpy as np

    ds = guideloom.load(data_dir=demo_copy)
    ident = ds.index().ids[0]
    target = demo_copy / "h5" / f"{ident:04d}.h5"
    target.parent.mkdir(exist_ok=True)
    with h5py.File(target, "w") as f:
        f.create_dataset("force/data", data=np.arange(400, dtype="<f4").reshape(50, 8),
                         chunks=(10, 8), compression="lzf")
    caplog.set_level(logging.DEBUG, logger="guideloom")
    guideloom.export_to_numpy("force-curve", tmp_path / "out", data_dir=demo_copy,
                              sim_ids=[ident], client="sync")
    manifest = json.loads((tmp_path / "out" / "export.json").read_text())
    assert manifest["fallbacks"] == {"h5native:NativeUnsupported": 1}
    assert any("fell back to h5py" in r.getMessage() for r in caplog.records)
