"""Every knob of guideloom in one place: ``guideloom.config``.

Each key has a default, and most have an environment variable (``decode_threads`` ←
``GUIDELOOM_DECODE_THREADS``). :func:`get` answers, in this order, a value given to :func:`set`,
the environment variable as it is *now*, the default: nothing is read at import time, so setting
either after ``import guideloom`` takes effect at the next use. :func:`set` applies at once and,
used as a context manager, undoes itself on exit::

    import guideloom
    guideloom.config.get("decode_threads")            # None: one per CPU this process may use
    with guideloom.config.set(decode_threads=2, checksums=False):
        ...
    guideloom.config.set(dataverse_url="https://demo.dataverse.org")  # from now on

Values are checked when set and when read from the environment; a bad one raises
:class:`~guideloom.errors.ConfigError` naming the key or the variable. ``docs/configuration.md``
lists every key (a test keeps the table and :data:`KNOBS` the same).

Why not donfig (zarr-python 3's choice): donfig turns environment variables into values with
``ast.literal_eval`` once, when the config object is made, and merges them with no memory of
where a value came from; here a token like ``123e4`` must stay text, a variable set after import
must count, and an error must name the variable. That needs a table of typed keys, which is all
this module is (as xarray's ``set_options``, plus the environment).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from guideloom.errors import ConfigError
from guideloom.runtime.cache_bounds import DEFAULTS

__all__ = ["ENV_ONLY", "KNOBS", "Knob", "check_environment", "environ", "get", "set", "source"]

PREFIX = "GUIDELOOM_"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Knob:
    """One configuration key.

    Attributes:
        key: The name given to :func:`get` and :func:`set`.
        default: The value when neither :func:`set` nor the environment gives one.
        kind: ``int``, ``float``, ``bool`` or ``str``: what a value must be.
        doc: One line for the table in ``docs/configuration.md``.
        minimum: The smallest number allowed (numbers only).
        env: Its environment variable (``GUIDELOOM_`` + the key in capitals), or ``None``.
        choices: The values allowed (text only), or empty for any.
        unbounded: A bound where ``0`` means none: the environment may also say ``none``.
        above: ``minimum`` itself is not allowed (a timeout of 0 s waits for nothing).
        paths: Text naming absolute folders separated by ``os.pathsep`` (a list of them may
            be given to :func:`set`).
    """

    key: str
    default: Any
    kind: type
    doc: str
    minimum: float | None = None
    env: str | None = ""
    choices: tuple[str, ...] = ()
    unbounded: bool = False
    above: bool = False
    paths: bool = False

    @property
    def variable(self) -> str | None:
        """The environment variable mapped onto this key."""
        return PREFIX + self.key.upper() if self.env == "" else self.env

    def check(self, value: Any, where: str) -> Any:
        """``value`` as this key's type; ``where`` names it in the error."""
        if value is None:
            return None
        kind = self.kind
        if self.paths:
            return self._check_paths(value, where)
        ok = (isinstance(value, bool) if kind is bool
              else isinstance(value, int) and not isinstance(value, bool) if kind is int
              else isinstance(value, int | float) and not isinstance(value, bool)
              if kind is float else isinstance(value, str))
        if not ok:
            raise ConfigError(f"{where} must be {_kind_text(self)}, not {value!r}")
        if kind is float and not math.isfinite(value):
            raise ConfigError(f"{where} must be a finite number ({self.key}: {self.doc}), "
                              f"not {value!r}")
        if self.minimum is not None and (value <= self.minimum if self.above
                                         else value < self.minimum):
            bound = "above" if self.above else "at least"
            raise ConfigError(f"{where} must be {bound} {self.minimum:g} ({self.key}: "
                              f"{self.doc}), not {value!r}")
        if self.choices and value not in self.choices:
            raise ConfigError(f"{where} must be one of {', '.join(self.choices)}, not {value!r}")
        return float(value) if kind is float else value

    def _check_paths(self, value: Any, where: str) -> str | None:
        """``value`` (text, a path or a list of them) as ``os.pathsep``-separated text."""
        if isinstance(value, str | os.PathLike):
            value = os.fspath(value).split(os.pathsep)
        if not isinstance(value, list | tuple) or not all(
                isinstance(p, str | os.PathLike) for p in value):
            raise ConfigError(f"{where} must be folders (text separated by {os.pathsep!r}, "
                              f"or a list), not {value!r}")
        folders = [os.fspath(p) for p in value if os.fspath(p)]
        for folder in folders:
            if not os.path.isabs(folder) or "\0" in folder:
                raise ConfigError(f"{where} must name absolute folders ({self.key}: "
                                  f"{self.doc}), not {folder!r}")
        return os.pathsep.join(folders) or None

    def parse(self, text: str) -> Any:
        """The value of the environment variable's ``text``."""
        where = f"{self.variable}={text!r}"
        if self.paths:
            return self.check(text, where)
        if self.kind is str:
            if self.choices:  # log levels and the like: any case
                text = next((c for c in self.choices if c.lower() == text.lower()), text)
            return self.check(text, where) if text else None
        cleaned = text.strip().lower()
        if not cleaned:
            return None
        if self.unbounded and cleaned == "none":
            return 0
        try:
            if self.kind is bool:
                if cleaned not in _TRUE + _FALSE:
                    raise ValueError(cleaned)
                value: Any = cleaned in _TRUE
            else:
                value = self.kind(cleaned)
        except (ValueError, OverflowError):
            raise ConfigError(f"{where}: expected {_kind_text(self)}") from None
        return self.check(value, where)


