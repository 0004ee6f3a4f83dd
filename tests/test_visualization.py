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
    assert bar is not None
    assert ax.get_title() == "op10 z"
    assert ax.get_xlabel() == "x in px"
    pixels, inked = rendered(ax.figure, tmp_path / "scan.png")
    assert pixels.shape[:2] == (375, 600)  # 12 x 7.5 inches at 50 dpi
    assert 0.2 < inked < 0.95
    assert len(ax.figure.axes) == 2
    ax2, none = viz.plot_scan(experiment["z"].reshape(experiment["y"], experiment["x"]),
                              colorbar=False)
    assert none is None
    assert len(ax2.figure.axes) == 1
    with pytest.raises(ValueError, match="x_shape"):
        viz.plot_scan(experiment["z"])  # the demo's scan is not the published 2000 x 3200 grid


def test_scan_to_pointcloud_and_plot_point_cloud(experiment, tmp_path):
    x, y, z = experiment["x"], experiment["y"], experiment["z"]
    pts = viz.scan_to_pointcloud(z, experiment["lum"], x_shape=x, y_shape=y)
    grid = z.reshape(y, x)
    lum = experiment["lum"].reshape(y, x)
    keep = (grid != 0) & (lum != 0)
    assert pts.dtype == np.float32
    assert pts.shape == (int(keep.sum()), 3)
    rows, cols = np.nonzero(keep)
    np.testing.assert_array_equal(pts[:, 0], cols)
    np.testing.assert_array_equal(pts[:, 1], rows)
    np.testing.assert_array_equal(pts[:, 2], grid[rows, cols])
    every = viz.scan_to_pointcloud(z, x_shape=x, y_shape=y, drop_invalid=False, stride=2)
    assert every.shape == (len(range(0, y, 2)) * len(range(0, x, 2)), 3)
    assert set(every[:, 0].astype(int)) == set(range(0, x, 2))
    ax, bar = viz.plot_point_cloud(pts, max_points=50, title="cloud")
    assert ax.name == "3d"
    assert bar is not None
    assert ax.get_zlabel() == "z"
    assert len(ax.collections[0].get_offsets()) == min(50, len(pts))
    pixels, inked = rendered(ax.figure, tmp_path / "cloud.png")
    assert pixels.shape[:2] == (400, 500)
    assert 0.05 < inked < 0.95
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
    assert ax.get_legend() is not None
    assert ax.get_ylabel() == "force in kN"
    pixels, inked = rendered(ax.figure, tmp_path / "force.png")
    assert pixels.shape[:2] == (250, 500)
    assert 0.02 < inked < 0.9
    one = viz.plot_force(force, signals=("punch_pos",))
    assert len(one.get_lines()) == 1
    with pytest.raises(ValueError, match="unknown signal"):
        viz.plot_force(force, signals=("nope",))


def test_plot_traverse_overlays_on_one_axes(experiment, tmp_path):
    ax = viz.plot_traverse(experiment["sheet"], ylabel="sheet thickness in um", label="sheet")
    same = viz.plot_traverse(experiment["oil"], ax=ax, label="oil")
    assert same is ax
    assert [ln.get_label() for ln in ax.get_lines()] == ["sheet", "oil"]
    np.testing.assert_array_equal(ax.get_lines()[1].get_ydata(), experiment["oil"][:, 1])
    pixels, inked = rendered(ax.figure, tmp_path / "traverse.png")
    assert pixels.shape[:2] == (200, 500)
    assert 0.02 < inked < 0.9
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


# ddacs 3.2's plots of simulation meshes (guideloom.ddacs_visualization, also importable from
# guideloom.visualization and guideloom, where ddacs code finds them)

from guideloom import ddacs_visualization as dviz  # noqa: E402


@pytest.fixture
def quarter_plate():
    """A 5 x 4 node plate in the positive quadrant, bulging in z, as 24 triangles."""
    xs, ys = np.meshgrid(np.linspace(0, 100, 5), np.linspace(0, 60, 4))
    nodes = np.column_stack([xs.ravel(), ys.ravel(), 0.001 * xs.ravel() * ys.ravel()])
    faces = []
    for row in range(3):
        for col in range(4):
            a = row * 5 + col
            faces += [[a, a + 1, a + 6], [a, a + 6, a + 5]]
    return nodes, np.array(faces)


