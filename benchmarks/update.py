"""Updating an export vs exporting it again (issue 32's goals), side by side in one run.

Run: ``python3 benchmarks/update.py [--quick] [--n 120] [--scan 2000x3200] [--reps N]
[--share 0.01] [--client CLIENT] [--latency 0.02] [--bandwidth 5e7]
[--only npy,formats,remote,inputs,recipe] [--noop-n 1000] [--cache DIR]``

The data is ``guideloom.demo.cached_demo_data`` (zip layout, generated once under ``--cache``,
default ``~/.cache/guideloom-bench``; by default 120 experiments with the real scans, 2000 x
3200, of which the ones with ``has_pointcloud`` are exported: 104). Local runs read a loose
copy of its members (``<data>-loose/h5``, the same bytes, made once, as
``benchmarks/export.py`` makes it) through two data directories of hard links: ``v0``, and
``v1`` where 1% of the experiments' files are copies with a value of ``pointcloud/op10/z``
rewritten by h5py (a changed member). "1%" is ``--share`` of the exported experiments, at least
one; the experiments removed, changed or inserted "in the middle" are spread evenly over the
index order (one experiment: the middle one). Added, removed and inserted experiments are
``sim_ids`` subsets of the same data. One run prints:

1. pointcloud-op10 to npy: the full re-export of every experiment (``overwrite=True``), then on
   a target holding a complete export, ``update=True`` after 1% added whose ids come after the
   existing ones (ratio to the full re-export, goal <= 0.1x), the same 1% removed again (at the
   end), 1% inserted in the middle and removed again, and 1% changed (``v0`` -> ``v1``; the way
   back to ``v0`` resets the target and is not counted). For each: the update's seconds beside
   the full re-export's, the experiments decoded (from the partition summaries, checked against
   ``result.update`` and the ``generations`` entry of ``export.json``; goal: exactly the added
   or changed ones), the bytes carried (carried rows times the row size), the carry rate (bytes
   carried / (update time - decode time of the experiments read, the partitions'
   ``read_transform_s``), and bytes carried / update time) and its ratio to this disk's copy
   rate measured in the same run (the full export's files copied with ``copy_file_range``, and
   with plain reads and writes, fsynced; goal >= 0.85). After each update of the last run the
   target's rows are compared with the full re-export's, id by id.
2. The add-1% case for npz, zarr (lz4) and storage (a ``StreamStorage`` of (z, luminescence)
   pixels): full re-export and update, ratio and experiments decoded. A format whose update is
   refused (``UpdateRefusedError``) prints the refusal and is skipped.
3. The add-1% case for a remote release: the zipped data served by ``python -m
   tests.dataverse_server --static`` on 127.0.0.1 (``--latency`` seconds before every answer,
   one ``--bandwidth`` cap in bytes per second shared by all bodies) into an npy target: full
   re-export and update from the URL, ratio, experiments decoded, requests and bytes the server
   sent. Every remote run shares one guideloom cache (the same machine exporting again).
4. Input identity (issue 38): the cost of the content digests a full export records: the
   export's CPU seconds with digests beside those without (the honest figure: an input held
   in memory for its digest is decoded from there, so its read serves the decode too), and
   the CPU seconds spent reading and hashing the inputs (on the partitions' own threads for
   inputs held in memory, ``input_hold_mb``; on helper threads for the others), as a share of
   the export's CPU seconds (in-process unless ``--client`` names a placement, each run with
   an empty ``$GUIDELOOM_CACHE_DIR`` so that no digest recorded by an earlier run is reused;
   the process and its forked workers, ``getrusage``; the goal's figure, as a
   wall-clock difference of a few per cent drowns in the noise of a shared machine), beside
   the npy full re-export of ``v0`` timed with digests and without, interleaved (the children
   of the "without" runs hold no input and replace the hash by a constant, a measurement
   only) and the seconds
   the partitions waited for their hashes; this disk's
   sequential read rate of the inputs with a cold page cache (8 MiB ``pread``s) beside the
   rate at which ``verify_inputs=True`` re-hashes every carried input of an up-to-date export
   (cold too; goal >= 0.8x), and a no-op update of 1,000 small loose experiments (``--noop-n``,
   ``force-curve`` to npz: every experiment, whatever its table's length; 20 x 32 scans; goal
   <= 2 s), with the inputs it re-hashed.
5. The recipe (issue 38): the fingerprint of a transform reaching 50 functions of a user module
   (:func:`guideloom.export.recipe.transform_recipe`), the first call in a fresh process (its
   module parsed, package versions looked up; goal <= 50 ms) and five later calls.

Disk: the data (zip release and its loose copy) and, at a time, about four exports of the
selection (a full re-export, a target, the next generation being written, the copy-rate files):
with the defaults about 6 GB and 4 x 5.3 GB under ``--cache``.

Every export runs in a FRESH Python process (this file as ``--child NAME ARGS_JSON``, printing
one ``RESULT {json}`` line), timed around the export call after ``os.sync()`` (``import
guideloom`` not counted, what the call imports is, as in a fresh ``guideloom run``; beside it
the job's own ``total_s`` from ``export.json``), median [min-max] over ``--reps`` runs (default
3; ``--quick``: 24 experiments with 100 x 160 scans, 2 runs, a smoke run whose figures are
dominated by fixed costs). The first base export, nearly a full one, warms bytecode and the
page cache before any full re-export is timed. Each update line also says how many of the
target's ``.npy`` files the update kept (same inode) and its phases (``export.json``'s
``timings``). The machine may be shared and noisy: compare the ratios, each computed from runs
of this one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
REPO = SCRIPT.parents[1]
sys.path.insert(0, str(SCRIPT.parent))
from export import dataset_ids, loose_copy, short, stats  # noqa: E402 - benchmarks/export.py

DEFAULT_CACHE = Path.home() / ".cache" / "guideloom-bench"
REAL_SCAN = "2000x3200"
VIEW = "pointcloud-op10"
CHANGED_FIELD = "pointcloud/op10/z"
RESULT = "RESULT "
CHILD_TIMEOUT_S = 3600
ADD_GOAL, CARRY_GOAL = 0.1, 0.85
DIGEST_GOAL, VERIFY_GOAL, NOOP_GOAL_S = 0.03, 0.8, 2.0
NOOP_VIEW, NOOP_SCAN = "force-curve", (20, 32)
STORAGE_FIELDS = ("z", "luminescence")
COPY_BLOCK = 8 << 20
Goal = tuple[str, str, str, bool | None]


# --- children (each runs in a fresh interpreter) -------------------------------------------
def storage_record(rec: dict) -> dict:
    """One stream element per scan pixel: its height and luminescence."""
    return {"z": rec["pointcloud_op10_z"], "luminescence": rec["pointcloud_op10_luminescence"]}


def child_export(a: dict) -> dict:
    """One export (``update`` or a full one) of ``a["ids"]`` to ``a["out"]`` in ``a["kind"]``."""
    if a.get("cache"):
        os.environ["GUIDELOOM_CACHE_DIR"] = a["cache"]
    import numpy as np

    import guideloom

    if a.get("no_digests"):  # measurement only: the export's digests replaced by a constant
        import guideloom.read.content as content

        os.environ["GUIDELOOM_INPUT_HOLD_MB"] = "0"  # no input read into memory to be hashed
        content.content_digest = lambda loc: content.Hashed("0" * 64, 0)

    kwargs: dict[str, Any] = {}
    if a["kind"] == "npz":
        kwargs["format_options"] = {"compressed": False}
    elif a["kind"] == "zarr":
        kwargs["format_options"] = {"compressor": "lz4"}
    elif a["kind"] == "storage":
        dtype = np.dtype([(name, "<f4") for name in STORAGE_FIELDS])
        storage = guideloom.StreamStorage(a["out"], guideloom.StreamNumpyFormat(dtype))
        kwargs["format_options"] = {"storage": storage}
        kwargs["record_transform"] = storage_record
    _sync()
    if a["update"] and os.path.isdir(a["out"]):  # the previous generation, read from the disk
        _evict([a["out"]])
    if a.get("evict"):  # the inputs too (verify_inputs reads them from the disk)
        _evict(a["evict"])
    if a.get("verify_inputs"):
        kwargs["verify_inputs"] = True
    cpu0 = _cpu_seconds()
    t0 = time.perf_counter()
    try:
        result = guideloom.export(a.get("view", VIEW), a["out"], kind=a["kind"],
                                  data_dir=a["data"], sim_ids=a["ids"], update=a["update"],
                                  overwrite=not a["update"], client=a.get("client"),
                                  show_progress=False, quiet=True, **kwargs)
    except guideloom.UpdateRefusedError as exc:
        return {"refused": str(exc)}
    seconds = time.perf_counter() - t0
    cpu = _cpu_seconds() - cpu0
    manifest = result.manifest
    parts = result.summaries
    carried = sum(int(s.get("carried", 0)) for s in parts)
    row_bytes = sum(int(np.prod(f["shape"], dtype=np.int64)) * np.dtype(f["dtype"]).itemsize
                    for f in manifest["fields"].values()
                    if isinstance(f.get("shape"), list) and isinstance(f.get("dtype"), str))
    return {"export_s": seconds, "update": result.update, "up_to_date": result.up_to_date,
            "decoded": sum(len(s["written"]) for s in parts) - carried, "carried": carried,
            "carried_bytes": carried * row_bytes, "row_bytes": row_bytes,
            "decode_s": sum(float(s.get("read_transform_s", 0.0)) for s in parts),
            "partitions": len(parts), "count": int(manifest["count"]),
            "generation": (manifest.get("generations") or [{}])[-1],
            "mode": manifest["placement"]["mode"], "timings": manifest["timings"],
            "cpu_s": cpu,
            "input_hash_s": sum(float(s.get("input_hash_s", 0.0)) for s in parts),
            "input_hash_cpu_s": sum(float(s.get("input_hash_cpu_s", 0.0)) for s in parts),
            "input_hash_wait_s": sum(float(s.get("input_hash_wait_s", 0.0)) for s in parts),
            **_plan_facts(result.update_plan)}


def _cpu_seconds() -> float:
    """CPU seconds (user and system) of this process and of its children it waited for (the
    forked export workers; a cluster's workers are not counted)."""
    import resource

    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


def _plan_facts(plan: Any) -> dict:
    """What an update's plan re-hashed: inputs, bytes, seconds."""
    if plan is None:
        return {"rehashed": 0, "hashed_bytes": 0, "hash_s": 0.0}
    return {"rehashed": len(plan.rehashed), "hashed_bytes": plan.hashed_bytes,
            "hash_s": plan.hash_s}


def child_read(a: dict) -> dict:
    """This disk's sequential read rate: ``a["sources"]`` read whole with 8 MiB ``pread``s
    after their pages were dropped."""
    _evict(a["sources"])
    buf = bytearray(COPY_BLOCK)
    total, t0 = 0, time.perf_counter()
    for path in a["sources"]:
        fd = os.open(path, os.O_RDONLY)
        try:
            while True:
                got = os.readv(fd, [buf])
                if got <= 0:
                    break
                total += got
        finally:
            os.close(fd)
    return {"bytes": total, "seconds": time.perf_counter() - t0}


def child_copy(a: dict) -> dict:
    """This disk's copy rate: ``a["sources"]`` copied into ``a["out"]`` with
    ``copy_file_range`` and with plain reads and writes, each copy fsynced."""
    out = Path(a["out"])
    out.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"bytes": sum(os.path.getsize(p) for p in a["sources"])}
    for how in ("copy_file_range", "read_write", "direct"):
        _sync()
        _evict(a["sources"])  # read from the disk, as an update's carried rows are
        t0 = time.perf_counter()
        for k, src in enumerate(a["sources"]):
            dst = out / f"copy-{k}"
            if how == "direct":
                _direct_copy(src, dst)
                continue
            with open(src, "rb") as fin, open(dst, "wb") as fout:
                (_kernel_copy if how == "copy_file_range" else _plain_copy)(
                    fin.fileno(), fout.fileno(), os.path.getsize(src))
                os.fsync(fout.fileno())
        res[f"{how}_s"] = time.perf_counter() - t0
        shutil.rmtree(out)
        out.mkdir()
    shutil.rmtree(out)
    return res


