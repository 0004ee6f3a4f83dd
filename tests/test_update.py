"""Updating an export (issue 32): only added and changed experiments are read, the other rows
are carried, and the result equals a fresh full export of the new selection.

Every case compares the updated export with a full export of the same selection written
beside it, file by file for the data (npy arrays, npz arrays, sim_ids, checksums,
provenance), and counts the experiments the transform saw (``counted_first_rows`` appends each
id it transforms to a file).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import guideloom
from guideloom.errors import InjectedFault, UpdateRefusedError
from guideloom.formats import get_format
from guideloom.runtime.faults import FAULT_ENV, crash_at
from guideloom.testing.formats import fault_cases
from tests.export_helpers import (
    COUNT_FILE_ENV,
    COUNTED_CODE_VERSION,
    counted_first_rows,
    first_rows,
)
from tests.zip_helpers import member_bytes, rebuild_archive

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("npy", "npz", "zarr")
VIEW = "force-curve"
# files whose bytes an update must reproduce exactly (export.json and croissant.json hold the
# run's own facts: ids, times, history)
SAME_BYTES = ("sim_ids.npy", "checksums.json", "provenance.json")


@pytest.fixture
def data(small_loose, tmp_path) -> Path:
    """A private copy of the session's small loose dataset (tests change its files)."""
    target = tmp_path / "data"
    shutil.copytree(small_loose, target)
    return target


@pytest.fixture
def decoded(tmp_path, monkeypatch):
    """The ids the transform saw since the last call of the returned function."""
    log = tmp_path / "decoded.txt"
    monkeypatch.setenv(COUNT_FILE_ENV, str(log))

    def take() -> list[int]:
        seen = [int(x) for x in log.read_text().split()] if log.exists() else []
        log.unlink(missing_ok=True)
        return seen
    return take


def export(kind: str, data: Path, target: Path, ids, *, update: bool = False,
           overwrite: bool = False, transform=counted_first_rows, view: str = VIEW,
           partition_size: int | None = 4, **options):
    if transform is counted_first_rows:  # it reads the environment: its version named
        options.setdefault("code_version", COUNTED_CODE_VERSION)
    return guideloom.export.export(
        view, target, kind=kind, data_dir=data, sim_ids=list(ids), sim_ids_order="sim_ids",
        record_transform=transform, client="sync", partition_size=partition_size,
        update=update, overwrite=overwrite, **options)


def rows_of(target: Path) -> tuple[list, list[dict[str, np.ndarray]]]:
    with guideloom.load_export(target) as exp:
        return exp.sim_ids.tolist(), [{k: np.array(v) for k, v in exp[i].items()}
                                      for i in range(len(exp))]


def assert_same_export(kind: str, updated: Path, full: Path) -> None:
    """The updated export holds what a fresh full export holds: the same rows, the same
    bytes of every data file, and it verifies."""
    ids, rows = rows_of(updated)
    want_ids, want_rows = rows_of(full)
    assert ids == want_ids
    for got, want in zip(rows, want_rows, strict=True):
        assert got.keys() == want.keys()
        for key in got:
            assert got[key].dtype == want[key].dtype
            assert np.array_equal(got[key], want[key])
    for name in SAME_BYTES if kind != "zarr" else SAME_BYTES[1:]:  # zarr: sim_ids an array
        assert (updated / name).read_bytes() == (full / name).read_bytes(), name
    if kind == "npy":
        for alias in json.loads((full / "export.json").read_text())["fields"]:
            assert (updated / f"{alias}.npy").read_bytes() == (full / f"{alias}.npy").read_bytes()
    guideloom.load_export(updated).verify()


def history(target: Path) -> list[dict]:
    return json.loads((target / "export.json").read_text())["generations"]


@pytest.mark.parametrize("kind", KINDS)
def test_adding_experiments_reads_only_them_and_equals_a_full_export(kind, data, tmp_path,
                                                                       decoded):
    out, full = tmp_path / "out", tmp_path / "full"
    export(kind, data, out, range(20))
    assert set(decoded()) == set(range(20))  # (the schema probe transforms the first twice)
    result = export(kind, data, out, range(26), update=True)
    assert sorted(decoded()) == list(range(20, 26))  # exactly the new experiments
    assert result.update == {"added": 6, "removed": 0, "changed": 0, "carried": 20}
    gens = history(out)
    assert [g["generation"] for g in gens] == [1, 2]
    assert (gens[1]["added"], gens[1]["carried"], gens[1]["rows"]) == (6, 20, 26)
    assert gens[0]["export_id"] != gens[1]["export_id"] == result.manifest["export_id"]
    export(kind, data, full, range(26))
    assert_same_export(kind, out, full)
    assert not list(tmp_path.glob(".out.guideloom-staging"))