def test_ddacs_names_are_importable_where_ddacs_code_looks():
    from guideloom import COMPONENT_COLORS, plot_2d_projection, plot_mesh  # noqa: F401
    from guideloom.visualization import COMPONENT_NAMES, FALSE_COLOR_CMAP

    for name in ("plot_mesh", "plot_vectors", "plot_2d_projection", "COMPONENT_COLORS",
                 "COMPONENT_NAMES", "DEFAULT_AXIS_LIMITS", "DEFAULT_VIEW_ELEVATION",
                 "DEFAULT_VIEW_AZIMUTH", "FALSE_COLOR_CMAP"):
        assert getattr(viz, name) is getattr(dviz, name)
        assert name in viz.__all__
        assert name in dir(viz)
    assert guideloom.plot_mesh is dviz.plot_mesh
    assert guideloom.plot_point_cloud is viz.plot_point_cloud
    assert {"plot_mesh", "plot_vectors", "plot_2d_projection", "COMPONENT_COLORS"} <= set(
        guideloom.__all__)
    assert COMPONENT_COLORS == {"blank": "red", "die": "blue", "punch": "green",
                                "binder": "orange"}
    assert set(COMPONENT_NAMES) == set(COMPONENT_COLORS)
    assert dviz.DEFAULT_AXIS_LIMITS == [0, 110]
    assert dviz.DEFAULT_DPI == 150
    low, high = FALSE_COLOR_CMAP(0.0), FALSE_COLOR_CMAP(1.0)
    assert low[0] > 0.5 > low[2]
    assert high[2] > 0.5 > high[0]
    with pytest.raises(AttributeError):
        viz.plot_nothing  # noqa: B018


def test_plot_mesh_solid_coloured_and_mirrored(quarter_plate, tmp_path):
    nodes, faces = quarter_plate
    ax = dviz.plot_mesh(nodes, faces.astype(np.float64), title="blank")  # float indexes work
    assert not isinstance(ax, tuple)
    assert ax.name == "3d"
    assert ax.get_title() == "blank"
    (mesh,) = ax.collections
    pixels, inked = rendered(ax.figure, tmp_path / "mesh.png")  # faces are projected on drawing
    assert len(mesh.get_paths()) == len(faces)
    assert ax.get_xlabel() == "$x$ in mm"
    assert len(ax.figure.axes) == 1
    assert pixels.shape[:2] == (300, 500)  # 10 x 6 inches at 50 dpi
    red = np.mean((pixels[..., 0] > 0.6) & (pixels[..., 1] < 0.4) & (pixels[..., 2] < 0.4))
    assert red > 0.02
    assert 0.05 < inked < 0.95

    thickness = np.linspace(0.8, 1.2, len(faces))
    ax, bar = dviz.plot_mesh(nodes, faces, values=thickness, colorbar_label="t in mm",
                             shade=False, vmin=0.8, vmax=1.2)
    expected = plt.colormaps["viridis"]((thickness - 0.8) / 0.4)
    drawn = ax.collections[0].get_facecolor()  # in drawing (depth) order once drawn
    assert sorted(map(tuple, drawn.round(6))) == sorted(map(tuple, expected.round(6)))
    assert bar.ax.get_ylabel() == "t in mm"
    assert len(ax.figure.axes) == 2
    _, inked = rendered(ax.figure, tmp_path / "thickness.png")
    assert 0.05 < inked < 0.95

    ax, none = dviz.plot_mesh(nodes, faces, values=thickness, colorbar=False, mirror=True)
    assert none is None
    assert len(ax.figure.axes) == 1
    rendered(ax.figure, tmp_path / "mirrored.png")
    assert len(ax.collections[0].get_paths()) == 4 * len(faces)
    left, right = ax.get_xlim()
    assert left < -100
    assert right > 100
    assert np.isclose(left, -right)
    ax = dviz.plot_mesh(nodes, faces, axis_limits=[0, 110])
    assert ax.get_xlim() == (0, 110)
    assert ax.get_zlim() == (0, 110)
    with pytest.raises(ValueError, match="outside"):
        dviz.plot_mesh(nodes, faces + 100)
    with pytest.raises(ValueError, match="values"):
        dviz.plot_mesh(nodes, faces, values=thickness[:3])