def _direct_copy(src: str, dst: Path) -> None:
    """The disk's floor: the file copied with ``O_DIRECT`` on both sides in 32 MiB aligned
    steps (past the page cache; the tail that is not a whole page, buffered), fsynced."""
    import mmap

    size = os.path.getsize(src)
    whole = size - size % 4096
    fin = os.open(src, os.O_RDONLY | os.O_DIRECT)
    fout = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT)
    buf = mmap.mmap(-1, 32 << 20)
    try:
        view = memoryview(buf)
        done = 0
        while done < whole:
            n = os.preadv(fin, [view[:min(len(buf), whole - done)]], done)
            os.pwrite(fout, view[:n], done)
            done += n
        view.release()
    finally:
        buf.close()
        os.close(fin)
        os.close(fout)
    if size > whole:
        with open(src, "rb") as fi, open(dst, "r+b") as fo:
            fi.seek(whole)
            fo.seek(whole)
            fo.write(fi.read())
    fd = os.open(dst, os.O_WRONLY)
    os.fsync(fd)
    os.close(fd)


def _kernel_copy(src: int, dst: int, size: int) -> None:
    done = 0
    while done < size:
        n = os.copy_file_range(src, dst, size - done, done, done)
        if n == 0:
            raise OSError(f"the source ended {size - done} bytes early")
        done += n