@pytest.mark.parametrize("kind", ["npy", "npz"])
def test_removed_and_inserted_experiments(kind, data, tmp_path, decoded):
    out, full = tmp_path / "out", tmp_path / "full"
    before = [i for i in range(24) if i not in (5, 6, 11)]
    export(kind, data, out, before)
    decoded()
    after = [i for i in range(24) if i not in (2, 17)]  # 5, 6, 11 inserted; 2, 17 removed
    result = export(kind, data, out, after, update=True)
    assert sorted(decoded()) == [5, 6, 11]
    assert result.update == {"added": 3, "removed": 2, "changed": 0, "carried": 19}
    export(kind, data, full, after)
    assert_same_export(kind, out, full)


@pytest.mark.parametrize("kind", KINDS)
def test_an_experiment_inserted_before_the_first_row(kind, data, tmp_path, decoded):
    """The previous generation's row 0 follows a new row: it is carried, not left zero."""
    out, full = tmp_path / "out", tmp_path / "full"
    export(kind, data, out, range(1, 9))
    decoded()
    result = export(kind, data, out, range(9), update=True)
    assert decoded() == [0]
    assert result.update == {"added": 1, "removed": 0, "changed": 0, "carried": 8}
    export(kind, data, full, range(9))
    assert_same_export(kind, out, full)


@pytest.mark.parametrize("kind", ["npy", "npz"])
def test_a_reordered_selection_carries_every_row_to_its_new_place(kind, data, tmp_path,
                                                                   decoded):
    out, full = tmp_path / "out", tmp_path / "full"
    export(kind, data, out, range(12))
    decoded()
    order = [11, 3, 0, 7, 1, 2, 10, 4, 5, 9, 8, 6]
    result = export(kind, data, out, order, update=True)
    assert decoded() == []
    assert not result.up_to_date
    assert result.update == {"added": 0, "removed": 0, "changed": 0, "carried": 12}
    export(kind, data, full, order)
    assert_same_export(kind, out, full)


@pytest.mark.parametrize("kind", ["npy", "npz"])
def test_a_reordered_index_table_moves_the_rows_without_reading_them(kind, data, tmp_path,
                                                                     decoded):
    out, full = tmp_path / "out", tmp_path / "full"
    guideloom.export.export(VIEW, out, kind=kind, data_dir=data, client="sync",
                            sim_ids=range(10), record_transform=counted_first_rows,
                            partition_size=4, code_version=COUNTED_CODE_VERSION)
    decoded()
    index = data / "process_parameters.csv"
    header, *body = index.read_text().splitlines()
    index.write_text("\n".join([header, *reversed(body)]) + "\n")  # the index order reversed
    result = guideloom.export.export(VIEW, out, kind=kind, data_dir=data, client="sync",
                                     sim_ids=range(10), record_transform=counted_first_rows,
                                     partition_size=4, update=True,
                                     code_version=COUNTED_CODE_VERSION)
    assert decoded() == []
    assert result.update == {"added": 0, "removed": 0, "changed": 0, "carried": 10}
    assert rows_of(out)[0] == list(range(9, -1, -1))  # index order, as a full export has it
    guideloom.export.export(VIEW, full, kind=kind, data_dir=data, client="sync",
                            sim_ids=range(10), record_transform=counted_first_rows,
                            partition_size=4, code_version=COUNTED_CODE_VERSION)
    assert_same_export(kind, out, full)


def _scale_force(h5: Path, factor: float) -> None:
    with h5py.File(h5, "r+") as f:
        f["force/data"][...] = f["force/data"][...] * factor


