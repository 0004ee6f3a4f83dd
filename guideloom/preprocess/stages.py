"""The stages behind one interface: what each reads, its identity, and its run on one file.

``force``, ``sheet`` and ``oil`` are tables (:class:`TableStage`: one raw ``<group>/data``
dataset in, one processed group out, rddac's attributes); ``pointcloud`` is adapted from its
package's contract (:class:`PointcloudStage`), imported only when it is asked for.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from guideloom.preprocess import force, oil, params, sheet

logger = logging.getLogger(__name__)

#: Bumped when a table stage's output for the same input and parameters changes.
RECIPE_VERSION = 1
STATUSES = ("processed", "exists", "no_group", "no_file", "error")


@dataclass(frozen=True)
class TableStage:
    """A stage that turns one raw table into one processed group."""

    name: str
    group: str
    columns: tuple[str, ...] | None  # None: the raw table's own (force)
    units: tuple[str, ...] | None
    process: Callable[..., tuple[np.ndarray, dict[str, Any]]]

    @property
    def members(self) -> tuple[str, ...]:
        """The raw HDF5 paths the stage reads."""
        return (f"{self.group}/data",)

    def fingerprint(self, values: Mapping[str, Any], prepared: Any = None) -> str:
        """The identity of this stage's processing (recipe version and parameters)."""
        text = json.dumps({"stage": self.name, "recipe": RECIPE_VERSION, "params": values},
                          sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def run(self, raw: h5py.File, out: h5py.File, values: Mapping[str, Any],
            prepared: Any = None) -> str:
        """Process the group of ``raw`` into ``out``; ``"processed"`` or ``"no_group"``."""
        if self.group not in raw:
            return "no_group"
        node = raw[self.group]
        if not isinstance(node, h5py.Group) or "data" not in node:
            raise ValueError(f"'{self.group}' has no 'data' dataset")
        data = node["data"][()]
        if self.columns is None:
            columns = force.column_names(node.attrs)
            table, attrs = self.process(data, columns, values)
            units = force.units_for(columns)
        else:
            table, attrs = self.process(data, values)
            columns, units = list(self.columns), list(self.units or ())
        g = out.create_group(self.group)
        g.create_dataset("data", data=table, compression="gzip", compression_opts=4)
        g.attrs["columns"] = list(columns)
        g.attrs["units"] = list(units)
        g.attrs["n_measurements"] = len(table)
        for key, value in attrs.items():
            g.attrs[key] = value
        return "processed"


@dataclass(frozen=True)
class PointcloudStage:
    """The pointcloud package's contract seen as a stage (its ``prepared`` comes from the
    driver's ``prepare``)."""

    name: str = "pointcloud"
    group: str = "pointcloud"

    @property
    def members(self) -> tuple[str, ...]:
        """The raw HDF5 paths the stage reads."""
        return tuple(_pointcloud().MEMBERS)

    def fingerprint(self, values: Mapping[str, Any], prepared: Any = None) -> str:
        """The pointcloud package's identity of its processing."""
        return str(_pointcloud().fingerprint(values, prepared))

    def run(self, raw: h5py.File, out: h5py.File, values: Mapping[str, Any],
            prepared: Any = None) -> str:
        """The pointcloud package's ``process_experiment``."""
        return str(_pointcloud().process_experiment(raw, out, params=values, prepared=prepared))


def _pointcloud() -> Any:
    module = params.pointcloud_module()
    if module is None:
        raise ValueError("the pointcloud stage is not installed (guideloom.preprocess."
                         "pointcloud); run the force, sheet and oil stages by naming them")
    return module


Stage = TableStage | PointcloudStage

STAGES: dict[str, Stage] = {
    "force": TableStage("force", force.GROUP, None, None, force.process),
    "sheet": TableStage("sheet", sheet.GROUP, sheet.COLUMNS, sheet.UNITS, sheet.process),
    "oil": TableStage("oil", oil.GROUP, oil.COLUMNS, oil.UNITS, oil.process),
    "pointcloud": PointcloudStage(),
}


def stage(name: str) -> Stage:
    """The stage called ``name``.

    Raises:
        ValueError: No such modality (one line naming the valid ones).
    """
    if name not in STAGES:
        raise ValueError(f"unknown modality {name!r}; valid: {', '.join(STAGES)}")
    return STAGES[name]


def prepare(names: tuple[str, ...], config: Mapping[str, Mapping[str, Any]], *, out_dir: str,
            data_dir: str, labels: str | None, rebuild: bool) -> dict[str, Any]:
    """What the stages need prepared once on the driver (the pointcloud stage's classifier and
    simulations); small and picklable.

    Raises:
        ValueError: ``pointcloud`` is asked for and not installed.
        FileNotFoundError: Its simulations cannot be reached.
    """
    if "pointcloud" not in names:
        return {}
    return {"pointcloud": _pointcloud().prepare(config["pointcloud"], out_dir=out_dir,
                                                data_dir=data_dir, labels=labels,
                                                rebuild=rebuild)}