def _plain_copy(src: int, dst: int, size: int) -> None:
    buf = bytearray(COPY_BLOCK)
    view = memoryview(buf)
    copied = 0
    while copied < size:
        n = os.readv(src, [buf])
        if n == 0:
            raise OSError(f"the source ended {size - copied} bytes early")
        done = 0
        while done < n:
            done += os.write(dst, view[done:n])
        copied += n


def child_compare(a: dict) -> dict:
    """Rows of the npy export ``a["ours"]`` vs ``a["ref"]`` (matched by id): the ids whose
    bytes differ and the ids the reference does not have."""
    import numpy as np

    ours, ref = Path(a["ours"]), Path(a["ref"])
    ids = [str(i) for i in np.load(ours / "sim_ids.npy")]
    where = {str(i): j for j, i in enumerate(np.load(ref / "sim_ids.npy"))}
    differ, missing = set(), [i for i in ids if i not in where]
    names = sorted(p.name for p in ours.glob("*.npy") if p.name != "sim_ids.npy")
    if names != sorted(p.name for p in ref.glob("*.npy") if p.name != "sim_ids.npy"):
        return {"rows": len(ids), "error": f"other files: {names}"}
    for name in names:
        x, y = np.load(ours / name, mmap_mode="r"), np.load(ref / name, mmap_mode="r")
        if x.dtype != y.dtype or x.shape[1:] != y.shape[1:]:
            return {"rows": len(ids), "error": f"{name}: {x.dtype}{x.shape} vs {y.dtype}{y.shape}"}
        for k, sim_id in enumerate(ids):
            if sim_id in where and x[k].tobytes() != y[where[sim_id]].tobytes():
                differ.add(sim_id)
    return {"rows": len(ids), "differ": sorted(differ, key=int), "missing": missing}


def _sync() -> None:
    """Flush every dirty page first, so no run pays for the previous run's writeback."""
    if hasattr(os, "sync"):
        os.sync()


def _evict(paths: list[str] | list[Path]) -> None:
    """Drop ``paths`` (files, or every file under a folder) from the page cache, after
    :func:`_sync`: the carried rows and the copy baseline are both read from the disk, not one
    from memory and the other from the disk (a full export writes its rows with direct I/O,
    an update's copies go through the cache)."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return
    files: list[Path] = []
    for path in map(Path, paths):
        files += [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
    for path in files:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


RECIPE_FUNCTIONS, RECIPE_GOAL_S = 50, 0.050


def recipe_module(n: int) -> str:
    """A user module whose transform reaches ``n`` functions of its own (a chain of helpers,
    each with a docstring, a constant, a config value and numpy), as the recipe benchmark's."""
    lines = ['"""Generated: a transform reaching many helpers."""', "import types",
             "import numpy as np", "", "CFG = types.SimpleNamespace(scale=2.0, offset=0.5)",
             "LIMITS = {'low': -1.0, 'high': 1.0}", ""]
    for i in range(n - 1):
        lines += [f"def helper_{i}(x):", f'    """Step {i} of the chain."""',
                  f"    y = np.clip(x * CFG.scale + {i}, LIMITS['low'], LIMITS['high'])",
                  f"    return helper_{i + 1}(y) if x.size else y", ""]
    lines += [f"def helper_{n - 1}(x):", "    return x - CFG.offset", "",
              "def transform(rec):",
              "    return {'force': helper_0(np.asarray(rec['force_data']))}"]
    return "\n".join(lines) + "\n"


def child_recipe(a: dict) -> dict:
    """The recipe (fingerprint) of a transform reaching ``a["functions"]`` functions of a user
    module: the first call in a fresh process (module parse and package lookups included),
    then ``a["reps"]`` more."""
    folder = Path(tempfile.mkdtemp(prefix="recipe-bench-"))
    try:
        (folder / "recipe_bench_mod.py").write_text(recipe_module(a["functions"]))
        sys.path.insert(0, str(folder))
        import recipe_bench_mod

        from guideloom.export.recipe import transform_recipe

        t0 = time.perf_counter()
        recipe = transform_recipe(recipe_bench_mod.transform)
        first = time.perf_counter() - t0
        again = []
        for _ in range(a["reps"]):
            t0 = time.perf_counter()
            transform_recipe(recipe_bench_mod.transform)
            again.append(time.perf_counter() - t0)
        code = sum(1 for k in recipe.components if k.startswith("code "))
        return {"first_s": first, "again_s": again, "code": code,
                "components": len(recipe.components)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


CHILDREN = {"export": child_export, "copy": child_copy, "compare": child_compare,
            "read": child_read, "recipe": child_recipe}


# --- the parent ----------------------------------------------------------------------------
class Child:
    """Runs children in fresh processes and keeps one command line per kind for the report."""

    def __init__(self, env: dict[str, str], cwd: Path):
        self.env, self.cwd = env, cwd
        self.commands: dict[str, list[str]] = {}

    def command(self, name: str, args: dict) -> list[str]:
        return [sys.executable, str(SCRIPT), "--child", name, json.dumps(args)]

    def run(self, name: str, args: dict, label: str | None = None) -> dict:
        """The child's result; raises with its stderr on failure."""
        cmd = self.command(name, args)
        self.commands.setdefault(label or name, cmd)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=self.env, cwd=self.cwd,
                              timeout=CHILD_TIMEOUT_S)
        lines = [x for x in proc.stdout.splitlines() if x.startswith(RESULT)]
        if proc.returncode != 0 or not lines:
            tail = "\n".join((proc.stderr or proc.stdout).splitlines()[-20:])
            raise RuntimeError(f"child {name} failed (exit {proc.returncode}):\n{tail}")
        return json.loads(lines[-1][len(RESULT):])


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def ratio_text(values: list[float]) -> str:
    """``median [min-max]`` of ratios."""
    return stats(values, fmt="{:.2f}")