def _kind_text(knob: Knob) -> str:
    if knob.unbounded:
        return "a whole number (0, or 'none' in the environment: no bound)"
    if knob.kind is bool:
        return "true or false (1/0, yes/no, on/off in the environment)"
    return {int: "an integer", float: "a number", str: "text"}[knob.kind]


_KNOBS = [
    # reading
    Knob("decode_threads", None, int, "Threads (the caller's included) that decode one "
         "dataset; unset: the CPUs this process may use, or its share on a cluster worker",
         minimum=1),
    Knob("inflate", None, str, "zlib back end of the fast read path: libdeflate, deflate, isal "
         "or zlib; unset: the fastest importable one (an unusable one warns and falls back)"),
    Knob("native", True, bool, "Read local records with the native HDF5 reader (false: every "
         "record through h5py)"),
    Knob("dataverse_version", None, str, "The dataset version a DOI data_dir reads; unset: "
         "2.0, the release rddac 2.0 downloads"),
    Knob("cache_dir", None, str, "guideloom's on-disk cache (remote indexes); unset: "
         "$XDG_CACHE_HOME/guideloom, else ~/.cache/guideloom"),
    Knob("trusted_roots", None, str, "Folders (absolute, separated by ':') into which a "
         "data directory's symbolic links made by other users are followed (--trust-root "
         "adds to them); your own links are followed anyway", paths=True),
    Knob("cache_max_mb", 256.0, float, "Size bound of the on-disk cache in MiB (the entries "
         "used longest ago go first)", minimum=0.0),
    # writing
    Knob("checksums", True, bool, "Take write-time checksums (false only for cost "
         "measurements: the export cannot be verified)"),
    Knob("keep_retired", 2, int, "Replaced generations of an export kept beside it while "
         "readers still have them open; beyond that the oldest are removed even while read "
         "(their readers get an error, never other rows)", minimum=0),
    # where jobs run
    Knob("cluster_state_dir", None, str, "State folder of clusters started by "
         "cluster/local.py (TLS credentials, scheduler file); unset: "
         "~/.cache/guideloom/local-cluster"),
    Knob("jobqueue_config", None, str, "The dask-jobqueue settings file for SLURM/PBS worker "
         "jobs; unset: cluster/jobqueue.yaml, else your Dask config"),
    # the published release
    Knob("dataverse_url", None, str, "Dataverse server of guideloom info/download; unset: "
         "DaRUS"),
    Knob("dataverse_token", None, str, "Dataverse API token (drafts, restricted files)"),
    # remote reads (guideloom.read, guideloom.net.deadline)
    Knob("http_timeout", None, float, "Seconds an HTTP request's answer (status line and "
         "headers) may take in all, and the base of its body's deadline (plus 1 s per 4 KiB; "
         "1 KiB/s for a body of unknown size); unset: 60", minimum=0, above=True),
    Knob("http_retries", None, int, "Retries of a failed remote read after the first attempt; "
         "unset: 5", minimum=0),
    Knob("input_racy_s", 2.0, float, "An update trusts an input's unchanged size, times and "
         "inode only when the file last changed this many seconds before the export that "
         "recorded them started (else it hashes the input: git's racy rule)", minimum=0.0),
    Knob("input_hold_mb", 0.0, float, "A local input up to this size (MiB) is read once "
         "into memory, hashed for its content digest and decoded from there; a larger one is "
         "hashed on a helper thread beside its decode (0, the default: none is held; "
         "measured slower in wall time, see docs/updating.md)", minimum=0.0),
    Knob("remote_readahead", 8, int, "Remote records fetched ahead of the one being used (0: "
         "none)", minimum=0),
    # messages
    Knob("log_level", "INFO", str, "Lowest level of the guideloom log records the command line "
         "prints to stderr (DEBUG shows the fallbacks); Python code configures logging itself",
         choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")),
    Knob("phase_line_s", 1.0, float, "Seconds a phase after the tasks must last before the "
         "terminal shows its line and progress bar (0: every phase)", minimum=0.0),
    # the cost model that decides where a job runs (benchmarks/export.py measures them)
    Knob("decode_bytes_per_s", 400e6, float, "In-process export speed in decoded bytes/s "
         "(cost model)", minimum=1.0),
    Knob("per_record_s", 0.7e-3, float, "In-process seconds per experiment beyond its bytes "
         "(cost model)", minimum=0.0),
    Knob("cluster_start_s", 2.0, float, "Seconds an embedded cluster costs a job (start, "
         "imports, close); a job must save more to start one", minimum=0.0),
    Knob("fork_start_s", 0.2, float, "Seconds running an export's partitions in processes "
         "forked from the driver costs it (fork, copy-on-write, per-partition fsyncs); a job "
         "too small for a cluster must save more to fork", minimum=0.0),
    Knob("warm_dispatch_s", 0.05, float, "Seconds a job costs more on an already running "
         "cluster than in-process", minimum=0.0),
    Knob("driver_probe_max_s", 0.05, float, "A first record estimated cheaper than this is "
         "probed in the driver, not on a worker", minimum=0.0),
    Knob("extract_bytes_per_s", 800e6, float, "guideloom extract: copy speed in bytes/s "
         "(cost model)", minimum=1.0),
    Knob("extract_per_member_s", 1e-3, float, "guideloom extract: seconds per zip member "
         "beyond its bytes (cost model)", minimum=0.0),
]


def _cache_knobs() -> list[Knob]:
    """``cache_<name>_entries`` (and ``_bytes`` where the cache weighs its entries) for every
    in-process cache of :mod:`guideloom.runtime.caches`, read when the cache adds an entry."""
    knobs = []
    for name, bound in DEFAULTS.items():
        knobs.append(Knob(f"cache_{name}_entries", bound.entries or 0, int,
                          f"Entries kept in the in-process cache of {bound.doc} (0: no bound)",
                          minimum=0, unbounded=True))
        if bound.nbytes is not None:
            knobs.append(Knob(f"cache_{name}_bytes", bound.nbytes, int,
                              f"Bytes kept in the in-process cache of {bound.doc} (0: no bound)",
                              minimum=0, unbounded=True))
    return knobs


_KNOBS += _cache_knobs()
KNOBS: Mapping[str, Knob] = {k.key: k for k in _KNOBS}

# variables read only from the environment: the machinery's, not knobs for users
ENV_ONLY: Mapping[str, str] = {
    "GUIDELOOM_DRIVER": "Set by the embedded cluster for its workers (`pid:create_time` of the "
                        "driver they die with)",
    "GUIDELOOM_FAULT_POINT": "Tests: SIGKILL this process at the named fault point",
    "GUIDELOOM_PAUSE_POINT": "Tests: hold this process at the named point …",
    "GUIDELOOM_PAUSE_FIFO": "Tests: … until this FIFO is written",
}

_lock = threading.Lock()
_overrides: dict[str, Any] = {}


def _knob(key: str) -> Knob:
    try:
        return KNOBS[key]
    except KeyError:
        raise ConfigError(f"unknown configuration key {key!r}; the keys are "
                          f"{', '.join(KNOBS)}") from None


def get(key: str) -> Any:
    """The value of ``key``: from :func:`set`, else its environment variable, else the default.

    Raises:
        ConfigError: ``key`` is unknown, or its environment variable holds a bad value.
    """
    knob = _knob(key)
    with _lock:
        if key in _overrides:
            return _overrides[key]
    text = os.environ.get(knob.variable) if knob.variable else None
    if text is not None:
        value = knob.parse(text)
        if value is not None:
            return value
    return knob.default


def check_environment() -> None:
    """Read every key's environment variable now (the command line does, before anything
    else), so that a bad value fails at once, naming the variable, and not later inside a job
    where another error could hide it.

    Raises:
        ConfigError: The first variable holding a bad value.
    """
    for knob in _KNOBS:
        text = os.environ.get(knob.variable) if knob.variable else None
        if text is not None:
            knob.parse(text)


def source(key: str) -> str:
    """Where ``key``'s value comes from: ``"set"``, ``"environment"`` or ``"default"``."""
    knob = _knob(key)
    with _lock:
        if key in _overrides:
            return "set"
    text = os.environ.get(knob.variable) if knob.variable else None
    return "environment" if text is not None and knob.parse(text) is not None else "default"


class set:
    """Set keys now (``None`` goes back to the environment and default); as a context manager,
    the previous values come back on exit.

    Raises:
        ConfigError: An unknown key or a bad value (nothing is set then).
    """

    def __init__(self, values: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        wanted = {**dict(values or {}), **kwargs}
        checked = {key: _knob(key).check(value, f"guideloom.config {key}")
                   for key, value in wanted.items()}
        missing = object()
        with _lock:
            self._previous = {key: _overrides.get(key, missing) for key in checked}
            self._missing = missing
            for key, value in checked.items():
                if value is None:
                    _overrides.pop(key, None)
                else:
                    _overrides[key] = value

    def __enter__(self) -> set:
        return self

    def __exit__(self, *exc: object) -> None:
        with _lock:
            for key, value in self._previous.items():
                if value is self._missing:
                    _overrides.pop(key, None)
                else:
                    _overrides[key] = value


def environ() -> dict[str, str]:
    """The environment variables that give another process (an embedded cluster's worker) the
    values set here with :func:`set`."""
    with _lock:
        items = list(_overrides.items())
    out = {}
    for key, value in items:
        variable = KNOBS[key].variable
        if variable:
            out[variable] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    return out


def table() -> Iterator[tuple[str, str, str, str]]:
    """``(key, environment variable, default, meaning)`` per key, in the documented order."""
    for knob in _KNOBS:
        default = "unset" if knob.default is None else repr(knob.default)
        yield knob.key, knob.variable or "-", default, knob.doc
