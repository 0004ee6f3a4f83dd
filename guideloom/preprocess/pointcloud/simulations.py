"""The DDACS simulations the scans are aligned to: where they are read from, which one matches
an experiment, and its final blank surface mirrored to the full part.

rddac downloads DDACS's ``rddac.zip`` (doi:10.18419/DARUS-4801) with DDACS's ``metadata.json``
and ``process_parameters.csv`` into ``<data-dir>/simulation/``. guideloom reads that folder,
or DDACS's release itself (the DOI, an ``https://`` or fsspec URL) by byte ranges through the
read layer. The candidates are the rows of DDACS's parameter table marked ``rddac``.
"""

from __future__ import annotations

import csv
import io
import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

DDACS_DOI = "doi:10.18419/DARUS-4801"
SIM_SUBDIR = "simulation"
SIM_ARCHIVE = "rddac.zip"
PARAMETERS = "process_parameters.csv"
#: The oil film to friction mapping (linear, clamped): 0.8 g/m^2 -> 0.15, 1.6 g/m^2 -> 0.05.
OIL_LOW, OIL_HIGH = 0.8, 1.6
FRICTION_HIGH, FRICTION_LOW = 0.15, 0.05
_KEPT = 8  # mirrored simulations kept per process


def friction_of(oil_gm2: float) -> float:
    """The friction coefficient matching an oil film in g/m^2."""
    oil = float(np.clip(oil_gm2, OIL_LOW, OIL_HIGH))
    return FRICTION_HIGH - (oil - OIL_LOW) * (FRICTION_HIGH - FRICTION_LOW) / (OIL_HIGH - OIL_LOW)


def mirrored(quarter: np.ndarray) -> np.ndarray:
    """A quarter part's ``(N, 3)`` points mirrored into the four quadrants (``(4N, 3)``)."""
    x, y, z = quarter[:, 0], quarter[:, 1], quarter[:, 2]
    return np.column_stack([np.concatenate([x, -x, x, -x]), np.concatenate([y, y, -y, -y]),
                            np.concatenate([z, z, z, z])])


def default_source(data_dir: str) -> str:
    """``<data_dir>/simulation`` for a local data directory, DDACS's DOI for a remote one."""
    from guideloom.read.roots import folder_of

    folder = folder_of(data_dir)
    return DDACS_DOI if folder is None else str(folder / SIM_SUBDIR)


class Simulations:
    """The simulations of one source (a folder or a remote release), opened lazily.

    Args:
        source: ``<data-dir>/simulation``, DDACS's DOI or a URL of a DDACS-shaped release.
    """

    def __init__(self, source: str):
        self.source = source
        self._dataset: Any = None
        self._table: list[dict[str, str]] | None = None
        self._points: OrderedDict[tuple[int, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()  # a worker's threads share one Simulations

    def __getstate__(self) -> dict[str, Any]:
        return {"source": self.source}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["source"])  # type: ignore[misc]

    def check(self) -> None:
        """Raise FileNotFoundError with one line unless the parameter table can be read."""
        if "://" not in self.source and not self.source.startswith("doi:") \
                and not Path(self.source).is_dir():
            raise FileNotFoundError(
                f"simulations not found: {self.source} is not a folder (the pointcloud stage "
                "aligns each scan to its DDACS simulation: `guideloom download` without --no-sim "
                f"fetches them, or pass a data directory whose {SIM_SUBDIR}/ holds them)")
        try:
            self.table()
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"simulations not usable at {self.source}: {exc}") from None

    def _root(self) -> Any:
        from guideloom.read.roots import open_root

        return open_root(self.source)

    def table(self) -> list[dict[str, str]]:
        """The candidate simulations (rows of DDACS's parameter table marked ``rddac``, in its
        order): ``index, geometry, blankholder_force`` (N), ``sheet_metal_thickness`` (mm),
        ``friction_coefficient``."""
        if self._table is None:
            raw, where = self._root().read_bytes(PARAMETERS, "DDACS's parameter table")
            rows = list(csv.DictReader(io.StringIO(raw.decode("utf-8-sig"))))
            self._table = [r for r in rows
                           if r.get("rddac", "true").strip().lower() in ("true", "1", "1.0")]
            logger.debug("%d candidate simulations from %s", len(self._table), where)
        return self._table

    def match(self, geometry: str, blankholder_kn: int, sheet_um: float, oil_gm2: float
              ) -> dict[str, Any]:
        """The simulation of the same geometry and blankholder force nearest in sheet
        thickness plus friction (from the oil film).

        Raises:
            ValueError: No simulation has this geometry and force.
        """
        rows = [r for r in self.table() if r["geometry"] == geometry
                and float(r["blankholder_force"]) == blankholder_kn * 1000.0]
        if not rows:
            raise ValueError(f"no simulation of geometry {geometry!r} at {blankholder_kn} kN "
                             f"in {self.source}")
        sheet_mm = sheet_um / 1000.0
        friction = friction_of(oil_gm2)
        sheets = np.array([float(r["sheet_metal_thickness"]) for r in rows])
        frictions = np.array([float(r["friction_coefficient"]) for r in rows])
        err_sheet = np.abs(sheets - sheet_mm)
        err_friction = np.abs(frictions - friction)
        best = int(np.argmin(err_sheet + err_friction))
        row = rows[best]
        return {"simulation_id": int(float(row["index"])),
                "matched_shtk": float(row["sheet_metal_thickness"]),
                "matched_fc": float(row["friction_coefficient"]),
                "error_shtk": float(err_sheet[best]), "error_fc": float(err_friction[best])}

    def points(self, simulation_id: int, op: str) -> np.ndarray:
        """The final blank node positions of one operation, mirrored to the full part."""
        key = (simulation_id, op.lower())
        with self._lock:
            if key in self._points:
                self._points.move_to_end(key)
                return self._points[key]
        from guideloom.h5_tools import open_h5
        from guideloom.select.manifest import load
        from guideloom.select.presets import DDACS_SPEC

        with self._lock:
            if self._dataset is None:
                self._dataset = load(self.source, spec=DDACS_SPEC)
        path = f"{op.upper()}/blank/node_displacement"
        with open_h5(simulation_id, data_dir=self.source, dataset=self._dataset) as f:
            if path not in f:
                raise KeyError(f"simulation {simulation_id} in {self.source} has no {path}")
            quarter = np.asarray(f[path][-1], dtype=np.float64)
        points = mirrored(quarter)
        with self._lock:
            self._points[key] = points
            while len(self._points) > _KEPT:
                self._points.popitem(last=False)
        return points