def rate_text(values: list[float]) -> str:
    """``median [min-max]`` of bytes per second, in MB/s."""
    return stats(values, 1e-6, "{:.0f}")


def spread(ids: list[int], k: int) -> list[int]:
    """``k`` ids spread evenly over ``ids`` (one: the middle one), never the last."""
    n = len(ids)
    return [ids[min(n - 2, int((j + 0.5) * n / k))] for j in range(k)]


def make_variant(root: Path, release: Path, loose: Path, changed: list[int]) -> Path:
    """A data directory of hard links to ``loose``'s files, with the index table and manifest
    of ``release``; the files of ``changed`` are copies with one chunk of
    ``CHANGED_FIELD`` rewritten."""
    import h5py

    (root / "h5").mkdir(parents=True)
    for name in ("metadata.json", "process_parameters.csv"):
        shutil.copyfile(release / name, root / name)
    for path in loose.glob("*.h5"):
        os.link(path, root / "h5" / path.name)
    for sim_id in changed:
        path = root / "h5" / f"{sim_id:04d}.h5"
        copy = path.with_suffix(".copy")
        shutil.copyfile(path, copy)
        with h5py.File(copy, "r+") as f:
            data = f[CHANGED_FIELD]
            n = min(len(data), 16)
            data[:n] = data[:n] + 1.0
        os.replace(copy, path)
    return root


def check_counts(runs: list[dict], expect: dict[str, int]) -> str:
    """What ``result.update`` and ``export.json``'s last generation say of every run, against
    the counts ``expect``ed: empty when they agree, else the disagreements."""
    problems = sorted({f"{src} says {what} {got.get(what)}" for r in runs
                       for src, got in (("result.update", r["update"] or {}),
                                        ("export.json", r["generation"]))
                       for what, n in expect.items() if got.get(what) != n})
    return "" if not problems else f" (expected {expect}: {'; '.join(problems)})"


def decoded_goal(runs: list[dict], want: int) -> tuple[str, bool]:
    """The experiments decoded in every run (from the partition summaries) and whether each
    run decoded ``want``."""
    got = sorted({r["decoded"] for r in runs})
    ok = got == [want]
    return f"{'/'.join(map(str, got))} (goal {want}: {verdict(ok)})", ok


def ratio_goal(name: str, runs: list[dict], full: list[float]) -> Goal:
    """The add-1% goal: the update's time over the full re-export's, run by run."""
    times = [r["export_s"] / f for r, f in zip(runs, full, strict=False)]
    med = statistics.median(times)
    return (f"{name}: x full re-export", f"<= {ADD_GOAL}x",
            f"{med:.3f}x [{min(times):.3f}-{max(times):.3f}]", med <= ADD_GOAL)


def print_update(name: str, label: str, runs: list[dict], full: list[float],
                 expect: dict[str, int], copies: list[dict] | None = None) -> list[Goal]:
    """The lines of one update case (``label``; ``name`` in the summary), and its goals:
    the experiments decoded, then the time ratio (an addition at the end) or the carry
    rate against the disk's copy rate (``copies``)."""
    expect = {"added": 0, "removed": 0, "changed": 0, **expect}
    want = expect["added"] + expect["changed"]
    secs = [r["export_s"] for r in runs]
    times = [u / f for u, f in zip(secs, full, strict=False)]
    decoded, ok_decoded = decoded_goal(runs, want)
    mb = statistics.median(r["carried_bytes"] for r in runs) / 1e6
    carried = f"{runs[-1]['carried']} rows" + (f", {mb:.1f} MB" if mb else "")
    modes = "/".join(sorted({r["mode"] for r in runs}))
    job = stats([r["timings"]["total_s"] for r in runs])
    print(f"  {label}")
    print(f"    update {stats(secs)} s ({modes}; the job's own total_s {job}) = "
          f"{ratio_text(times)}x the full re-export; decoded {decoded}"
          f"{check_counts(runs, expect)}; carried {carried}; {runs[-1]['partitions']} "
          "partitions" + (f"; {runs[-1]['reused']}" if "reused" in runs[-1] else ""))
    t = runs[-1]["timings"]
    print("    its phases (last run): " + ", ".join(
        f"{key[:-2]} {t[key]:.3f}" for key in
        ("plan_s", "compute_s", "read_transform_s", "write_s", "finalize_s", "checksums_s",
         "publish_s") if key in t) + " s")
    goals = [(f"{name}: decoded", f"= {want}", decoded.split(" ")[0], ok_decoded)]
    if copies is None:
        return [*goals, ratio_goal(name, runs, full)]
    net = [r["carried_bytes"] / max(r["export_s"] - r["decode_s"], 1e-9) for r in runs]
    gross = [r["carried_bytes"] / r["export_s"] for r in runs]
    kernel = [c["bytes"] / c["copy_file_range_s"] for c in copies]
    plain = [c["bytes"] / c["read_write_s"] for c in copies]
    direct = [c["bytes"] / c["direct_s"] for c in copies]
    share = [x / k for x, k in zip(net, kernel, strict=False)]
    share_plain = [x / p for x, p in zip(net, plain, strict=False)]
    share_direct = [x / d for x, d in zip(net, direct, strict=False)]
    share_gross = [x / k for x, k in zip(gross, kernel, strict=False)]
    ok = statistics.median(share) >= CARRY_GOAL
    print(f"    carry rate {rate_text(net)} MB/s (bytes carried / (update - decode "
          f"{stats([r['decode_s'] for r in runs])} s)) = {ratio_text(share)}x copy_file_range's, "
          f"{ratio_text(share_plain)}x read+write's, {ratio_text(share_direct)}x the direct "
          f"copy's (goal >= {CARRY_GOAL}x copy_file_range: "
          f"{verdict(ok)}); bytes carried / update time {rate_text(gross)} MB/s = "
          f"{ratio_text(share_gross)}x")
    return [*goals, (f"{name}: carry / copy rate", f">= {CARRY_GOAL}x",
                     f"{statistics.median(share):.2f}x [{min(share):.2f}-{max(share):.2f}]",
                     ok)]


