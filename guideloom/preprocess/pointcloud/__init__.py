"""The ``pointcloud`` stage of ``guideloom preprocess``: rddac 2.0's cleaning of the laser scans.

Per operation (OP10 drawing, OP20 cutting): the luminescence mask and the calibration to mm
(:mod:`.grid`); geometric outlier seeds — steep local planes, small 3-D components — (
:mod:`.cleaning`); two-pass ICP onto the matching DDACS simulation (:mod:`.icp`,
:mod:`.simulations`); seeds of points rising outward and a closing on the neighbour graph; the
random-forest fin classifier (:mod:`.features`, :mod:`.registration`, :mod:`.model`, trained
from rddac's published labels, :mod:`.labels`); a last sweep of small components.

The runner of ``guideloom preprocess`` calls exactly :data:`DEFAULTS`, :func:`check_params`,
:func:`prepare` (once, on the driver), :func:`fingerprint`, :func:`process_experiment` (per
experiment, in any process) and :data:`MEMBERS`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import h5py

from guideloom.preprocess.pointcloud.params import DEFAULTS, check_params, resolved

logger = logging.getLogger(__name__)

__all__ = ["DEFAULTS", "MEMBERS", "Prepared", "check_params", "fingerprint", "prepare",
           "process_experiment"]

#: What the stage reads of a raw file: the scans, and the sheet and oil tables for choosing the
#: simulation when the output does not hold them processed (the root attributes come along).
MEMBERS: tuple[str, ...] = ("pointcloud", "sheet_thickness", "oil_thickness")
STAGE_VERSION = 1

_BUNDLES: dict[tuple[str, str], Mapping[str, dict[str, Any]]] = {}


@dataclass(frozen=True)
class Prepared:
    """What every process needs, small and picklable: the model cache's folder and identity, and
    the simulations' source. The models load once per process on first use."""

    out_dir: str
    model_digest: str
    simulations: str

    def bundles(self) -> Mapping[str, dict[str, Any]]:
        """The fin classifier's bundles by group, each loaded once per process on first use.

        Raises:
            RuntimeError: The cache was replaced by one of another identity since prepare().
        """
        key = (self.out_dir, self.model_digest)
        if key not in _BUNDLES:
            from guideloom.preprocess.pointcloud import model

            meta = json.loads((model.cache_dir(self.out_dir) / "meta.json").read_text())
            found = model.digest({k: meta.get(k) for k in _identity_keys()})
            if found != self.model_digest:
                raise RuntimeError(f"the fin classifier cache under "
                                   f"{model.cache_dir(self.out_dir)} changed since this run "
                                   "began; run again")
            _BUNDLES.clear()
            _BUNDLES[key] = model.Bundles(self.out_dir)
        return _BUNDLES[key]


def _identity_keys() -> tuple[str, ...]:
    from guideloom.preprocess.pointcloud import model

    return tuple(model.identity("", 1, 1))


def prepare(params: Mapping[str, Any], *, out_dir: str, data_dir: str, labels: str | None,
            rebuild: bool, simulations: str | None = None,
            open_raw: Callable[[int], Any] | None = None) -> Prepared:
    """Once, on the driver: check that the simulations are there, then load or train the fin
    classifier (cached under ``<out_dir>/models/``; ``rebuild`` retrains).

    Args:
        params: The ``[pointcloud]`` table (rddac's keys; missing keys take the defaults).
        out_dir: The processed output directory.
        data_dir: The raw data directory or release (the labelled experiments are read there).
        labels: A folder of ``<id>_<op>.npz`` labels, or None for rddac's published ones.
        rebuild: Retrain even when the cache matches.
        simulations: Where the simulations are (default ``<data_dir>/simulation``, or DDACS's
            DOI for a remote ``data_dir``).
        open_raw: How to open a raw experiment by id (default: guideloom's ``open_h5``).

    Raises:
        FileNotFoundError: The simulations (one line), or ``labels``, are not there.
        ValueError: A bad parameter (one line).
        RuntimeError: Too few labelled experiments in ``data_dir`` to train.
    """
    from guideloom.preprocess.pointcloud import labels as labels_mod
    from guideloom.preprocess.pointcloud import model
    from guideloom.preprocess.pointcloud import simulations as sims_mod

    p = resolved(params)
    sims = sims_mod.Simulations(simulations or sims_mod.default_source(str(data_dir)))
    sims.check()
    found = labels_mod.find(labels)
    ident = model.identity(found.sha256(), p["rf_n_estimators"], p["rf_max_depth"])
    if rebuild or not model.cached(out_dir, ident):
        logger.info("fin classifier: training from %s (%s)", found,
                    "rebuild asked" if rebuild else "no matching cache")
        model.train(out_dir, found, open_raw or _opener(str(data_dir)), sims, p, ident)
    else:
        logger.info("fin classifier: cached models under %s", model.cache_dir(out_dir))
    return Prepared(str(out_dir), model.digest(ident), sims.source)


def _opener(data_dir: str) -> Callable[[int], Any]:
    from guideloom.h5_tools import open_h5
    from guideloom.select.manifest import load
    from guideloom.select.presets import RDDAC_SPEC

    dataset = load(data_dir, spec=RDDAC_SPEC)
    return lambda exp_id: open_h5(exp_id, data_dir=data_dir, dataset=dataset)


def fingerprint(params: Mapping[str, Any], prepared: Prepared) -> str:
    """The processing's identity: parameters, model and library versions (stale when it differs)."""
    import numpy
    import scipy

    p = {k: v for k, v in resolved(params).items() if k != "keep_prepared"}
    ident = {"stage": STAGE_VERSION, "params": p, "model": prepared.model_digest,
             "numpy": numpy.__version__, "scipy": scipy.__version__}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def process_experiment(raw: h5py.File, out: h5py.File, *, params: Mapping[str, Any],
                       prepared: Prepared, timings: dict[str, float] | None = None) -> str:
    """Write the ``pointcloud`` group of one processed experiment.

    Args:
        raw: The raw experiment, read-only.
        out: The new processed file (its ``sheet_thickness``/``oil_thickness`` groups, when
            present, give the means that choose the simulation).
        params: The ``[pointcloud]`` table.
        prepared: From :func:`prepare`.
        timings: If given, seconds per phase (``filtering``, ``classifier``, ``icp``) are added.

    Returns:
        ``"processed"``, or ``"no_group"`` when the raw file has no point clouds.

    Raises:
        ValueError, KeyError, OSError: Damaged or incomplete input (the caller names the file).
    """
    from guideloom.preprocess.pointcloud import simulations as sims_mod
    from guideloom.preprocess.pointcloud import stage

    if "pointcloud" not in raw:
        return "no_group"
    sims = _SIMS.get(prepared.simulations)
    if sims is None:
        sims = _SIMS.setdefault(prepared.simulations, sims_mod.Simulations(prepared.simulations))
    clock = stage.Timings()
    status = stage.process(raw, out, resolved(params), sims, prepared.bundles(), clock)
    if timings is not None:
        for phase, seconds in clock.items():
            timings[phase] = timings.get(phase, 0.0) + seconds
    return status


_SIMS: dict[str, Any] = {}
