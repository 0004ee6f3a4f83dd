"""guideloom preprocess against rddac 2.0 on the same raw data: every file, group, dataset and
attribute equal (values exactly, ``float32`` for ``float32``), zipped and loose, with the
default parameters and with a config file of rddac's keys.

rddac runs in a venv of its own (``GUIDELOOM_RDDAC_PYTHON``, or one installed once into the
user's cache folder); without it the tests skip and say why."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from guideloom.preprocess.job import preprocess
from guideloom.preprocess.params import load as load_config
from guideloom.preprocess.publish import MARKER, RECORD_ATTR
from tests.preprocess_helpers import make_raw_dataset, rddac_python, run_rddac, tree_digest

N = 20
STAGES = ["force", "sheet", "oil"]
# the first run installs rddac into a venv of the user's cache folder (~2.5 min, once)
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def rddac() -> str:
    python, why = rddac_python()
    if python is None:
        pytest.skip(why)
    return python


def _attrs(node: h5py.HLObject) -> dict[str, object]:
    return {k: v for k, v in node.attrs.items() if k != RECORD_ATTR}


def _same_attrs(ours: dict[str, object], theirs: dict[str, object], where: str) -> None:
    assert sorted(ours) == sorted(theirs), where
    for key, value in theirs.items():
        mine = ours[key]
        assert np.asarray(mine).dtype.kind == np.asarray(value).dtype.kind, f"{where}@{key}"
        assert np.array_equal(np.asarray(mine), np.asarray(value)), f"{where}@{key}"


def assert_same_processed(ours: Path, theirs: Path) -> int:
    """Every processed file of rddac's is ours, equal in all it holds; returns the count."""
    names = sorted(p.name for p in theirs.glob("*.h5"))
    assert names == sorted(p.name for p in ours.glob("*.h5"))
    assert (ours / MARKER).is_file()
    for name in names:
        with h5py.File(ours / name, "r") as a, h5py.File(theirs / name, "r") as b:
            assert sorted(a) == sorted(b), name
            _same_attrs(_attrs(a), _attrs(b), name)
            assert RECORD_ATTR in a.attrs
            for group in b:
                _same_attrs(_attrs(a[group]), _attrs(b[group]), f"{name}:{group}")
                x, y = a[f"{group}/data"], b[f"{group}/data"]
                assert (x.shape, x.dtype, x.compression, x.compression_opts) == \
                       (y.shape, y.dtype, y.compression, y.compression_opts), f"{name}:{group}"
                assert np.array_equal(x[()], y[()], equal_nan=True), f"{name}:{group}"
    return len(names)


@pytest.mark.parametrize("layout", ["loose", pytest.param("zip", marks=pytest.mark.slow)])
def test_same_files_as_rddac(rddac, tmp_path, layout):
    raw = make_raw_dataset(tmp_path / "raw", N, layout)
    before = tree_digest(raw)
    run_rddac(rddac, "preprocess", *STAGES, "--data-dir", str(raw), "--out",
              str(tmp_path / "rddac"), "-y", "-q")
    report = preprocess(STAGES, data_dir=raw, out_dir=tmp_path / "ours", client="sync")
    assert report.errors == {}
    assert assert_same_processed(tmp_path / "ours", tmp_path / "rddac") == N
    # the branches the data was made to reach were reached (counts from rddac's own files)
    with h5py.File(tmp_path / "rddac" / "0006.h5", "r") as f:
        oil = f["oil_thickness"].attrs
        assert oil["n_nan_removed"] > 0
        assert oil["n_hampel_outliers"] > 0
        assert f["sheet_thickness"].attrs["n_negative_masked"] == 0
    with h5py.File(tmp_path / "rddac" / "0001.h5", "r") as f:
        assert f["force"].attrs["n_rows"] < 600  # a short trace
    assert report.counts["force"] == {"processed": N - 1, "no_group": 1}
    assert report.counts["oil"] == {"processed": N - 2, "no_group": 2}
    assert tree_digest(raw) == before  # the raw folder is unchanged, byte for byte


def test_same_files_as_rddac_with_a_config_file(rddac, tmp_path):
    raw = make_raw_dataset(tmp_path / "raw", N, "loose")
    config = tmp_path / "variant.toml"
    config.write_text("[force]\ntime_window_start = 0.1\ntime_window_end = 2.0\n"
                      "position_precision_mm = 0.25\n[sheet]\nlast_n = 120\n"
                      "[oil]\nmax_sensor_position = 180\noutput_length = 150\n"
                      "hampel_window = 3\nhampel_k = 2.0\nvalue_quantization = 0.02\n")
    run_rddac(rddac, "preprocess", *STAGES, "--data-dir", str(raw), "--out",
              str(tmp_path / "rddac"), "--config", str(config), "-y", "-q")
    values = load_config(str(config))
    report = preprocess(STAGES, data_dir=raw, out_dir=tmp_path / "ours", client="sync",
                        config={k: values[k] for k in STAGES})
    assert report.errors == {}
    assert assert_same_processed(tmp_path / "ours", tmp_path / "rddac") == N
    with h5py.File(tmp_path / "ours" / "0003.h5", "r") as f:
        assert f["oil_thickness/data"].shape == (150, 2)
        assert f["sheet_thickness/data"].shape == (120, 2)