def test_plot_vectors_outlined_arrows_subsampled_and_mirrored(quarter_plate, tmp_path):
    nodes, faces = quarter_plate
    springback = np.column_stack([np.full(20, 0.5), np.zeros(20), np.linspace(0, 1, 20)])
    ax = dviz.plot_vectors(nodes, springback, step=3, scale=4.0, title="springback")
    assert not isinstance(ax, tuple)
    assert ax.get_title() == "springback"
    outline, arrows = ax.collections  # black outline below, red arrows on top
    np.testing.assert_allclose(outline.get_color()[0][:3], (0, 0, 0))
    np.testing.assert_allclose(arrows.get_color()[0][:3], (1, 0, 0))
    shafts = np.asarray(arrows._segments3d)[:len(range(0, 20, 3))]  # no public 3D getter
    np.testing.assert_allclose(shafts[:, 1], nodes[::3], atol=1e-9)  # (tip, tail), every third
    np.testing.assert_allclose(shafts[:, 0] - shafts[:, 1], 4.0 * springback[::3], atol=1e-9)
    pixels, inked = rendered(ax.figure, tmp_path / "vectors.png")
    shown = len(range(0, 20, 3))
    assert len(arrows.get_segments()) == 3 * shown  # shaft and two head strokes per arrow
    assert pixels.shape[:2] == (300, 500)
    assert 0.005 < inked < 0.95

    magnitude = np.linalg.norm(springback, axis=1)
    ax, bar = dviz.plot_vectors(nodes, springback, values=magnitude, step=1, mirror=True,
                                colorbar_label="springback in mm")
    rendered(ax.figure, tmp_path / "mirrored.png")
    assert len(ax.collections[1].get_segments()) == 3 * 4 * 20
    assert bar.ax.get_ylabel() == "springback in mm"
    assert len(ax.figure.axes) == 2
    assert len({tuple(c) for c in ax.collections[1].get_color()}) > 1  # coloured by magnitude

    base = dviz.plot_mesh(nodes, faces, facecolors="lightgrey", title="part")
    same = dviz.plot_vectors(nodes, springback, ax=base, outline_kwargs={"linewidth": 0})
    assert same is base
    assert len(base.collections) == 3
    assert base.get_title() == "part"
    _, inked = rendered(base.figure, tmp_path / "overlay.png")
    assert 0.05 < inked < 0.95
    with pytest.raises(ValueError, match="match"):
        dviz.plot_vectors(nodes, springback[:5])


def test_plot_2d_projection_planes_and_colour(quarter_plate, tmp_path):
    nodes, _ = quarter_plate
    ax = dviz.plot_2d_projection(nodes, projection="xz", title="side")
    assert not isinstance(ax, tuple)
    assert ax.name == "rectilinear"
    np.testing.assert_allclose(ax.collections[0].get_offsets(), nodes[:, [0, 2]])
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("X [mm]", "Z [mm]")
    assert ax.get_aspect() == 1.0
    assert ax.get_title() == "side"
    pixels, inked = rendered(ax.figure, tmp_path / "side.png")
    assert pixels.shape[:2] == (300, 500)
    assert 0.001 < inked < 0.95

    ax, bar = dviz.plot_2d_projection(nodes, values=nodes[:, 2], colorbar_label="z in mm", s=40)
    np.testing.assert_allclose(ax.collections[0].get_offsets(), nodes[:, :2])
    assert ax.collections[0].get_sizes()[0] == 40
    assert bar.ax.get_ylabel() == "z in mm"
    assert len(ax.figure.axes) == 2
    pixels, inked = rendered(ax.figure, tmp_path / "top.png")
    colourful = np.mean(pixels.max(axis=-1) - pixels.min(axis=-1) > 0.3)  # not black/grey/white
    assert 0.01 < inked < 0.95
    assert colourful > 0.005
    with pytest.raises(ValueError, match="projection"):
        dviz.plot_2d_projection(nodes, projection="zx")


def test_plot_point_cloud_takes_rddac_and_ddacs_call_forms(quarter_plate, tmp_path):
    nodes, _ = quarter_plate
    ax, bar = viz.plot_point_cloud(nodes)  # bare call: rddac's form, coloured by z
    assert bar is not None
    assert ax.get_zlabel() == "z"
    ax = viz.plot_point_cloud(nodes, s=5)  # a scatter keyword: ddacs' form, solid red
    assert not isinstance(ax, tuple)
    assert ax.get_zlabel() == "$z$ in mm"
    np.testing.assert_allclose(ax.collections[0].get_facecolor()[0][:3], (1, 0, 0))
    assert ax.collections[0].get_sizes()[0] == 5
    ax, bar = viz.plot_point_cloud(coords=nodes, values=nodes[:, 0], mirror=True,
                                   colorbar_label="x in mm")
    assert len(ax.collections[0].get_offsets()) == 4 * len(nodes)
    assert bar.ax.get_ylabel() == "x in mm"
    pixels, inked = rendered(ax.figure, tmp_path / "mirrored.png")
    assert pixels.shape[:2] == (300, 500)
    assert 0.01 < inked < 0.95
    ax = dviz.plot_point_cloud(nodes)  # ddacs' own function: bare Axes without values
    assert not isinstance(ax, tuple)
    assert len(ax.collections[0].get_offsets()) == len(nodes)
    with pytest.raises(TypeError, match="once"):
        viz.plot_point_cloud(nodes, coords=nodes)


def test_ddacs_plots_import_matplotlib_only_when_drawing(tmp_path):
    code = ("import sys\n"
            "from guideloom.ddacs_visualization import COMPONENT_COLORS, plot_mesh\n"
            "from guideloom import plot_vectors\n"
            "print('matplotlib' in sys.modules)\n"
            "plot_mesh([[0, 0, 0], [1, 0, 0], [0, 1, 1]], [[0, 1, 2]])\n"
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True, env={"MPLBACKEND": "Agg", "PATH": ""}).stdout
    assert out.split() == ["False", "True"]
