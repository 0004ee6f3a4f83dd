"""matplotlib for guideloom's plots, imported only when a plot is drawn (``guideloom[plot]``)."""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_DPI", "pyplot"]

#: Resolution of the figures guideloom's plotting functions create.
DEFAULT_DPI = 150


def pyplot() -> Any:
    """``matplotlib.pyplot``, or an ImportError saying how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "plotting needs matplotlib: pip install 'guideloom[plot]' (or pip install matplotlib)"
        ) from exc
    return plt
