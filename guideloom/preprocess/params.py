"""The processing parameters: rddac 2.0's defaults and keys, a TOML file over them, range checks.

``--dump-config`` prints the defaults as TOML (rddac's tables ``[force]``, ``[sheet]``,
``[oil]``, ``[pointcloud]``); ``--config FILE`` merges a file of the same keys over them. An
unknown table or key, a value of the wrong type or out of range is refused with one line
before anything runs (a silently ignored typo would silently not apply the user's intent).
"""

from __future__ import annotations

import copy
import logging
import math
import tomllib
from collections.abc import Mapping
from typing import Any

from guideloom.preprocess import force, oil, sheet

logger = logging.getLogger(__name__)

TABLE_STAGES = ("force", "sheet", "oil")
MODALITIES = (*TABLE_STAGES, "pointcloud")
Config = dict[str, dict[str, Any]]

_DEFAULTS: dict[str, Mapping[str, Any]] = {"oil": oil.DEFAULTS, "force": force.DEFAULTS,
                                           "sheet": sheet.DEFAULTS}


def pointcloud_module() -> Any:
    """The pointcloud stage's package (imported on first use: it needs scikit-learn and the
    simulations), or ``None`` when it is not installed."""
    try:
        from guideloom.preprocess import pointcloud  # type: ignore[attr-defined]
    except ImportError as exc:
        if exc.name is not None and not exc.name.startswith("guideloom.preprocess.pointcloud"):
            logger.debug("pointcloud stage unavailable: %s", exc)
        return None
    return pointcloud


def defaults() -> Config:
    """A fresh copy of every stage's defaults, in rddac's table order."""
    out: Config = {name: dict(values) for name, values in _DEFAULTS.items()}
    pc = pointcloud_module()
    if pc is not None:
        out["pointcloud"] = copy.deepcopy(dict(pc.DEFAULTS))
    return out


def _number(table: str, key: str, value: Any, *, integer: bool = False,
            low: float | None = None, low_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        kind = "an integer" if integer else "a number"
        raise ValueError(f"[{table}] {key} = {value!r}: must be {kind}")
    if not math.isfinite(value):
        raise ValueError(f"[{table}] {key} = {value!r}: must be finite")
    if low is not None and (value <= low if low_open else value < low):
        bound = f"> {low:g}" if low_open else f">= {low:g}"
        raise ValueError(f"[{table}] {key} = {value!r}: must be {bound}")


def check(config: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse an unknown stage or key, or a value out of range, with one line.

    Raises:
        ValueError: What is wrong, naming the table and key.
    """
    known = defaults()
    for table, values in config.items():
        if table not in known:
            if table == "pointcloud":
                raise ValueError("[pointcloud]: the pointcloud stage is not installed "
                                 "(guideloom.preprocess.pointcloud)")
            raise ValueError(f"unknown config table [{table}]; valid: {', '.join(known)}")
        if not isinstance(values, Mapping):
            raise ValueError(f"[{table}] must be a table of key = value pairs")
        unknown = [k for k in values if k not in known[table]]
        if unknown:
            raise ValueError(f"unknown key '{unknown[0]}' in [{table}]; valid: "
                             f"{', '.join(known[table])}")
    merged = merge(config)
    f, s, o = merged["force"], merged["sheet"], merged["oil"]
    for key in ("time_window_start", "time_window_end"):
        _number("force", key, f[key], low=0.0)
    if f["time_window_end"] <= f["time_window_start"]:
        raise ValueError(f"[force] time_window_end = {f['time_window_end']!r}: must be greater "
                         f"than time_window_start = {f['time_window_start']!r}")
    _number("force", "position_precision_mm", f["position_precision_mm"], low=0.0, low_open=True)
    _number("sheet", "last_n", s["last_n"], integer=True, low=1)
    _number("oil", "max_sensor_position", o["max_sensor_position"], integer=True, low=1)
    _number("oil", "output_length", o["output_length"], integer=True, low=1)
    _number("oil", "hampel_window", o["hampel_window"], integer=True, low=0)
    _number("oil", "hampel_k", o["hampel_k"], low=0.0, low_open=True)
    _number("oil", "value_quantization", o["value_quantization"], low=0.0)
    if "pointcloud" in merged:
        pc = pointcloud_module()
        if pc is not None:
            pc.check_params(merged["pointcloud"])


def merge(config: Mapping[str, Mapping[str, Any]] | None) -> Config:
    """The defaults with ``config``'s values over them (unchecked: see :func:`check`)."""
    out = defaults()
    for table, values in (config or {}).items():
        out.setdefault(table, {}).update(values)
    return out


def load(path: str) -> Config:
    """A TOML file of rddac's keys merged over the defaults, checked.

    Raises:
        ValueError: The file is not TOML, or names an unknown table or key, or a value is out
            of range (one line, naming the file).
        OSError: The file cannot be read.
    """
    with open(path, "rb") as fh:
        try:
            user = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path}: not TOML ({exc})") from exc
    try:
        check(user)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
    return merge(user)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def dump() -> str:
    """The defaults as a TOML file to edit and pass back with ``--config``."""
    lines = ["# guideloom preprocess: the default processing parameters (rddac 2.0's reference",
             "# recipe). Edit values and pass the file with: guideloom preprocess --config FILE",
             ""]
    values = defaults()
    for table, entries in values.items():
        lines.append(f"[{table}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in entries.items()]
        lines.append("")
    if "pointcloud" not in values:
        lines += ["# [pointcloud]: the pointcloud stage is not installed here", ""]
    return "\n".join(lines)