@pytest.mark.parametrize("kind", ["npy", "npz"])
def test_a_changed_loose_file_is_read_again(kind, data, tmp_path, decoded):
    out, full = tmp_path / "out", tmp_path / "full"
    export(kind, data, out, range(10))
    decoded()
    old = rows_of(out)[1][4]["force"]
    _scale_force(data / "h5" / "0004.h5", 2.0)
    result = export(kind, data, out, range(10), update=True)
    assert decoded() == [4]
    assert result.update == {"added": 0, "removed": 0, "changed": 1, "carried": 9}
    assert np.allclose(rows_of(out)[1][4]["force"], 2.0 * old)
    export(kind, data, full, range(10))
    assert_same_export(kind, out, full)


def test_a_changed_zip_member_is_read_again(demo_copy, tmp_path, decoded):
    out, full = tmp_path / "out", tmp_path / "full"
    ids = range(0, 36, 3)
    export("npy", demo_copy, out, ids)
    decoded()
    archive = next(p for p in demo_copy.glob("*.zip")
                   if "0009.h5" in __import__("zipfile").ZipFile(p).namelist())
    original = member_bytes(archive, "0009.h5")
    scratch = tmp_path / "0009.h5"
    scratch.write_bytes(original)
    _scale_force(scratch, 3.0)
    rebuild_archive(archive, {"0009.h5": scratch.read_bytes()})  # every member rewritten
    result = export("npy", demo_copy, out, ids, update=True)
    assert decoded() == [9]  # the other members moved in the archive but are unchanged
    assert result.update["changed"] == 1
    assert result.update["carried"] == len(ids) - 1
    export("npy", demo_copy, full, ids)
    assert_same_export("npy", out, full)


@pytest.mark.parametrize("kind", KINDS)
def test_a_changed_index_row_is_read_again(kind, data, tmp_path, decoded):
    out, full = tmp_path / "out", tmp_path / "full"
    export(kind, data, out, range(8))
    decoded()
    index = data / "process_parameters.csv"
    rows = list(csv.reader(index.open(newline="")))
    header, body = rows[0], rows[1:]
    col = header.index("mean_punch_temp")
    target_row = next(r for r in body if int(r[0]) == 3)
    target_row[col] = str(float(target_row[col]) + 1.5)
    with index.open("w", newline="") as fh:
        csv.writer(fh).writerows([header, *body])
    result = export(kind, data, out, range(8), update=True)
    assert decoded() == [3]
    assert result.update == {"added": 0, "removed": 0, "changed": 1, "carried": 7}
    export(kind, data, full, range(8))
    assert_same_export(kind, out, full)  # the new row digest is recorded too


@pytest.mark.parametrize("kind", ["npy", "npz"])
def test_an_update_with_nothing_new_publishes_nothing(kind, data, tmp_path, decoded):
    out = tmp_path / "out"
    first = export(kind, data, out, range(10))
    decoded()
    again = export(kind, data, out, range(10), update=True)
    assert again.up_to_date
    assert decoded() == []
    assert json.loads((out / "export.json").read_text())["export_id"] == \
        first.manifest["export_id"]
    assert not list(tmp_path.glob(".out.guideloom-*staging"))


def test_an_update_of_nothing_is_a_full_export(data, tmp_path, decoded):
    out = tmp_path / "out"
    result = export("npy", data, out, range(5), update=True)
    assert set(decoded()) == set(range(5))
    assert result.update is None
    assert [g["generation"] for g in history(out)] == [1]


def other_first_rows(rec):
    """Another transform: the same output names, other code."""
    return {"force": np.asarray(rec["force_data"])[1:101], "sim": np.int64(rec["_sim_id"])}


@pytest.mark.parametrize(("change", "named"), [
    ({"transform": other_first_rows}, "record transform"),
    ({"transform": first_rows}, "record transform"),
    ({"view": "sheet-thickness", "transform": None}, "view's fields"),
    ({"on_error": "skip"}, "on_error"),
])
def test_another_recipe_refuses_naming_what_differs(change, named, data, tmp_path):
    out = tmp_path / "out"
    export("npy", data, out, range(4))
    before = (out / "export.json").read_bytes()
    kwargs = {"transform": change.get("transform", counted_first_rows),
              "view": change.get("view", VIEW)}
    if "on_error" in change:
        kwargs["on_error"] = change["on_error"]
    with pytest.raises(UpdateRefusedError, match=named) as refused:
        export("npy", data, out, range(6), update=True, **kwargs)
    assert "overwrite=True" in str(refused.value)
    assert (out / "export.json").read_bytes() == before  # untouched


