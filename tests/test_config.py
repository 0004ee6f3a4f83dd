"""guideloom.config: one table of keys, environment variables read at use, checked values."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import guideloom
from guideloom import config
from guideloom.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "configuration.md"

# a value per key, as environment text and as the value it must become
SAMPLES = {
    "decode_threads": ("3", 3),
    "inflate": ("zlib", "zlib"),
    "native": ("0", False),
    "dataverse_version": ("1.0", "1.0"),
    "cache_dir": ("/srv/cache", "/srv/cache"),
    "trusted_roots": ("/scratch/rddac:/srv/h5:", "/scratch/rddac:/srv/h5"),
    "cache_max_mb": ("64", 64.0),
    "checksums": ("0", False),
    "keep_retired": ("5", 5),
    "cluster_state_dir": ("/srv/state", "/srv/state"),
    "jobqueue_config": ("/srv/jobqueue.yaml", "/srv/jobqueue.yaml"),
    "dataverse_url": ("https://demo.dataverse.org", "https://demo.dataverse.org"),
    "dataverse_token": ("123e4", "123e4"),  # text stays text
    "http_timeout": ("2.5", 2.5),
    "http_retries": ("1", 1),
    "input_racy_s": ("0.5", 0.5),
    "input_hold_mb": ("0", 0.0),
    "remote_readahead": ("0", 0),
    "log_level": ("debug", "DEBUG"),
    "phase_line_s": ("0", 0.0),
    "decode_bytes_per_s": ("1e8", 1e8),
    "per_record_s": ("0.002", 0.002),
    "cluster_start_s": ("5", 5.0),
    "fork_start_s": ("0.5", 0.5),
    "warm_dispatch_s": ("0.5", 0.5),
    "driver_probe_max_s": ("0", 0.0),
    "extract_bytes_per_s": ("2e9", 2e9),
    "extract_per_member_s": ("0.01", 0.01),
    # the in-process cache bounds: a number, and "none" for no bound
    **{key: ("5", 5) for key in config.KNOBS if key.startswith("cache_") and key.endswith(
        ("_entries", "_bytes")) and key != "cache_output_names_entries"},
    "cache_output_names_entries": ("none", 0),
}


def _doc_rows() -> list[list[str]]:
    """The rows of the knob table in docs/configuration.md (four columns)."""
    rows = []
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows.append([c.strip("`") for c in cells])
    return rows


def test_the_docs_table_lists_exactly_the_registered_keys_with_their_defaults():
    rows = _doc_rows()
    assert [r[0] for r in rows] == list(config.KNOBS)
    for key, variable, default, meaning in rows:
        knob = config.KNOBS[key]
        assert variable == knob.variable
        assert (None if default == "unset" else knob.parse(default)) == knob.default, key
        assert meaning
    env_only = re.findall(r"^\| `(GUIDELOOM_[A-Z_<>]+)` \| [^|]+\|$", DOC.read_text(), re.M)
    assert env_only == list(config.ENV_ONLY)


def test_every_guideloom_variable_in_the_code_is_a_key_or_listed_env_only():
    named = set()
    for path in (ROOT / "guideloom").rglob("*.py"):
        named |= set(re.findall(r"\bGUIDELOOM_[A-Z_]+[A-Z]\b", path.read_text()))
    known = {k.variable for k in config.KNOBS.values()} | set(config.ENV_ONLY)
    named = {n for n in named if not n.startswith("GUIDELOOM_CACHE_")
             or n == "GUIDELOOM_CACHE_DIR" or n == "GUIDELOOM_CACHE_MAX_MB"}  # the bounds family
    assert named - {"GUIDELOOM_", "GUIDELOOM_CACHE"} <= known


def test_samples_cover_every_key():
    assert set(SAMPLES) == set(config.KNOBS)


def test_each_variable_reaches_its_key_in_a_fresh_process_even_when_set_after_import(tmp_path):
    script = (
        "import json, os, sys\n"
        "import guideloom, guideloom.export, guideloom.fastread\n"  # nothing read here
        "os.environ.update(json.loads(sys.argv[1]))\n"
        "print(json.dumps({k: guideloom.config.get(k) for k in guideloom.config.KNOBS}))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUIDELOOM_")}
    given = {config.KNOBS[k].variable: text for k, (text, _) in SAMPLES.items()}
    done = subprocess.run([sys.executable, "-c", script, json.dumps(given)], cwd=tmp_path,
                          env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=120, check=True)
    assert json.loads(done.stdout) == {k: value for k, (_, value) in SAMPLES.items()}


def test_importing_reads_no_variable_a_bad_value_fails_at_use_naming_it(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GUIDELOOM_DECODE_THREADS": "two",
           "GUIDELOOM_CHECKSUMS": "maybe"}
    script = ("import guideloom, guideloom.export, guideloom.fastread, guideloom.cluster.runtime\n"
              "from guideloom import fastread\n"
              "try:\n    fastread.decode_threads()\n"
              "except guideloom.ConfigError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "GUIDELOOM_DECODE_THREADS='two': expected an integer"


def test_set_checks_values_and_names_the_key():
    with pytest.raises(ConfigError, match=r"guideloom.config decode_threads must be at least 1"):
        config.set(decode_threads=0)
    with pytest.raises(ConfigError, match=r"guideloom.config checksums must be true or false"):
        config.set(checksums="no")
    with pytest.raises(ConfigError, match="unknown configuration key 'decode_thread'"):
        config.set(decode_thread=2)
    with pytest.raises(ConfigError, match="must be one of DEBUG, INFO"):
        config.set(log_level="LOUD")
    assert config.source("decode_threads") in ("default", "environment")


def test_trusted_roots_are_absolute_folders_given_as_text_or_a_list(monkeypatch):
    with config.set(trusted_roots=["/scratch/a", Path("/scratch/b")]):
        assert config.get("trusted_roots") == "/scratch/a:/scratch/b"
    with pytest.raises(ConfigError, match=r"trusted_roots must name absolute folders.*'rel'"):
        config.set(trusted_roots="/a:rel")
    with pytest.raises(ConfigError, match="trusted_roots must be folders"):
        config.set(trusted_roots=3)
    monkeypatch.setenv("GUIDELOOM_TRUSTED_ROOTS", "scratch")
    with pytest.raises(ConfigError, match="GUIDELOOM_TRUSTED_ROOTS='scratch' must name absolute"):
        config.check_environment()


def test_set_beats_the_environment_and_undoes_itself(monkeypatch):
    monkeypatch.setenv("GUIDELOOM_CLUSTER_START_S", "7")
    assert config.get("cluster_start_s") == 7.0
    with config.set(cluster_start_s=1.5) as _:
        assert config.get("cluster_start_s") == 1.5
        assert config.source("cluster_start_s") == "set"
        assert config.environ()["GUIDELOOM_CLUSTER_START_S"] == "1.5"
        with config.set(cluster_start_s=None):  # back to the environment inside
            assert config.get("cluster_start_s") == 7.0
        assert config.get("cluster_start_s") == 1.5
    assert config.get("cluster_start_s") == 7.0
    monkeypatch.delenv("GUIDELOOM_CLUSTER_START_S")
    assert config.get("cluster_start_s") == 2.0


def test_modules_read_the_configuration_when_used():
    from guideloom import fastread
    from guideloom.cluster import runtime
    from guideloom.formats import checksums

    with config.set(decode_threads=3, checksums=False):
        assert fastread.decode_threads() == 3
        assert fastread.share_cores(8) == 3  # a configured count wins over the share
        assert checksums.enabled() is False
    assert checksums.enabled() is True
    # the cost model: 1 s of work in 4 tasks does not pay a 2 s cluster start, but a 0.1 s one
    if runtime.embedded.default_worker_count() >= 2 and runtime.embedded.running_cluster() is None:
        assert runtime.choose_automatically(1.0, 4)[0] == "in-process"
        with config.set(cluster_start_s=0.1):
            assert runtime.choose_automatically(1.0, 4)[0] == "local-cluster"


def test_the_module_constants_are_the_documented_defaults():
    from guideloom.cluster import runtime
    from guideloom.export import extract, plan

    defaults = {k: v.default for k, v in config.KNOBS.items()}
    assert defaults["decode_bytes_per_s"] == plan.DECODE_BYTES_PER_S
    assert defaults["per_record_s"] == plan.PER_RECORD_S
    assert defaults["driver_probe_max_s"] == plan.DRIVER_PROBE_MAX_S
    assert defaults["cluster_start_s"] == runtime.CLUSTER_START_S
    assert defaults["warm_dispatch_s"] == runtime.WARM_DISPATCH_S
    assert defaults["extract_bytes_per_s"] == extract.COPY_BYTES_PER_S
    assert defaults["extract_per_member_s"] == extract.PER_MEMBER_S
    assert guideloom.config is config