def inodes(target: Path) -> dict[str, int]:
    """The inode of each data file of an npy export."""
    return {p.name: p.stat().st_ino for p in target.glob("*.npy") if p.name != "sim_ids.npy"}


def reuse_text(before: dict[str, int], after: dict[str, int]) -> str:
    """How many of the export's data files the update kept (same inode) or made anew."""
    kept = sum(1 for name, ino in after.items() if before.get(name) == ino)
    return f"{kept} of {len(after)} .npy files kept (same inode), {len(after) - kept} new"


def compared(child: Child, ours: Path, ref: Path, expect_differ: list[int]) -> str:
    """Whether the target's rows equal the reference's (``expect_differ``: ids that must
    differ)."""
    c = child.run("compare", {"ours": str(ours), "ref": str(ref)})
    if "error" in c:
        return f"NOT comparable: {c['error']}"
    want = [str(i) for i in expect_differ]
    if c["missing"]:
        return f"ids not in the full re-export: {c['missing']}"
    if c["differ"] == want:
        same = c["rows"] - len(want)
        return f"{same} rows identical" + (f", the {len(want)} changed differ" if want else "")
    return f"DIFFERENT rows {c['differ']} (expected {want or 'none'})"


def run_npy(child: Child, args: argparse.Namespace, work: Path, v0: Path, v1: Path,
            ids: list[int], k: int, mid: list[int]) -> list[Goal]:
    reps, n = args.reps, len(ids)
    print(f"\n1. NPY: {VIEW} of {n} experiments, {reps} runs, export call in a fresh process, "
          "median [min-max]")
    base = {"kind": "npy", "client": args.client}
    head = ids[:-k]
    rest = [i for i in ids if i not in mid]
    # per target: its base selection, then its steps: (summary name, label, selection, data,
    # what the update must count, the ids whose rows differ from the full export's or "reset")
    cases = [
        ("end", head, [("npy add 1% at end", "add 1% at the end", ids, v0, {"added": k}, []),
                       ("npy remove 1% at end", "remove 1% at the end", head, v0,
                        {"removed": k}, [])]),
        ("mid", rest, [("npy insert 1% mid", "insert 1% in the middle", ids, v0,
                        {"added": k}, []),
                       ("npy remove 1% mid", "remove 1% in the middle", rest, v0,
                        {"removed": k}, [])]),
        ("chg", ids, [("npy change 1%", "change 1% (a member's bytes, v0 -> v1)", ids, v1,
                       {"changed": k}, mid),
                      ("", "reset", ids, v0, {"changed": k}, "reset")]),
    ]
    # the first base export (nearly a full one) warms bytecode and the page cache: no full
    # re-export is counted cold
    first = work / "npy-end"
    child.run("export", {**base, "data": str(v0), "ids": head, "out": str(first),
                         "update": False}, "base")
    full_dir = work / "npy-full"
    full, copies = [], []
    for _ in range(reps):
        full.append(child.run("export", {**base, "data": str(v0), "ids": ids,
                                         "out": str(full_dir), "update": False}, "full"))
        sources = sorted(str(p) for p in full_dir.glob("*.npy"))
        copies.append(child.run("copy", {"sources": sources, "out": str(work / "copy")}))
    full_s = [r["export_s"] for r in full]
    print(f"  full re-export ({'/'.join(sorted({r['mode'] for r in full}))}): {stats(full_s)} s"
          f" (the job's own total_s {stats([r['timings']['total_s'] for r in full])}), "
          f"{full[-1]['count']} rows of {full[-1]['row_bytes'] / 1e6:.2f} MB; decoded "
          f"{full[-1]['decoded']}")
    kernel = rate_text([c["bytes"] / c["copy_file_range_s"] for c in copies])
    plain = rate_text([c["bytes"] / c["read_write_s"] for c in copies])
    direct = rate_text([c["bytes"] / c["direct_s"] for c in copies])
    print(f"  disk copy rate, the full export's .npy files ({copies[0]['bytes'] / 1e6:.0f} MB) "
          f"fsynced: copy_file_range {kernel} MB/s; read+write ({COPY_BLOCK >> 20} MiB blocks) "
          f"{plain} MB/s; direct I/O (32 MiB blocks, the floor) {direct} MB/s")
    goals: list[Goal] = []
    checks = []
    for name, selection, steps in cases:
        target = work / f"npy-{name}"
        if target != first:
            child.run("export", {**base, "data": str(v0), "ids": selection,
                                 "out": str(target), "update": False}, "base")
        runs: dict[str, list[dict]] = {label: [] for _, label, *_ in steps}
        for rep in range(reps):
            for _, label, sel, src, _expect, differ in steps:
                before = inodes(target)
                r = child.run("export", {**base, "data": str(src), "ids": sel,
                                         "out": str(target), "update": True}, "update")
                r["reused"] = reuse_text(before, inodes(target))
                runs[label].append(r)
                if rep == reps - 1 and differ != "reset":
                    checks.append((label, compared(child, target, full_dir, differ)))
        for short_name, label, _sel, _src, expect, differ in steps:
            if differ != "reset":
                goals += print_update(short_name, f"{label} ({k} of {n})", runs[label],
                                      full_s, expect, None if "add" in short_name else copies)
        shutil.rmtree(target, ignore_errors=True)
    print("  rows of each update (last run) vs the full re-export's, id by id:")
    for label, text in checks:
        print(f"    {label}: {text}")
    shutil.rmtree(full_dir, ignore_errors=True)
    return goals


