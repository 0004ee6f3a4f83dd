"""guideloom.visualization draws real PNGs (Agg backend) of one experiment's arrays."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import guideloom  # noqa: E402
from guideloom import visualization as viz  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def experiment(demo_zip):
    index = guideloom.load(demo_zip).index()
    sim_id = next(i for i in index.ids
                  if index.row(i)["has_pointcloud"] and index.row(i)["has_oil"])
    with guideloom.open_h5(sim_id, data_dir=demo_zip) as f:
        group = f["pointcloud/op10"]
        return {
            "z": group["z"][()], "lum": group["luminescence"][()],
            "x": int(group.attrs["x_shape"]), "y": int(group.attrs["y_shape"]),
            "force": f["force/data"][()],
            "columns": tuple(str(c) for c in f["force"].attrs["columns"]),
            "sheet": f["sheet_thickness/data"][()], "oil": f["oil_thickness/data"][()],
        }


def rendered(fig, path):
    """Save ``fig`` as a PNG, read it back, return (rgb pixels, share of non-white pixels)."""
    fig.savefig(path, dpi=50)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = plt.imread(path)[..., :3]
    return pixels, float(np.mean(np.any(pixels < 0.95, axis=-1)))


def test_plot_scan_draws_the_grid(experiment, tmp_path):
    ax, bar = viz.plot_scan(experiment["z"], x_shape=experiment["x"], y_shape=experiment["y"],
                            title="op10 z")
    image = ax.images[0].get_array()
    assert image.shape == (experiment["y"], experiment["x"])
    zero = experiment["z"].reshape(experiment["y"], experiment["x"]) == 0
    assert np.ma.getmaskarray(image)[zero].all() or np.isnan(np.asarray(image)[zero]).all()
    assert bar is not None and ax.get_title() == "op10 z" and ax.get_xlabel() == "x in px"
    pixels, inked = rendered(ax.figure, tmp_path / "scan.png")
    assert pixels.shape[:2] == (375, 600)  # 12 x 7.5 inches at 50 dpi
    assert 0.2 < inked < 0.95 and len(ax.figure.axes) == 2  # the image and its colour bar
    ax2, none = viz.plot_scan(experiment["z"].reshape(experiment["y"], experiment["x"]),
                              colorbar=False)
    assert none is None and len(ax2.figure.axes) == 1
    with pytest.raises(ValueError, match="x_shape"):
        viz.plot_scan(experiment["z"])  # the demo's scan is not the published 2000 x 3200 grid


def test_scan_to_pointcloud_and_plot_point_cloud(experiment, tmp_path):
    x, y, z = experiment["x"], experiment["y"], experiment["z"]
    pts = viz.scan_to_pointcloud(z, experiment["lum"], x_shape=x, y_shape=y)
    grid = z.reshape(y, x)
    lum = experiment["lum"].reshape(y, x)
    keep = (grid != 0) & (lum != 0)
    assert pts.dtype == np.float32 and pts.shape == (int(keep.sum()), 3)
    rows, cols = np.nonzero(keep)
    np.testing.assert_array_equal(pts[:, 0], cols)
    np.testing.assert_array_equal(pts[:, 1], rows)
    np.testing.assert_array_equal(pts[:, 2], grid[rows, cols])
    every = viz.scan_to_pointcloud(z, x_shape=x, y_shape=y, drop_invalid=False, stride=2)
    assert every.shape == (len(range(0, y, 2)) * len(range(0, x, 2)), 3)
    assert set(every[:, 0].astype(int)) == set(range(0, x, 2))
    ax, bar = viz.plot_point_cloud(pts, max_points=50, title="cloud")
    assert ax.name == "3d" and bar is not None and ax.get_zlabel() == "z"
    assert len(ax.collections[0].get_offsets()) == min(50, len(pts))
    pixels, inked = rendered(ax.figure, tmp_path / "cloud.png")
    assert pixels.shape[:2] == (400, 500) and 0.05 < inked < 0.95
    with pytest.raises(ValueError, match=r"\(N, 3\)"):
        viz.plot_point_cloud(pts[:, :2])


def test_plot_force_draws_one_line_per_signal(experiment, tmp_path):
    force, columns = experiment["force"], experiment["columns"]
    assert columns == viz.FORCE_COLUMNS
    ax = viz.plot_force(force, title="force")
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["load_cell_1", "load_cell_2", "load_cell_3",
                                                 "load_cell_4", "total_force"]
    np.testing.assert_array_equal(lines[-1].get_xdata(), force[:, 0])
    np.testing.assert_array_equal(lines[-1].get_ydata(), force[:, 7])
    assert ax.get_legend() is not None and ax.get_ylabel() == "force in kN"
    pixels, inked = rendered(ax.figure, tmp_path / "force.png")
    assert pixels.shape[:2] == (250, 500) and 0.02 < inked < 0.9
    one = viz.plot_force(force, signals=("punch_pos",))
    assert len(one.get_lines()) == 1
    with pytest.raises(ValueError, match="unknown signal"):
        viz.plot_force(force, signals=("nope",))


def test_plot_traverse_overlays_on_one_axes(experiment, tmp_path):
    ax = viz.plot_traverse(experiment["sheet"], ylabel="sheet thickness in um", label="sheet")
    same = viz.plot_traverse(experiment["oil"], ax=ax, label="oil")
    assert same is ax and [ln.get_label() for ln in ax.get_lines()] == ["sheet", "oil"]
    np.testing.assert_array_equal(ax.get_lines()[1].get_ydata(), experiment["oil"][:, 1])
    pixels, inked = rendered(ax.figure, tmp_path / "traverse.png")
    assert pixels.shape[:2] == (200, 500) and 0.02 < inked < 0.9
    with pytest.raises(ValueError, match=r"\(n, 2\)"):
        viz.plot_traverse(experiment["force"])


def test_importing_guideloom_does_not_import_matplotlib(tmp_path):
    code = ("import sys, guideloom, guideloom.visualization\n"
            "print('matplotlib' in sys.modules)\n"
            "guideloom.plot_traverse([[0, 1], [1, 2]])\n"
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True, env={"MPLBACKEND": "Agg", "PATH": ""}).stdout
    assert out.split() == ["False", "True"]
