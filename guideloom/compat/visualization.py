"""Quick looks at one experiment's arrays: scans, point clouds, force curves, traverses.

The functions take numpy arrays (e.g. read with :func:`guideloom.open_h5`) and draw on a
matplotlib Axes, a new figure unless ``ax`` is given. Names, arguments and return values are
rddac 2.0's; users import them from ``guideloom.visualization`` (a stub of this module, see
:mod:`guideloom.compat.aliases`) or ``guideloom``. ddacs 3.2's plots (``plot_mesh``,
``plot_vectors``, ``plot_2d_projection``, ``COMPONENT_COLORS``, ...) live in
:mod:`guideloom.compat.ddacs_visualization` and are importable from here too;
:func:`plot_point_cloud` accepts both packages' call forms. matplotlib is the optional extra
``guideloom[plot]``; it is imported when a function is called, never by ``import guideloom``.

Example:
    >>> with guideloom.open_h5(4, data_dir="./data") as f:             # doctest: +SKIP
    ...     ax, cbar = guideloom.plot_scan(f["pointcloud/op10/z"][()])
    ...     ax = guideloom.plot_force(f["force/data"][()])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from guideloom.compat.plot_backend import DEFAULT_DPI, pyplot

#: ddacs 3.2's names, served from guideloom.compat.ddacs_visualization on first access.
_DDACS_NAMES = ("COMPONENT_COLORS", "COMPONENT_NAMES", "DEFAULT_AXIS_LIMITS",
                "DEFAULT_VIEW_AZIMUTH", "DEFAULT_VIEW_ELEVATION", "FALSE_COLOR_CMAP",
                "plot_2d_projection", "plot_mesh", "plot_vectors")

__all__ = [
    "DEFAULT_DPI",
    "FORCE_COLUMNS",
    "SCAN_X_SHAPE",
    "SCAN_Y_SHAPE",
    "plot_force",
    "plot_point_cloud",
    "plot_scan",
    "plot_traverse",
    "scan_to_pointcloud",
    *_DDACS_NAMES,
]

#: The published scans' grid: ``y_shape`` rows of ``x_shape`` pixels, flattened row by row.
SCAN_X_SHAPE = 3200
SCAN_Y_SHAPE = 2000

#: Column names of the ``force/data`` table, in order.
FORCE_COLUMNS = ("time", "load_cell_1", "load_cell_2", "load_cell_3", "load_cell_4",
                 "punch_temp", "punch_pos", "total_force")

_DEFAULT_SIGNALS = ("load_cell_1", "load_cell_2", "load_cell_3", "load_cell_4", "total_force")


def __getattr__(name: str) -> Any:
    if name in _DDACS_NAMES:
        from guideloom.compat import ddacs_visualization

        return getattr(ddacs_visualization, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_DDACS_NAMES))


def _new_axes(figsize: tuple[float, float], projection: str | None = None) -> Any:
    figure = pyplot().figure(figsize=figsize, dpi=DEFAULT_DPI)
    return figure.add_subplot(projection=projection)


def _grid(buffer: Any, x_shape: int, y_shape: int) -> np.ndarray:
    """A scan as a ``(y_shape, x_shape)`` image, from the flat buffer or an image."""
    image = np.asarray(buffer)
    if image.ndim == 2:
        return image
    if image.ndim != 1:
        raise ValueError(f"a scan is a flat buffer or a 2D image, not shape {image.shape}")
    if image.size != x_shape * y_shape:
        raise ValueError(
            f"a flat scan of {image.size} values does not fill a {y_shape} x {x_shape} grid; "
            "pass x_shape= and y_shape= (the pointcloud group's attributes)"
        )
    return image.reshape(y_shape, x_shape)


def plot_scan(
    z: np.ndarray,
    ax: Any = None,
    figsize: tuple[float, float] | None = None,
    x_shape: int = SCAN_X_SHAPE,
    y_shape: int = SCAN_Y_SHAPE,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    mask_zero: bool = True,
    colorbar: bool = True,
    title: str | None = None,
) -> tuple[Any, Any]:
    """Draw a scan buffer (height or luminescence) as an image, pixel (0, 0) bottom left.

    Args:
        z: The flat ``(y_shape * x_shape,)`` buffer, or the ``(y_shape, x_shape)`` image.
        ax: Axes to draw on (default: a new figure).
        figsize: Size of the new figure (default 12 x 7.5 inches).
        x_shape: Pixels per row.
        y_shape: Rows.
        cmap: Colormap name.
        vmin: Lower end of the colour range (default: the data's).
        vmax: Upper end of the colour range (default: the data's).
        mask_zero: Leave unmeasured (zero) pixels transparent.
        colorbar: Add a colour bar.
        title: Axes title.

    Returns:
        ``(ax, colorbar)``; the colour bar is ``None`` without ``colorbar``.
    """
    image = _grid(z, x_shape, y_shape).astype(np.float64)
    if mask_zero:
        image[image == 0] = np.nan
    ax = ax if ax is not None else _new_axes(figsize or (12, 7.5))
    shown = ax.imshow(image, origin="lower", aspect="equal", cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set_xlabel("x in px")
    ax.set_ylabel("y in px")
    if title:
        ax.set_title(title)
    bar = ax.figure.colorbar(shown, ax=ax, shrink=0.8) if colorbar else None
    return ax, bar


def scan_to_pointcloud(
    z: np.ndarray,
    luminescence: np.ndarray | None = None,
    x_shape: int = SCAN_X_SHAPE,
    y_shape: int = SCAN_Y_SHAPE,
    drop_invalid: bool = True,
    stride: int = 1,
) -> np.ndarray:
    """Turn a scan into points ``[x_px, y_px, z_raw]`` (pixel indices, uncalibrated height).

    Args:
        z: The flat height buffer or its image.
        luminescence: The matching luminescence buffer; its zero pixels are dropped too.
        x_shape: Pixels per row.
        y_shape: Rows.
        drop_invalid: Drop unmeasured pixels (``z == 0``).
        stride: Keep every ``stride``-th pixel along both axes.

    Returns:
        A ``(N, 3)`` float32 array, row by row (y, then x).
    """
    if stride < 1:
        raise ValueError(f"stride must be at least 1, not {stride}")
    heights = _grid(z, x_shape, y_shape)[::stride, ::stride]
    keep = heights != 0 if drop_invalid else np.ones(heights.shape, dtype=bool)
    if luminescence is not None:
        keep &= _grid(luminescence, x_shape, y_shape)[::stride, ::stride] != 0
    rows, cols = np.nonzero(keep)
    points = np.empty((rows.size, 3), dtype=np.float32)
    points[:, 0] = cols * stride
    points[:, 1] = rows * stride
    points[:, 2] = heights[rows, cols]
    return points


def plot_point_cloud(
    points: np.ndarray | None = None,
    values: np.ndarray | None = None,
    ax: Any = None,
    figsize: tuple[float, float] | None = None,
    cmap: str | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
    point_size: float = 1.0,
    max_points: int | None = 200_000,
    colorbar: bool = True,
    title: str | None = None,
    **ddacs_keywords: Any,
) -> Any:
    """Scatter ``(N, 3)`` points in 3D, coloured by ``values`` (default: z).

    Two call forms share this name. rddac's (the arguments below) returns ``(ax, colorbar)``.
    ddacs' is chosen by any further keyword (``coords=``, ``colorbar_label=``,
    ``axis_limits=``, ``mirror=``, or scatter options such as ``s=``, ``c=``, ``alpha=``) and
    behaves as :func:`guideloom.compat.ddacs_visualization.plot_point_cloud`: solid red without
    ``values``, ``cmap`` "plasma", all points drawn, the Axes alone returned without
    ``values``. A bare ``plot_point_cloud(xyz)`` is rddac's form; ddacs code that wants the bare
    Axes back imports ``plot_point_cloud`` from :mod:`guideloom.compat.ddacs_visualization`.

    Args:
        points: The xyz positions, e.g. from :func:`scan_to_pointcloud`.
        values: One number per point for the colour.
        ax: 3D Axes to draw on (default: a new figure).
        figsize: Size of the new figure (default 10 x 8 inches).
        cmap: Colormap name (default "viridis").
        vmin: Lower end of the colour range.
        vmax: Upper end of the colour range.
        point_size: Marker size.
        max_points: Draw at most this many points, a fixed random sample (``None``: all);
            rddac's form only.
        colorbar: Add a colour bar.
        title: Axes title.
        **ddacs_keywords: ddacs' keywords; their presence selects ddacs' form.

    Returns:
        ``(ax, colorbar)``; the colour bar is ``None`` without ``colorbar``. ddacs' form:
        the Axes, or ``(ax, colorbar)`` when ``values`` are given.
    """
    if ddacs_keywords:
        from guideloom.compat.ddacs_visualization import plot_point_cloud as ddacs_form

        coords = ddacs_keywords.pop("coords", None)
        if (coords is None) == (points is None):
            raise TypeError("plot_point_cloud takes the points once: positionally or as coords=")
        if point_size != 1.0:
            ddacs_keywords.setdefault("s", point_size)
        cloud = points if coords is None else coords
        assert cloud is not None  # one of the two: checked above
        return ddacs_form(cloud, values, ax, figsize,
                          cmap or "plasma", vmin, vmax, title=title, colorbar=colorbar,
                          **ddacs_keywords)
    if points is None:
        raise TypeError("plot_point_cloud() needs the (N, 3) points")
    cmap = cmap or "viridis"
    xyz = np.asarray(points)
    if xyz.ndim != 2 or xyz.shape[1] != 3:
        raise ValueError(f"points must have shape (N, 3), not {xyz.shape}")
    colour = xyz[:, 2] if values is None else np.asarray(values)
    if colour.shape[0] != xyz.shape[0]:
        raise ValueError(f"{colour.shape[0]} values for {xyz.shape[0]} points")
    if max_points is not None and xyz.shape[0] > max_points:
        pick = np.random.default_rng(0).choice(xyz.shape[0], size=max_points, replace=False)
        xyz, colour = xyz[pick], colour[pick]
    ax = ax if ax is not None else _new_axes(figsize or (10, 8), projection="3d")
    drawn = ax.scatter(xyz[:, 0], xyz[:, 1], xyz[:, 2], c=colour, s=point_size, cmap=cmap,
                       vmin=vmin, vmax=vmax)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_zlabel("z")
    if title:
        ax.set_title(title)
    bar = ax.figure.colorbar(drawn, ax=ax, shrink=0.6) if colorbar else None
    return ax, bar


def plot_force(
    force: np.ndarray,
    columns: tuple[str, ...] = FORCE_COLUMNS,
    signals: tuple[str, ...] = _DEFAULT_SIGNALS,
    ax: Any = None,
    figsize: tuple[float, float] | None = None,
    title: str | None = None,
) -> Any:
    """Draw force signals against time from a ``force/data`` table.

    Args:
        force: The ``(n, len(columns))`` table.
        columns: The table's column names (one must be ``"time"``).
        signals: The columns to draw, one line each.
        ax: Axes to draw on (default: a new figure).
        figsize: Size of the new figure (default 10 x 5 inches).
        title: Axes title.

    Returns:
        The Axes.
    """
    table = np.asarray(force)
    position = {name: n for n, name in enumerate(columns)}
    if "time" not in position:
        raise ValueError(f"columns must include 'time'; got {list(columns)}")
    unknown = [s for s in signals if s not in position]
    if unknown:
        raise ValueError(f"unknown signal(s) {unknown}; columns: {sorted(position)}")
    ax = ax if ax is not None else _new_axes(figsize or (10, 5))
    time = table[:, position["time"]]
    for name in signals:
        ax.plot(time, table[:, position[name]], linewidth=1, label=name)
    ax.set_xlabel("time in s")
    ax.set_ylabel("force in kN")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    if title:
        ax.set_title(title)
    return ax


def plot_traverse(
    data: np.ndarray,
    ax: Any = None,
    figsize: tuple[float, float] | None = None,
    ylabel: str = "value",
    label: str | None = None,
    title: str | None = None,
) -> Any:
    """Draw a traverse table ``[sensor_position, value]`` (sheet or oil thickness).

    Args:
        data: The ``(n, 2)`` table.
        ax: Axes to draw on (default: a new figure); call again with it to overlay traverses.
        figsize: Size of the new figure (default 10 x 4 inches).
        ylabel: The y axis label.
        label: The line's legend label.
        title: Axes title.

    Returns:
        The Axes.
    """
    table = np.asarray(data)
    if table.ndim != 2 or table.shape[1] != 2:
        raise ValueError(f"a traverse has shape (n, 2), not {table.shape}")
    ax = ax if ax is not None else _new_axes(figsize or (10, 4))
    ax.plot(table[:, 0], table[:, 1], linewidth=1, label=label)
    ax.set_xlabel("sensor position in mm")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    if label:
        ax.legend(loc="best", fontsize="small")
    if title:
        ax.set_title(title)
    return ax