def run_formats(child: Child, args: argparse.Namespace, work: Path, v0: Path, ids: list[int],
                k: int) -> list[Goal]:
    print(f"\n2. ADD 1% ({k} of {len(ids)}) AT THE END, other formats, {args.reps} runs")
    goals: list[Goal] = []
    for kind in ("npz", "zarr", "storage"):
        base = {"kind": kind, "client": args.client, "data": str(v0)}
        target, full_dir = work / f"{kind}-end", work / f"{kind}-full"
        child.run("export", {**base, "ids": ids[:-k], "out": str(target), "update": False},
                  "base")
        full, runs = [], []
        refused = None
        for _ in range(args.reps):  # the update first: a refused one costs no full export
            r = child.run("export", {**base, "ids": ids, "out": str(target), "update": True},
                          "update")
            if "refused" in r:
                refused = r["refused"]
                break
            runs.append(r)
            full.append(child.run("export", {**base, "ids": ids, "out": str(full_dir),
                                             "update": False}, "full"))
            child.run("export", {**base, "ids": ids[:-k], "out": str(target), "update": True},
                      "update")  # the reset: back to the base selection
        for folder in (target, full_dir):
            shutil.rmtree(folder, ignore_errors=True)
        if refused is not None:
            print(f"  {kind}: update refused, skipped: {refused}")
            goals.append((f"{kind} add 1% at end", f"<= {ADD_GOAL}x", "refused", None))
            continue
        full_s = [r["export_s"] for r in full]
        print(f"  {kind}: full re-export ({'/'.join(sorted({r['mode'] for r in full}))}) "
              f"{stats(full_s)} s")
        goals += print_update(f"{kind} add 1% at end", f"{kind}: add 1% at the end", runs,
                              full_s, {"added": k})
    return goals


class Server:
    """``python -m tests.dataverse_server --static SITE`` as a process (stopped by its PID)."""

    def __init__(self, site: Path, latency: float, bandwidth: float, env: dict[str, str],
                 cwd: Path):
        self.cmd = [sys.executable, "-m", "tests.dataverse_server", "--static", str(site),
                    "--latency", str(latency), "--bandwidth", str(bandwidth), "--validators"]
        self.proc = subprocess.Popen(self.cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line:
            self.stop()
            raise RuntimeError(f"{' '.join(self.cmd)} printed no URL")
        self.url = json.loads(line)["url"].rstrip("/")
        if not self.url.startswith("http://127.0.0.1"):
            self.stop()
            raise RuntimeError(f"the test server listens on {self.url}, not 127.0.0.1")

    def counts(self, reset: bool = False) -> tuple[int, int]:
        """Requests for the archives and bytes of them sent since the last reset."""
        q = "?reset=1" if reset else ""
        with urllib.request.urlopen(f"{self.url}/_control/counts{q}", timeout=30) as resp:
            c = json.loads(resp.read())
        return (sum(n for p, n in c["requests"].items() if p.endswith(".zip")),
                sum(n for p, n in c["bytes"].items() if p.endswith(".zip")))

    def stop(self) -> None:
        self.proc.terminate()  # our own child, by its PID
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)


def run_remote(child: Child, args: argparse.Namespace, work: Path, release: Path,
               ids: list[int], k: int) -> list[Goal]:
    site = work / "site" / release.name
    site.mkdir(parents=True)
    for path in release.iterdir():
        if path.is_file() and not path.name.startswith("."):
            os.link(path, site / path.name)
    server = Server(site.parent, args.latency, args.bandwidth, child.env, work)
    url = f"{server.url}/{release.name}"
    cache = work / "remote-cache"
    base = {"kind": "npy", "client": args.client, "data": url, "cache": str(cache)}
    target, full_dir = work / "remote-end", work / "remote-full"
    print(f"\n3. REMOTE RELEASE, add 1% ({k} of {len(ids)}) at the end, npy target, "
          f"{args.reps} runs")
    print(f"  server: {short(server.cmd)} (at {server.url}; {args.latency * 1e3:.0f} ms per "
          f"answer, {args.bandwidth / 1e6:.0f} MB/s shared)")
    try:
        child.run("export", {**base, "ids": ids[:-k], "out": str(target), "update": False},
                  "remote base")
        full, runs, sent_full, sent_update = [], [], [], []
        check = ""
        for rep in range(args.reps):
            server.counts(reset=True)
            full.append(child.run("export", {**base, "ids": ids, "out": str(full_dir),
                                             "update": False}, "remote full"))
            sent_full.append(server.counts(reset=True))
            runs.append(child.run("export", {**base, "ids": ids, "out": str(target),
                                             "update": True}, "remote update"))
            sent_update.append(server.counts(reset=True))
            if rep == args.reps - 1:
                check = compared(child, target, full_dir, [])
            child.run("export", {**base, "ids": ids[:-k], "out": str(target), "update": True},
                      "remote update")  # the reset
    finally:
        server.stop()
        for folder in (target, full_dir):
            shutil.rmtree(folder, ignore_errors=True)
    full_s = [r["export_s"] for r in full]
    print(f"  full re-export ({'/'.join(sorted({r['mode'] for r in full}))}): {stats(full_s)} "
          f"s; {sent_full[-1][0]} archive requests, {sent_full[-1][1] / 1e6:.1f} MB sent")
    goals = print_update("remote add 1% at end", "remote: add 1% at the end", runs, full_s,
                         {"added": k})
    print(f"    the server sent {sent_update[-1][0]} archive requests, "
          f"{sent_update[-1][1] / 1e6:.2f} MB for the update (full re-export: "
          f"{sent_full[-1][1] / 1e6:.1f} MB); rows vs the full re-export's: {check}")
    return goals


def _blake3_floor_s(n_bytes: int) -> float:
    """CPU seconds BLAKE3 (the content digest's hash) takes for ``n_bytes`` held in memory, on
    one core: the best of 3 passes over 64 MiB, scaled."""
    import blake3

    block = os.urandom(64 << 20)
    best = float("inf")
    for _ in range(3):
        t0 = time.thread_time()
        blake3.blake3(block).digest()
        best = min(best, time.thread_time() - t0)
    return best * n_bytes / len(block)


