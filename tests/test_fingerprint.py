"""Job identities that mean the job: stable across processes, changed by any edit of the code a
transform reaches (helpers, constants of the user's modules), blind to memory addresses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from guideloom.demo import make_demo_data

HELPERS = '''
import numpy as np
SCALE = {scale}


def _helper(x):
    return x * SCALE


def transform(rec):
    rows = [r for r in np.asarray(rec["force_data"])[:4]]  # a comprehension: nested code
    return {{"head": _helper(np.stack(rows)), "k": np.float32(sum(v for v in (1, 2)))}}
'''

PRINT_FINGERPRINT = '''
import sys
sys.path.insert(0, sys.argv[1])
import usercode
from guideloom.export.fingerprint import callable_fingerprint
print(callable_fingerprint(usercode.transform))
print(callable_fingerprint(lambda rec: {"x": [v for v in rec]}))
'''


def fingerprint_in_a_new_process(folder: Path) -> list[str]:
    env = {**os.environ, "PYTHONHASHSEED": "random"}
    done = subprocess.run([sys.executable, "-c", PRINT_FINGERPRINT, str(folder)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_same_code_has_the_same_fingerprint_in_every_process(tmp_path):
    (tmp_path / "usercode.py").write_text(HELPERS.format(scale=2.0))
    runs = [fingerprint_in_a_new_process(tmp_path) for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    assert runs[0][0].startswith("usercode:transform#")


def test_editing_a_helper_or_a_constant_changes_the_fingerprint(tmp_path):
    (tmp_path / "usercode.py").write_text(HELPERS.format(scale=2.0))
    first = fingerprint_in_a_new_process(tmp_path)[0]
    (tmp_path / "usercode.py").write_text(HELPERS.format(scale=3.0))
    assert fingerprint_in_a_new_process(tmp_path)[0] != first  # a constant it uses
    (tmp_path / "usercode.py").write_text(HELPERS.format(scale=2.0).replace(
        "return x * SCALE", "return x * SCALE + 0"))
    assert fingerprint_in_a_new_process(tmp_path)[0] != first  # a helper it calls
    (tmp_path / "usercode.py").write_text(HELPERS.format(scale=2.0) + "\nUNUSED = 1\n")
    assert fingerprint_in_a_new_process(tmp_path)[0] == first  # code it does not reach


def test_dry_runs_of_the_shipped_workflow_print_one_job_id(tmp_path):
    make_demo_data(tmp_path / "demo-data", n=8)
    ids = set()
    for _ in range(3):
        done = subprocess.run([sys.executable, "-m", "guideloom", "run", "force_signals",
                               "--dry-run"], cwd=tmp_path, capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": "random"}, timeout=120)
        assert done.returncode == 0, done.stderr
        line = next(x for x in done.stdout.splitlines() if x.startswith("partitions:"))
        ids.add(line.split("(job ")[1].split(",")[0])
    assert len(ids) == 1, ids


def test_changed_inputs_or_storage_format_discard_the_staged_job_with_a_notice(tmp_path,
                                                                              caplog):
    caplog.set_level("INFO", logger="guideloom")
    import guideloom
    from guideloom.export import build_spec, plan_export
    from tests import export_helpers as helpers

    make_demo_data(tmp_path / "d", n=6)

    def identity(**options):
        spec = build_spec("force-curve", "npy", tmp_path / "o", data_dir=tmp_path / "d",
                          record_transform=helpers.first_rows, **options)
        return plan_export(spec, 1).identity

    first = identity()
    assert identity() == first
    os.utime(tmp_path / "d" / "concave.zip", ns=(1, 1))  # the data changed (mtime)
    second = identity()
    assert second != first
    with open(tmp_path / "d" / "process_parameters.csv", "a") as fh:
        fh.write("\n")  # the index table's bytes
    assert identity() != second
    fmt = guideloom.StreamNumpyFormat
    import numpy as np
    one = build_spec("force-curve", "storage", tmp_path / "s", data_dir=tmp_path / "d",
                     options={"storage": guideloom.StreamStorage(
                         tmp_path / "s", fmt(np.dtype([("force", "<f4")])))})
    two = build_spec("force-curve", "storage", tmp_path / "s", data_dir=tmp_path / "d",
                     options={"storage": guideloom.StreamStorage(
                         tmp_path / "s", fmt(np.dtype([("force", "<f8")])))})
    assert plan_export(one, 1).identity != plan_export(two, 1).identity  # dtype counts
    # a staged job of another identity (an earlier run with other inputs) is discarded, saying so
    staged = tmp_path / ".o.guideloom-staging"
    (staged / "parts").mkdir(parents=True)
    (staged / "job.json").write_text('{"identity": "an-older-job", "n_partitions": 1}')
    (staged / "parts" / "000000.json").write_text('{"written": [0], "skipped": []}')
    guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=tmp_path / "d",
                              record_transform=helpers.first_rows, client="sync")
    err = caplog.text  # a log record of guideloom.export.run (issue 24: the library logs)
    assert "discarded the staged partitions of an earlier run" in err
    assert len(guideloom.load_export(tmp_path / "o")) == 6


HELPER_MODULE = '''
import numpy as np


def helper(force):
    return np.asarray(force)[:4, 0] * {scale}
'''

TRANSFORM_MODULE = '''
import helpermod


def transform(rec):
    return {"head": helpermod.helper(rec["force_data"])}
'''

RUN_EXPORT = '''
import logging
import sys
sys.path.insert(0, sys.argv[1])
import guideloom
logging.getLogger("guideloom").addHandler(logging.StreamHandler())  # its messages on stderr
logging.getLogger("guideloom").setLevel(logging.INFO)
import usertransform
guideloom.export_to_numpy("force-curve", sys.argv[2], data_dir=sys.argv[3], client="sync",
                          record_transform=usertransform.transform, partition_size=2)
'''


def test_editing_a_helper_called_as_module_attribute_restarts_the_job(tmp_path):
    """The attack: a job stopped after its partitions, the helper edited, the job rerun. The
    staged rows of the old helper must not be published as the new job's."""
    from guideloom.runtime.faults import FAULT_ENV

    make_demo_data(tmp_path / "d", n=6)
    code = tmp_path / "code"
    code.mkdir()
    (code / "helpermod.py").write_text(HELPER_MODULE.format(scale=1.0))
    (code / "usertransform.py").write_text(TRANSFORM_MODULE)
    target = tmp_path / "out"

    def export(fault: str | None = None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
        if fault:
            env[FAULT_ENV] = fault
        return subprocess.run([sys.executable, "-c", RUN_EXPORT, str(code), str(target),
                               str(tmp_path / "d")], cwd=tmp_path, capture_output=True,
                              text=True, env=env, timeout=120)

    stopped = export(fault="partitions-done")
    assert stopped.returncode == -9, stopped.stderr
    (code / "helpermod.py").write_text(HELPER_MODULE.format(scale=1000.0))
    done = export()
    assert done.returncode == 0, done.stderr
    assert "discarded the staged partitions" in done.stderr
    import guideloom

    export_ = guideloom.load_export(target)
    for i, sim in enumerate(export_.sim_ids.tolist()):
        rec = next(iter(guideloom.streaming.iter_view("force-curve", data_dir=tmp_path / "d",
                                                      sim_ids=[sim])))
        want = np.asarray(rec["force_data"])[:4, 0] * 1000.0
        np.testing.assert_allclose(export_[i]["head"], want)
