"""ddacs 3.2's plots of simulation meshes, point clouds and vector fields, on numpy arrays.

Names, arguments, defaults and return values follow ``ddacs.visualization``: a function returns
the Axes alone when it colours nothing, and ``(ax, colorbar)`` when ``values`` are given.
``mirror=True`` rebuilds a quarter-symmetric part from its positive quadrant (reflected in
``y = 0``, then everything in ``x = 0``). Users import them from
``guideloom.ddacs_visualization`` (a stub of this module), ``guideloom.visualization`` and
``guideloom``, where ddacs code finds them; ``guideloom.visualization.plot_point_cloud``
accepts both rddac's and ddacs' call forms. matplotlib (``guideloom[plot]``)
is imported on first use.

Example:
    >>> ax, bar = plot_mesh(nodes, faces, values=thickness)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

from guideloom.compat.plot_backend import DEFAULT_DPI, pyplot

__all__ = [
    "COMPONENT_COLORS",
    "COMPONENT_NAMES",
    "DEFAULT_AXIS_LIMITS",
    "DEFAULT_DPI",
    "DEFAULT_VIEW_AZIMUTH",
    "DEFAULT_VIEW_ELEVATION",
    "plot_2d_projection",
    "plot_mesh",
    "plot_point_cloud",
    "plot_vectors",
    *("FALSE_COLOR_CMAP",),  # built on first access (module __getattr__)
]

#: Colour of each simulated component in multi-component figures.
COMPONENT_COLORS = {"blank": "red", "die": "blue", "punch": "green", "binder": "orange"}

#: Display name of each simulated component.
COMPONENT_NAMES = {
    "blank": "Blank (Workpiece)",
    "die": "Die (Upper Tool)",
    "punch": "Punch (Lower Tool)",
    "binder": "Binder (Clamp)",
}

#: Camera of the 3D plots (degrees).
DEFAULT_VIEW_ELEVATION = 30
DEFAULT_VIEW_AZIMUTH = 45

#: The part's extent in mm, for ``axis_limits=DEFAULT_AXIS_LIMITS``.
DEFAULT_AXIS_LIMITS = [0, 110]

#: Stops of the false-colour FEM map: red (low) through green (middle) to blue (high).
FALSE_COLOR_STOPS = ("#a50026", "#f46d43", "#fee08b", "#1a9850", "#74add1", "#4575b4", "#313695")

_PROJECTIONS = {"xy": (0, 1), "xz": (0, 2), "yz": (1, 2)}


def __getattr__(name: str) -> Any:
    if name == "FALSE_COLOR_CMAP":  # built on first use so importing needs no matplotlib
        pyplot()
        from matplotlib.colors import LinearSegmentedColormap

        cmap = LinearSegmentedColormap.from_list("false_color", list(FALSE_COLOR_STOPS))
        globals()[name] = cmap
        return cmap
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _axes_3d(ax: Any, figsize: tuple[float, float] | None) -> tuple[Any, bool]:
    if ax is not None:
        return ax, False
    figure = pyplot().figure(figsize=figsize or (10, 6), dpi=DEFAULT_DPI)
    return figure.add_subplot(projection="3d"), True


def _mirrored(points: np.ndarray, extra: list[np.ndarray | None],
              flip_extra: tuple[bool, ...]) -> tuple[np.ndarray, list[np.ndarray | None]]:
    """Append the reflection in ``y = 0``, then of everything in ``x = 0``.

    ``extra`` arrays travel along (one row per point); those flagged in ``flip_extra`` are
    vectors and get their x/y components reflected too.
    """
    for axis in (1, 0):
        copy = points.copy()
        copy[:, axis] *= -1
        points = np.vstack([points, copy])
        for n, arr in enumerate(extra):
            if arr is None:
                continue
            twin = arr.copy()
            if flip_extra[n]:
                twin[:, axis] *= -1
            extra[n] = np.concatenate([arr, twin])
    return points, extra


def _colours(values: np.ndarray, cmap: str, vmin: float | None,
             vmax: float | None) -> tuple[np.ndarray, Any]:
    """RGBA per value and the ScalarMappable for the colour bar."""
    plt = pyplot()
    from matplotlib.colors import Normalize

    norm = Normalize(vmin=float(np.min(values)) if vmin is None else vmin,
                     vmax=float(np.max(values)) if vmax is None else vmax)
    return plt.colormaps[cmap](norm(values)), plt.cm.ScalarMappable(cmap=cmap, norm=norm)


def _colorbar(ax: Any, mappable: Any, label: str | None, **kwargs: Any) -> Any:
    from matplotlib.ticker import FormatStrFormatter

    bar = ax.figure.colorbar(mappable, ax=ax, **kwargs)
    bar.ax.yaxis.set_major_formatter(FormatStrFormatter("%.2f"))
    if label:
        bar.set_label(label)
    return bar


def _frame_3d(ax: Any, points: np.ndarray, title: str | None,
              axis_limits: list[float] | None) -> None:
    """Labels in mm, limits fitting ``points`` (or ``axis_limits`` on all axes), equal scale."""
    from matplotlib.ticker import MaxNLocator

    if title:
        ax.set_title(title)
    ax.set_xlabel("$x$ in mm")
    ax.set_ylabel("$y$ in mm")
    ax.set_zlabel("$z$ in mm")
    low, high = points.min(axis=0), points.max(axis=0)
    span = high - low
    span[2] = max(span[2], 0.01 * max(span[0], span[1]) or 1e-3)  # flat parts still get depth
    if axis_limits is not None:
        low = np.full(3, float(axis_limits[0]))
        high = np.full(3, float(axis_limits[1]))
        ax.set_xlim(low[0], high[0])
        ax.set_ylim(low[1], high[1])
        ax.set_zlim(low[2], high[2])
    else:
        ax.set_xlim(low[0] - 0.05 * span[0], high[0] + 0.05 * span[0])
        ax.set_ylim(low[1] - 0.05 * span[1], high[1] + 0.05 * span[1])
        ax.set_zlim(low[2] - 0.05 * span[2], high[2] + 0.05 * span[2])
        ax.set_box_aspect(tuple(max(float(s), 1e-3) for s in span))
    for axis, ticks in ((ax.xaxis, 5), (ax.yaxis, 5), (ax.zaxis, 4)):
        axis.set_major_locator(MaxNLocator(ticks))
    ax.view_init(DEFAULT_VIEW_ELEVATION, DEFAULT_VIEW_AZIMUTH)


def _xyz(coords: Any, what: str) -> np.ndarray:
    points = np.asarray(coords, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 3 or len(points) == 0:
        raise ValueError(f"{what} must have shape (N, 3) with N > 0, not {points.shape}")
    return points


def _per_row(values: Any, rows: int, what: str) -> np.ndarray | None:
    if values is None:
        return None
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape[:1] != (rows,):
        raise ValueError(f"{len(arr)} values for {rows} {what}; pass one value per {what[:-1]}")
    return arr


def plot_mesh(
    vertices: np.ndarray,
    faces: np.ndarray,
    values: np.ndarray | None = None,
    ax: Any = None,
    figsize: tuple[float, float] | None = None,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar_label: str | None = None,
    colorbar: bool = True,
    title: str | None = None,
    axis_limits: list[float] | None = None,
    mirror: bool = False,
    shade: bool = True,
    **kwargs: Any,
) -> Any:
    """Draw a triangle (or quad) mesh in 3D, solid or coloured per face.

    Args:
        vertices: ``(n_nodes, 3)`` node positions in mm.
        faces: ``(n_faces, k)`` node indexes per face (float indexes are accepted).
        values: One number per face for the colour (e.g. shell thickness).
        ax: 3D Axes to draw on (default: a new 10 x 6 inch figure).
        figsize: Size of the new figure.
        cmap: Colormap name for ``values``.
        vmin: Lower end of the colour range (default: the values' minimum).
        vmax: Upper end of the colour range (default: the values' maximum).
        colorbar_label: Label of the colour bar.
        colorbar: Add a colour bar when ``values`` are given.
        title: Axes title.
        axis_limits: ``[low, high]`` for all three axes (default: fitted to the mesh).
        mirror: Rebuild the full part from a quarter in the positive quadrant.
        shade: Light faces by their normals (``False`` keeps colours equal to the colour bar's).
        **kwargs: Passed to ``Poly3DCollection`` (``facecolors``, ``edgecolors``, ``alpha``, ...).

    Returns:
        The Axes; ``(ax, colorbar)`` when ``values`` are given (the bar ``None`` without
        ``colorbar``).
    """
    nodes = _xyz(vertices, "vertices")
    index = np.asarray(faces)
    if index.ndim != 2:
        raise ValueError(f"faces must have shape (n_faces, k), not {index.shape}")
    index = index.astype(np.int64, copy=False)
    if index.size and (index.min() < 0 or index.max() >= len(nodes)):
        raise ValueError(f"faces refer to nodes outside 0..{len(nodes) - 1}")
    colour = _per_row(values, len(index), "faces")
    if mirror:
        for axis in (1, 0):
            copy = nodes.copy()
            copy[:, axis] *= -1
            index = np.vstack([index, (index + len(nodes))[:, ::-1]])  # keep normals outward
            nodes = np.vstack([nodes, copy])
            if colour is not None:
                colour = np.concatenate([colour, colour])
    pyplot()
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    ax, _ = _axes_3d(ax, figsize)
    kwargs["shade"] = shade
    bar = None
    if colour is not None:
        rgba, mappable = _colours(colour, cmap, vmin, vmax)
        kwargs.setdefault("facecolors", rgba)
        kwargs.setdefault("edgecolors", rgba)
        ax.add_collection3d(Poly3DCollection(nodes[index], **kwargs))
        if colorbar:
            bar = _colorbar(ax, mappable, colorbar_label, shrink=0.8, pad=0.1)
    else:
        kwargs.setdefault("facecolors", "red")
        kwargs.setdefault("edgecolors", kwargs["facecolors"])
        ax.add_collection3d(Poly3DCollection(nodes[index], **kwargs))
    _frame_3d(ax, nodes, title, axis_limits)
    return ax if colour is None else (ax, bar)


def plot_point_cloud(
    coords: np.ndarray,
    values: np.ndarray | None = None,
    ax: Any = None,
    figsize: tuple[float, float] | None = None,
    cmap: str = "plasma",
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar_label: str | None = None,
    title: str | None = None,
    axis_limits: list[float] | None = None,
    mirror: bool = False,
    colorbar: bool = True,
    **kwargs: Any,
) -> Any:
    """Scatter ``(N, 3)`` points in 3D, solid (red) or coloured by ``values``.

    Args:
        coords: ``(N, 3)`` positions in mm.
        values: One number per point for the colour.
        ax: 3D Axes to draw on (default: a new 10 x 6 inch figure).
        figsize: Size of the new figure.
        cmap: Colormap name for ``values``.
        vmin: Lower end of the colour range.
        vmax: Upper end of the colour range.
        colorbar_label: Label of the colour bar.
        title: Axes title.
        axis_limits: ``[low, high]`` for all three axes (default: fitted to the points).
        mirror: Rebuild the full part from a quarter in the positive quadrant.
        colorbar: Add a colour bar when ``values`` are given (a guideloom addition).
        **kwargs: Passed to ``Axes3D.scatter`` (``s`` 1, ``alpha`` 0.8, ``depthshade`` False,
            ``c`` "red" without values).

    Returns:
        The Axes; ``(ax, colorbar)`` when ``values`` are given.
    """
    points = _xyz(coords, "coords")
    colour = _per_row(values, len(points), "points")
    if mirror:
        points, (colour,) = _mirrored(points, [colour], (False,))
    ax, _ = _axes_3d(ax, figsize)
    kwargs.setdefault("s", 1.0)
    kwargs.setdefault("alpha", 0.8)
    kwargs.setdefault("depthshade", False)
    bar = None
    if colour is not None:
        rgba, mappable = _colours(colour, cmap, vmin, vmax)
        ax.scatter(points[:, 0], points[:, 1], points[:, 2], c=rgba, **kwargs)
        if colorbar:
            bar = _colorbar(ax, mappable, colorbar_label, shrink=0.7, pad=0.1)
    else:
        kwargs.setdefault("c", "red")
        ax.scatter(points[:, 0], points[:, 1], points[:, 2], **kwargs)
    _frame_3d(ax, points, title, axis_limits)
    return ax if colour is None else (ax, bar)


def plot_vectors(
    coords: np.ndarray,
    vectors: np.ndarray,
    values: np.ndarray | None = None,
    ax: Any = None,
    figsize: tuple[float, float] | None = None,
    step: int = 25,
    scale: float = 10.0,
    cmap: str = "plasma",
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar_label: str | None = None,
    title: str | None = None,
    axis_limits: list[float] | None = None,
    mirror: bool = False,
    arrow_kwargs: dict[str, Any] | None = None,
    outline_kwargs: dict[str, Any] | None = None,
) -> Any:
    """Draw a 3D vector field as arrows with a dark outline (arrows only, no surface).

    To put arrows on a surface, draw :func:`plot_mesh` first and pass its Axes as ``ax``;
    then the Axes' labels, limits and view are left as they are.

    Args:
        coords: ``(N, 3)`` arrow tails in mm.
        vectors: ``(N, 3)`` arrow components (e.g. springback displacement).
        values: One number per point for the arrows' colour (and a colour bar).
        ax: 3D Axes to draw on (default: a new 10 x 6 inch figure).
        figsize: Size of the new figure.
        step: Draw every ``step``-th arrow (after mirroring).
        scale: Multiply the vectors by this for drawing.
        cmap: Colormap name for ``values``.
        vmin: Lower end of the colour range.
        vmax: Upper end of the colour range.
        colorbar_label: Label of the colour bar.
        title: Axes title (new figures only).
        axis_limits: ``[low, high]`` for all three axes (new figures only).
        mirror: Rebuild the full field from a quarter (tails and vectors reflected).
        arrow_kwargs: Passed to ``quiver`` for the arrows (``color`` without values, default
            red; ``alpha`` 0.8; ``arrow_length_ratio`` 0.4).
        outline_kwargs: Passed to ``quiver`` for the outline (black, linewidth 1.5);
            ``{"linewidth": 0}`` hides it.

    Returns:
        The Axes; ``(ax, colorbar)`` when ``values`` are given.
    """
    if step < 1:
        raise ValueError(f"step must be at least 1, not {step}")
    tails = _xyz(coords, "coords")
    arrows = np.asarray(vectors, dtype=np.float64)
    if arrows.shape != tails.shape:
        raise ValueError(f"vectors {arrows.shape} must match coords {tails.shape}")
    colour = _per_row(values, len(tails), "points")
    if mirror:
        tails, (mirrored, colour) = _mirrored(tails, [arrows, colour], (True, False))
        arrows = np.asarray(mirrored, dtype=np.float64)  # float64 already: no copy
    ax, own = _axes_3d(ax, figsize)
    style = dict(arrow_kwargs or {})
    style.setdefault("alpha", 0.8)
    style.setdefault("arrow_length_ratio", 0.4)
    solid = style.pop("color", None)
    outline = {"color": "black", "linewidth": 1.5, "alpha": style["alpha"],
               "arrow_length_ratio": style["arrow_length_ratio"], **(outline_kwargs or {})}
    where, what = tails[::step], arrows[::step] * scale
    quiver_args = (*where.T, *what.T)
    ax.quiver(*quiver_args, **outline)
    bar = None
    mappable = None
    if colour is not None:
        rgba, mappable = _colours(colour, cmap, vmin, vmax)
    if mappable is not None and solid is None:
        ax.quiver(*quiver_args, colors=rgba[::step], **style)
    else:
        ax.quiver(*quiver_args, color=solid or "red", **style)
    if mappable is not None:
        bar = _colorbar(ax, mappable, colorbar_label, shrink=0.7, pad=0.1)
    if own:
        _frame_3d(ax, tails, title, axis_limits)
    return ax if colour is None else (ax, bar)


def plot_2d_projection(
    coords: np.ndarray,
    values: np.ndarray | None = None,
    projection: str = "xy",
    ax: Any = None,
    figsize: tuple[float, float] | None = None,
    cmap: str = "plasma",
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar_label: str | None = None,
    title: str | None = None,
    **kwargs: Any,
) -> Any:
    """Scatter points projected onto a plane (``"xy"`` top view, ``"xz"``, ``"yz"``), equal scale.

    Args:
        coords: ``(N, 3)`` positions in mm.
        values: One number per point for the colour (and a colour bar).
        projection: The plane: ``"xy"``, ``"xz"`` or ``"yz"``.
        ax: 2D Axes to draw on (default: a new 10 x 6 inch figure).
        figsize: Size of the new figure.
        cmap: Colormap name for ``values``.
        vmin: Lower end of the colour range.
        vmax: Upper end of the colour range.
        colorbar_label: Label of the colour bar.
        title: Axes title.
        **kwargs: Passed to ``Axes.scatter`` (``s`` 2, ``alpha`` 0.8, ``c`` "red" without values).

    Returns:
        The Axes; ``(ax, colorbar)`` when ``values`` are given.
    """
    if projection not in _PROJECTIONS:
        raise ValueError(f"projection must be one of {sorted(_PROJECTIONS)}, not {projection!r}")
    points = _xyz(coords, "coords")
    colour = _per_row(values, len(points), "points")
    first, second = _PROJECTIONS[projection]
    if ax is None:
        ax = pyplot().figure(figsize=figsize or (10, 6), dpi=DEFAULT_DPI).add_subplot()
    kwargs.setdefault("s", 2.0)
    kwargs.setdefault("alpha", 0.8)
    bar = None
    if colour is not None:
        rgba, mappable = _colours(colour, cmap, vmin, vmax)
        ax.scatter(points[:, first], points[:, second], c=rgba, **kwargs)
        bar = _colorbar(ax, mappable, colorbar_label)
    else:
        kwargs.setdefault("c", "red")
        ax.scatter(points[:, first], points[:, second], **kwargs)
    if title:
        ax.set_title(title)
    ax.set_xlabel(f"{projection[0].upper()} [mm]")
    ax.set_ylabel(f"{projection[1].upper()} [mm]")
    ax.set_aspect("equal")
    return ax if colour is None else (ax, bar)