def fresh_dir(work: Path, name: str) -> Path:
    """An empty folder ``work/name`` (emptied if it was there)."""
    folder = work / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def run_inputs(child: Child, args: argparse.Namespace, work: Path, v0: Path, ids: list[int],
               cache: Path) -> list[Goal]:
    """Section 4: what proving the inputs unchanged costs (see the module's docstring)."""
    reps = args.reps
    base = {"kind": "npy", "client": args.client, "data": str(v0), "ids": ids}
    print(f"\n4. INPUT IDENTITY, {VIEW} of {len(ids)} experiments, {reps} runs")
    full_dir = work / "inputs-full"
    child.run("export", {**base, "out": str(full_dir), "update": False}, "base")  # warm
    # Each run gets an empty guideloom cache: a digest this user recorded of the same input in
    # the same state is reused, not re-hashed (a warm cache once made this line read 0.0%).
    # The goal's figure is the wall-clock cost at the placement a user gets (--client, else the
    # default); the CPU share is counted in-process, where getrusage sees the hashing threads.
    goals: list[Goal] = []
    for label, client in (("wall clock", args.client), ("CPU", "sync")):
        timed = {**base, "client": client, "out": str(full_dir), "update": False}
        with_d, without = [], []
        for rep in range(reps):  # interleaved: the machine's drift hits both alike
            without.append(child.run("export", {
                **timed, "no_digests": True,
                "cache": str(fresh_dir(work, f"cache-off-{rep}"))}, "full (no digests)"))
            with_d.append(child.run("export", {
                **timed, "cache": str(fresh_dir(work, f"cache-on-{rep}"))}, "full"))
        if any(r["input_hash_cpu_s"] <= 0 for r in with_d):
            print("  WARNING: a run with digests hashed nothing: its figures are no measurement")
        on, off = [r["export_s"] for r in with_d], [r["export_s"] for r in without]
        cost = [a / b - 1 for a, b in zip(on, off, strict=True)]
        print(f"  placement {'/'.join(sorted({r['mode'] for r in with_d}))}, an empty cache "
              f"each run: full re-export with digests {stats(on)} s, without {stats(off)} s: "
              f"wall-clock cost {statistics.median(cost):+.1%} [{min(cost):+.1%} to "
              f"{max(cost):+.1%}] (min vs min {min(on) / min(off) - 1:+.1%})")
        if label == "wall clock":
            goals.append(("digests' cost of a full export (wall)", f"<= {DIGEST_GOAL:.0%}",
                          f"{statistics.median(cost):+.1%}",
                          statistics.median(cost) <= DIGEST_GOAL))
            continue
        cpu_cost = [a["cpu_s"] / b["cpu_s"] - 1 for a, b in zip(with_d, without, strict=True)]
        print(f"  CPU: with digests {stats([r['cpu_s'] for r in with_d])} CPU-s, without "
              f"{stats([r['cpu_s'] for r in without])} CPU-s: CPU cost "
              f"{statistics.median(cpu_cost):+.1%} [{min(cpu_cost):+.1%} to "
              f"{max(cpu_cost):+.1%}] (min vs min "
              f"{min(r['cpu_s'] for r in with_d) / min(r['cpu_s'] for r in without) - 1:+.1%})")
        cpu_share = [r["input_hash_cpu_s"] / r["cpu_s"] for r in with_d if r["cpu_s"] > 0]
        input_bytes = sum(os.path.getsize(v0 / "h5" / f"{i:04d}.h5") for i in ids)  # hashed
        floor = _blake3_floor_s(input_bytes)
        print(f"  reading and hashing the inputs: {stats([r['input_hash_s'] for r in with_d])}"
              f" s, {stats([r['input_hash_cpu_s'] for r in with_d])} CPU-s of the "
              f"export's {stats([r['cpu_s'] for r in with_d])} CPU-s = "
              f"{statistics.median(cpu_share):.1%} [{min(cpu_share):.1%}-"
              f"{max(cpu_share):.1%}]; BLAKE3 alone on the same "
              f"{input_bytes / 1e6:.0f} MB in memory, one core: "
              f"{floor:.3f} CPU-s = {floor / statistics.median(r['cpu_s'] for r in with_d):.1%}"
              f" (the floor of any full-content digest at this hash's speed); the partitions "
              f"waited {stats([r['input_hash_wait_s'] for r in with_d])} s for it")
        goals.append(("digests' CPU share (in-process)", "-",
                      f"{statistics.median(cpu_share):.1%}", None))
        goals.append(("digests' CPU cost, on vs off (in-process)", "-",
                      f"{statistics.median(cpu_cost):+.1%}", None))
    sources = sorted(str(v0 / "h5" / f"{i:04d}.h5") for i in ids)
    reads, verifies = [], []
    for _ in range(reps):
        reads.append(child.run("read", {"sources": sources}))
        verifies.append(child.run("export", {**base, "out": str(full_dir), "update": True,
                                             "verify_inputs": True, "evict": sources},
                                  "verify_inputs"))
    read_rate = [r["bytes"] / r["seconds"] for r in reads]
    hash_rate = [r["hashed_bytes"] / r["hash_s"] for r in verifies if r["hash_s"] > 0]
    ratios = [h / statistics.median(read_rate) for h in hash_rate]
    ok = bool(ratios) and statistics.median(ratios) >= VERIFY_GOAL
    print(f"  this disk's sequential read rate, the inputs ({reads[0]['bytes'] / 1e6:.0f} MB, "
          f"cold): {rate_text(read_rate)} MB/s")
    print(f"  verify_inputs=True on the up-to-date export (cold): re-hashed "
          f"{verifies[-1]['rehashed']} inputs, {verifies[-1]['hashed_bytes'] / 1e6:.0f} MB at "
          f"{rate_text(hash_rate)} MB/s = {ratio_text(ratios)}x the read rate (goal >= "
          f"{VERIFY_GOAL}); the update took {stats([r['export_s'] for r in verifies])} s, "
          f"up to date: {all(r['up_to_date'] for r in verifies)}")
    goals.append(("verify_inputs hash rate / read rate", f">= {VERIFY_GOAL}",
                  ratio_text(ratios), ok))
    shutil.rmtree(full_dir, ignore_errors=True)
    from guideloom.demo import cached_demo_data

    small = cached_demo_data(cache, args.noop_n, NOOP_SCAN, "loose")
    every = dataset_ids(small)[0]
    noop = {"kind": "npz", "client": args.client, "data": str(small), "ids": every,
            "view": NOOP_VIEW}
    target = work / "noop"
    child.run("export", {**noop, "out": str(target), "update": False}, "noop base")
    runs = [child.run("export", {**noop, "out": str(target), "update": True}, "noop update")
            for _ in range(reps)]
    seconds = [r["export_s"] for r in runs]
    print(f"  no-op update of {len(every)} small loose experiments ({NOOP_VIEW}, "
          f"{NOOP_SCAN[0]}x{NOOP_SCAN[1]} scans): {stats(seconds)} s (goal <= {NOOP_GOAL_S} "
          f"s), up to date: {all(r['up_to_date'] for r in runs)}, re-hashed "
          f"{[r['rehashed'] for r in runs]} inputs")
    goals.append((f"no-op update of {len(every)}", f"<= {NOOP_GOAL_S} s",
                  stats(seconds), statistics.median(seconds) <= NOOP_GOAL_S))
    shutil.rmtree(target, ignore_errors=True)
    return goals