def test_another_format_or_options_refuse(data, tmp_path):
    out = tmp_path / "out"
    export("npz", data, out, range(4))
    with pytest.raises(UpdateRefusedError, match="'npz' export, this job writes 'npy'"):
        export("npy", data, out, range(6), update=True)
    with pytest.raises(UpdateRefusedError, match="format options"):
        export("npz", data, out, range(6), update=True, format_options={"compressed": True})


def test_a_target_that_is_not_a_complete_export_refuses(data, tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(UpdateRefusedError, match="only a complete export can be updated"):
        export("npy", data, foreign, range(4), update=True)
    assert (foreign / "notes.txt").read_text() == "mine"


def test_an_export_without_a_recipe_refuses(data, tmp_path):
    """An export of a guideloom before updates: no recipe, no provenance."""
    out = tmp_path / "out"
    export("npy", data, out, range(4))
    manifest = json.loads((out / "export.json").read_text())
    for key in ("recipe", "provenance", "generations"):
        del manifest[key]
    (out / "export.json").write_text(json.dumps(manifest))
    (out / "provenance.json").unlink()
    with pytest.raises(UpdateRefusedError, match="before updates existed"):
        export("npy", data, out, range(6), update=True)


def test_update_and_overwrite_together_are_refused(data, tmp_path):
    with pytest.raises(ValueError, match="not both"):
        export("npy", data, tmp_path / "out", range(4), update=True, overwrite=True)


def test_a_tampered_provenance_refuses(data, tmp_path):
    out = tmp_path / "out"
    export("npy", data, out, range(4))
    path = out / "provenance.json"
    path.write_text(path.read_text().replace('"version"', '"version" ', 1))
    with pytest.raises(guideloom.CorruptExportError, match=r"provenance.json"):
        export("npy", data, out, range(6), update=True)


# --- readers of the previous generation -------------------------------------------------
READER_CASES = [(kind, False) for kind in KINDS] + [("npy", True)]


@pytest.mark.parametrize(("kind", "append"), READER_CASES,
                         ids=[f"{k}{'-append' if a else ''}" for k, a in READER_CASES])
def test_a_reader_opened_before_an_update_keeps_reading_the_old_rows(kind, append, data,
                                                                     tmp_path):
    out = tmp_path / "out"
    export(kind, data, out, range(10))
    if not append:
        _scale_force(data / "h5" / "0002.h5", 5.0)  # a changed row, rewritten by the update
    old = guideloom.load_export(out)
    want_ids, want = old.sim_ids.tolist(), rows_of(out)[1]
    new = range(14) if append else range(1, 14)
    export(kind, data, out, new, update=True)
    assert old.sim_ids.tolist() == want_ids
    assert len(old) == 10
    for i in range(len(old)):
        for key, value in old[i].items():
            assert np.array_equal(value, want[i][key]), (i, key)
    retired = tmp_path / ".out.guideloom-retired"
    assert len(list(retired.iterdir())) == 1  # kept while the reader has it open
    old.close()
    now = guideloom.load_export(out)
    assert now.sim_ids.tolist() == list(new)
    if not append:
        assert not np.array_equal(now.by_sim_id(2)["force"], want[2]["force"])
    now.close()
    export(kind, data, out, range(15), update=True)  # the next publish removes it
    assert not retired.exists()


# --- appending in place (npy) -----------------------------------------------------------
def test_an_npy_append_reuses_the_arrays_instead_of_copying_them(data, tmp_path):
    out = tmp_path / "out"
    export("npy", data, out, range(12))
    before = (out / "force.npy").stat()
    export("npy", data, out, range(15), update=True)
    after = (out / "force.npy").stat()
    assert (after.st_ino, after.st_dev) == (before.st_ino, before.st_dev)  # the same file
    assert np.load(out / "force.npy", mmap_mode="r").shape[0] == 15
    assert not (out / ".guideloom-appending.json").exists()
    assert guideloom.load_export(out).verify().rows == 15


def test_the_append_mark_allows_only_the_counts_it_names(data, tmp_path):
    """An array with rows after the export's is damage, unless the export's own mark names
    that count (an update appending in place); a mark of another export changes nothing."""
    out = tmp_path / "out"
    export("npy", data, out, range(6))
    manifest = json.loads((out / "export.json").read_text())
    row = np.load(out / "force.npy", mmap_mode="r")[0].nbytes
    with (out / "force.npy").open("ab") as fh:
        fh.write(b"\0" * row * 2)
    with pytest.raises(guideloom.CorruptExportError, match="bytes but its header needs"):
        guideloom.load_export(out)
    mark = out / ".guideloom-appending.json"
    mark.write_text(json.dumps({"export_id": "another", "count": 6, "rows": [8]}))
    with pytest.raises(guideloom.CorruptExportError, match="bytes but its header needs"):
        guideloom.load_export(out)
    mark.write_text(json.dumps({"export_id": manifest["export_id"], "count": 6, "rows": [7]}))
    with pytest.raises(guideloom.CorruptExportError, match="bytes but its header needs"):
        guideloom.load_export(out)
    mark.write_text(json.dumps({"export_id": manifest["export_id"], "count": 6, "rows": [8]}))
    exp = guideloom.load_export(out)
    assert len(exp) == 6
    assert exp[5]["force"].shape == (100, 8)
    assert exp.verify().rows == 6


def test_an_interrupted_append_then_another_update_equals_a_full_export(data, tmp_path):
    out, full = tmp_path / "out", tmp_path / "full"
    export("npy", data, out, range(10))
    with pytest.raises(InjectedFault), crash_at("rows-finalized"):  # header says 16 now
        export("npy", data, out, range(16), update=True)
    assert guideloom.load_export(out).verify().rows == 10  # the previous one, intact
    assert np.load(out / "force.npy", mmap_mode="r").shape[0] == 16
    result = export("npy", data, out, range(13), update=True)  # another update: 3, not 6
    assert result.update == {"added": 3, "removed": 0, "changed": 0, "carried": 10}
    export("npy", data, full, range(13))
    assert_same_export("npy", out, full)


# --- interrupted updates ---------------------------------------------------------------
def _update_cases() -> list[tuple[str, str, bool]]:
    cases = [(kind, point, False) for kind in ("npy", "npz")
             for point, skips in fault_cases(get_format(kind)) if not skips]
    return cases + [("npy", point, True) for point, skips in fault_cases(get_format("npy"))
                    if not skips]


@pytest.mark.parametrize(("kind", "point", "append"), _update_cases(),
                         ids=[f"{k}-{p}{'-append' if a else ''}" for k, p, a in _update_cases()])
def test_an_update_stopped_at_any_step_is_completed_exactly_by_the_next_run(
        kind, point, append, data, tmp_path):
    out, full = tmp_path / "out", tmp_path / "full"
    export(kind, data, out, range(12))
    if append:
        new = list(range(16))  # appended in place
    else:
        _scale_force(data / "h5" / "0003.h5", 2.0)
        new = [i for i in range(16) if i != 7]  # 4 added, 1 removed, 1 changed
    with pytest.raises(InjectedFault) as stopped, crash_at(point):
        export(kind, data, out, new, update=True)
    assert stopped.value.point == point
    try:  # the previous generation, or the new one: never nothing (one atomic exchange)
        ids = guideloom.load_export(out).sim_ids.tolist()
    except guideloom.IncompleteExportError:
        assert point == "target-moved-aside"
        assert not out.exists()
        assert not can_exchange(tmp_path)
    else:
        assert ids in (list(range(12)), new)
        guideloom.load_export(out).verify()
    result = export(kind, data, out, new, update=True)
    assert result.up_to_date or result.update is not None
    export(kind, data, full, new)
    assert_same_export(kind, out, full)
    assert [g["generation"] for g in history(out)] == [1, 2]


def can_exchange(tmp: Path) -> bool:
    """Whether this platform and file system swap two paths atomically (renameat2)."""
    from guideloom.runtime.os_support import exchange

    a, b = tmp / "exchange-a", tmp / "exchange-b"
    a.mkdir(parents=True)
    b.mkdir()
    return exchange(str(a), str(b))


RUN_UPDATE = """
import sys
from pathlib import Path
from tests.test_update import export
kind, data, target, ids = sys.argv[1:]
export(kind, Path(data), Path(target), [int(i) for i in ids.split(",")], update=True)
"""


@pytest.mark.parametrize("point", ["partition-marked", "finalize-alias", "target-moved-aside",
                                   "data-moved"])
def test_an_update_killed_for_real_is_completed_by_the_next_run(point, data, tmp_path):
    out, full = tmp_path / "out", tmp_path / "full"
    export("npy", data, out, range(12))
    new = list(range(18))
    env = {**os.environ, "PYTHONPATH": str(ROOT), FAULT_ENV: point}
    env.pop(COUNT_FILE_ENV, None)
    args = [sys.executable, "-c", RUN_UPDATE, "npy", str(data), str(out),
            ",".join(map(str, new))]
    killed = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    assert killed.returncode == -9, killed.stderr
    assert guideloom.load_export(out).sim_ids.tolist() in (list(range(12)), new)  # never absent
    del env[FAULT_ENV]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    export("npy", data, full, new)
    assert_same_export("npy", out, full)


def test_the_croissant_description_of_an_updated_export_says_so(data, tmp_path):
    out = tmp_path / "out"
    export("npy", data, out, range(8))
    first = json.loads((out / "croissant.json").read_text())
    assert first["version"] == "1.0.0"
    assert "dateModified" not in first
    export("npy", data, out, range(10), update=True)
    doc = json.loads((out / "croissant.json").read_text())
    manifest = json.loads((out / "export.json").read_text())
    assert doc["version"] == "2.0.0"
    assert doc["datePublished"] == manifest["generations"][0]["created"]
    assert doc["dateModified"] == manifest["created"]
    (text,) = [p["value"] for p in doc["additionalProperty"] if p["name"] == "generations"]
    gens = json.loads(text)
    assert [(g["generation"], g["added"], g["carried"], g["rows"]) for g in gens] == \
        [(1, 8, 0, 8), (2, 2, 8, 10)]


@pytest.mark.parametrize("kind", ["npz", "zarr"])
def test_a_damaged_file_read_through_the_pin_is_named_by_its_export_path(kind, data, tmp_path):
    out = tmp_path / "out"
    export(kind, data, out, range(4))
    exp = guideloom.load_export(out)
    victim = (out / "2.npz") if kind == "npz" else next(
        p for p in (out / "force").rglob("*") if p.is_file() and p.name != "zarr.json")
    victim.unlink()
    with pytest.raises((guideloom.CorruptExportError, OSError)) as failed:
        for i in range(len(exp)):
            exp[i]
    assert "/proc/self/fd" not in str(failed.value)
    assert str(out) in str(failed.value)


def test_carried_rows_of_whole_pages_are_copied_with_direct_io(data, tmp_path, monkeypatch):
    """Rows of whole pages go past the page cache (os_support.copy_direct); the result is a
    full export's, byte for byte."""
    from guideloom.runtime import os_support
    from tests.export_helpers import page_rows

    copied: list[int] = []
    real = os_support.copy_direct

    def counting(src, dst_fd, size, src_offset, dst_offset):
        done = real(src, dst_fd, size, src_offset, dst_offset)
        copied.append(size if done else 0)
        return done

    out, full = tmp_path / "out", tmp_path / "full"
    export("npy", data, out, [i for i in range(12) if i != 4], transform=page_rows)
    monkeypatch.setattr(os_support, "copy_direct", counting)
    export("npy", data, out, range(12), transform=page_rows, update=True)  # 4 inserted
    assert copied
    assert all(copied)
    assert sum(copied) == 11 * 512 * 8 * 8
    export("npy", data, full, range(12), transform=page_rows)
    assert_same_export("npy", out, full)


def test_copy_direct_copies_exactly_or_says_it_cannot(tmp_path):
    from guideloom.runtime import os_support

    src, dst = tmp_path / "src", tmp_path / "dst"
    payload = np.random.default_rng(0).integers(0, 256, 3 * 4096 * 1024, dtype=np.uint8)
    src.write_bytes(payload.tobytes())
    dst.write_bytes(b"\0" * len(payload))
    fd = os.open(dst, os.O_WRONLY | os_support.O_DIRECT) if os_support.O_DIRECT else -1
    if fd < 0:
        pytest.skip("no O_DIRECT here")
    try:
        assert not os_support.copy_direct(str(src), fd, 4096, 100, 0)  # not aligned
        assert os_support.copy_direct(str(src), fd, 2 * 4096 * 1024, 4096, 8192)
    finally:
        os.close(fd)
    got = dst.read_bytes()
    assert got[8192:8192 + 2 * 4096 * 1024] == payload.tobytes()[4096:4096 + 2 * 4096 * 1024]
    assert got[:8192] == b"\0" * 8192
