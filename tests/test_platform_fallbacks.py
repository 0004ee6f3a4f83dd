"""guideloom without the Linux-only calls: what macOS and Windows lack, simulated on Linux.

A fresh interpreter first removes ``os.posix_fallocate``, ``os.posix_fadvise``, ``os.preadv``
and ``os.O_DIRECT`` and refuses ``import fcntl`` to guideloom's modules, then imports guideloom,
exports demo data in-process (``client="sync"``: the target lock, block reservation, direct and
positional I/O), reads exports back (``load_export``) and streams the view (``iter_view``). The
same script run without the simulation must print the same digests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SIMULATE = r"""
import builtins, os, sys
MISSING = ("posix_fallocate", "posix_fadvise", "preadv", "O_DIRECT")
for name in MISSING:
    if hasattr(os, name):
        delattr(os, name)
_import = builtins.__import__


def _no_fcntl(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__", "")
    if name in ("fcntl", "msvcrt") and importer.split(".")[0] == "guideloom":
        raise ModuleNotFoundError(f"No module named {name!r} (simulated)", name=name)
    return _import(name, globals, locals, fromlist, level)


builtins.__import__ = _no_fcntl
"""

SCENARIO = r"""
import hashlib, json, os, sys
import numpy as np
import guideloom
from guideloom.runtime import os_support
from guideloom.streaming import iter_view

data_dir, work, kinds, load_dir = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4]


def first_rows(rec):
    return {"force": np.asarray(rec["force_data"])[:64], "sim": np.int64(rec["_sim_id"])}


def digest(directory):
    export = guideloom.load_export(directory)
    sha = hashlib.sha256()
    for i in range(len(export)):
        row = export[i]
        for name in sorted(row):
            sha.update(name.encode() + np.ascontiguousarray(row[name]).tobytes())
    return [len(export), sha.hexdigest()]


result = {}
for kind in kinds:
    out = os.path.join(work, kind)
    if kind == "npy":
        guideloom.export_to_numpy("force-curve", out, data_dir=data_dir, client="sync",
                                  record_transform=first_rows, partition_size=9)
    else:
        guideloom.export_to_numpy_per_sim("force-curve", out, data_dir=data_dir, client="sync",
                                          record_transform=first_rows, partition_size=9)
    result[kind] = digest(out)
result["loaded"] = digest(load_dir or os.path.join(work, "npy"))
streamed = hashlib.sha256()
count = 0
for rec in iter_view("force-curve", data_dir=data_dir, sim_ids=[0, 3, 7]):
    streamed.update(np.asarray(rec["force_data"]).tobytes())
    count += 1
result["streamed"] = [count, streamed.hexdigest()]
result["capabilities"] = [os_support.HAS_PREADV, os_support.HAS_FALLOCATE,
                          os_support.HAS_FADVISE, os_support.O_DIRECT != 0, os_support.LOCKING]
result["locks_left"] = sorted(n for n in os.listdir(work) if n.endswith(".pid"))
print(json.dumps(result))
"""


def run(data_dir: Path, work: Path, kinds: str, simulate: bool, load_dir: Path | None = None,
        ) -> dict:
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUIDELOOM_")}
    script = (SIMULATE if simulate else "") + SCENARIO
    proc = subprocess.run(
        [sys.executable, "-c", script, str(data_dir), str(work), kinds, str(load_dir or "")],
        cwd=work, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_simulated(plain: dict, missing: dict) -> None:
    assert missing["capabilities"] == [False, False, False, False, "pidfile"]
    assert plain["capabilities"][0]
    assert plain["capabilities"][4] == "flock"
    assert missing["locks_left"] == [], "the pid-file lock was left behind"
    assert plain["streamed"][0] == 3
    for key in missing:
        if key not in ("capabilities", "locks_left"):
            assert missing[key] == plain[key], key


def test_export_read_and_stream_without_linux_only_calls(demo_loose, tmp_path):
    """Loose HDF5 files, an in-process npz export, ``load_export`` of an npy export."""
    plain = run(demo_loose, tmp_path / "plain", "npz,npy", simulate=False)
    assert plain["npy"][0] == plain["npz"][0] == 36
    missing = run(demo_loose, tmp_path / "missing", "npz", simulate=True,
                  load_dir=tmp_path / "plain" / "npy")
    check_simulated(plain, missing)


def test_npy_export_of_zipped_data_without_linux_only_calls(demo_zip, tmp_path):
    plain = run(demo_zip, tmp_path / "plain", "npz,npy", simulate=False)
    missing = run(demo_zip, tmp_path / "missing", "npz,npy", simulate=True)
    check_simulated(plain, missing)


def test_the_fallbacks_do_what_the_calls_do(tmp_path):
    """Positional reads and writes, allocation and the pid-file lock, with the calls gone."""
    script = SIMULATE + r"""
import json, os, sys
del os.pread, os.pwrite  # as on Windows: the lseek fallbacks
from guideloom.runtime import os_support as osx
path = sys.argv[1]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
osx.pwrite(fd, b"0123456789", 0)
buf = bytearray(4)
got = [osx.preadinto(fd, buf, 3), bytes(buf).decode(), osx.pread(fd, 20, 6).decode(),
       osx.allocate(fd, 0, 4096), osx.advise(fd, 0, 0, "RANDOM"), os.fstat(fd).st_size]
lock = path + ".lock"
lfd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
got += [osx.try_lock(lfd, lock), os.path.exists(lock + ".pid"), osx.is_locked(lfd, lock)]
with open(lock + ".pid", "w") as f:
    f.write(str(int(sys.argv[2])))  # a live process of someone else holds it
got += [osx.try_lock(lfd, lock), osx.is_locked(lfd, lock)]
with open(lock + ".pid", "w") as f:
    f.write("999999999")  # a process that is gone: taken over
got += [osx.try_lock(lfd, lock)]
osx.unlock(lfd, lock)
got += [os.path.exists(lock + ".pid")]
print(json.dumps(got))
"""
    holder = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                              stdin=subprocess.PIPE)
    try:
        proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "f"),
                               str(holder.pid)], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)
    finally:
        holder.communicate(b"")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [4, "3456", "6789", False, False, 10,
                                       True, True, False, False, True, True, False]