def run_recipe(child: Child, args: argparse.Namespace) -> list[Goal]:
    """Section 5: the fingerprint of a transform reaching 50 functions of the user's own."""
    print(f"\n5. RECIPE: the fingerprint of a transform reaching {RECIPE_FUNCTIONS} functions "
          f"of a user module, {args.reps} fresh processes")
    runs = [child.run("recipe", {"functions": RECIPE_FUNCTIONS, "reps": 5}, label="recipe")
            for _ in range(args.reps)]
    first = [r["first_s"] * 1e3 for r in runs]
    again = [t * 1e3 for r in runs for t in r["again_s"]]
    print(f"  {runs[0]['code']} code components, {runs[0]['components']} in all; first call in "
          f"a process {stats(first, fmt='{:.1f}')} ms, later calls {stats(again, fmt='{:.1f}')} "
          "ms")
    med = statistics.median(first)
    return [(f"recipe of {RECIPE_FUNCTIONS} functions (ms)", f"<= {RECIPE_GOAL_S * 1e3:.0f}",
             f"{med:.1f} [{min(first):.1f}-{max(first):.1f}]", med <= RECIPE_GOAL_S * 1e3)]


def print_summary(goals: list[Goal]) -> None:
    print("\nSUMMARY (goal, measured median [min-max], verdict)")
    for label, goal, measured, ok in goals:
        print(f"  {label:40s} {goal:>9s} {measured:>24s}  {'-' if ok is None else verdict(ok)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="24 experiments, scans 100x160, 2 runs (a smoke run)")
    parser.add_argument("--n", type=int, default=None, help="experiments (default 120)")
    parser.add_argument("--scan", default=None, help=f"scan shape YxX (default {REAL_SCAN})")
    parser.add_argument("--reps", type=int, default=None, help="runs (default 3; quick 2)")
    parser.add_argument("--share", type=float, default=0.01,
                        help="share of the experiments added, removed, changed (default 0.01)")
    parser.add_argument("--client", default=None, help="export client (default: the default)")
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--bandwidth", type=float, default=5e7)
    parser.add_argument("--only", default="npy,formats,remote,inputs,recipe",
                        help="comma-separated sections: npy, formats, remote, inputs, recipe")
    parser.add_argument("--noop-n", type=int, default=1000,
                        help="experiments of the no-op update (section inputs; default 1000)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args()
    args.reps = args.reps or (2 if args.quick else 3)
    n = args.n or (24 if args.quick else 120)
    scan = args.scan or ("100x160" if args.quick else REAL_SCAN)
    y, x = (int(v) for v in scan.split("x"))
    sections = {s.strip() for s in args.only.split(",") if s.strip()}
    cache = args.cache.expanduser().resolve()
    cache.mkdir(parents=True, exist_ok=True)

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # children use compiled bytecode, as installed
    env["PYTHONPYCACHEPREFIX"] = str(cache / "pycache")
    sys.path.insert(0, str(REPO))
    import guideloom
    from guideloom.demo import cached_demo_data

    print(f"guideloom {guideloom.__version__} from {Path(guideloom.__file__).parent}; python "
          f"{sys.version.split()[0]}; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at start")
    print(f"command: {short([Path(sys.executable).name, *sys.argv])}")
    t0 = time.perf_counter()
    release = cached_demo_data(cache, n, (y, x), "zip")
    loose = loose_copy(release)
    ids = dataset_ids(release)[1]
    k = max(1, round(args.share * len(ids)))
    if len(ids) < 2 * k + 2:
        raise SystemExit(f"{len(ids)} experiments with scans are too few for {k} to change")
    mid = spread(ids, k)
    work = Path(tempfile.mkdtemp(prefix="update-bench-", dir=cache))  # hard links: same disk
    try:
        v0 = make_variant(work / "v0", release, loose, [])
        v1 = make_variant(work / "v1", release, loose, mid)
        print(f"data: {short([str(release)])} ({n} experiments, {len(ids)} with scans {y}x{x}; "
              f"loose copy {short([str(loose)])}; {time.perf_counter() - t0:.1f} s to find or "
              f"make)\n  1% = {k} experiment(s); in the middle: ids {mid}; at the end: ids "
              f"{ids[-k:]}; v1 rewrites 16 values of {CHANGED_FIELD} in the middle ones")
        child = Child(env, work)
        goals: list[Goal] = []
        if "npy" in sections:
            goals += run_npy(child, args, work, v0, v1, ids, k, mid)
        if "formats" in sections:
            goals += run_formats(child, args, work, v0, ids, k)
        if "remote" in sections:
            goals += run_remote(child, args, work, release, ids, k)
        if "inputs" in sections:
            goals += run_inputs(child, args, work, v0, ids, cache)
        if "recipe" in sections:
            goals += run_recipe(child, args)
        print("\ncommands (one of each kind; ARGS_JSON as run):")
        for label, cmd in child.commands.items():
            print(f"  {label}: {short(cmd)}")
        print_summary(goals)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(RESULT + json.dumps(CHILDREN[sys.argv[2]](json.loads(sys.argv[3]))), flush=True)
    else:
        main()
