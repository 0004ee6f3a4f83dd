"""guideloom.cluster.jobqueue without a batch system: settings, job scripts, one-line errors.

The tests against a real SLURM are in test_jobqueue_slurm.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from guideloom.cluster import jobqueue
from guideloom.errors import GuideloomError

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("kind", "tool"), [("slurm", "sbatch"), ("pbs", "qsub")])
def test_missing_submit_command_is_one_line_error(kind, tool, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no batch system here
    start = time.monotonic()
    with pytest.raises(jobqueue.JobqueueUnavailableError) as caught:
        with jobqueue.jobqueue_client(kind, 2):
            pytest.fail("the block must not run")
    message = str(caught.value)
    assert isinstance(caught.value, GuideloomError)
    assert message.startswith(f"{tool}, ")
    assert "not found on PATH" in message
    assert "\n" not in message
    assert time.monotonic() - start < 10


def test_slurm_script_without_sbatch_exits_2_with_one_line(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(REPO / "cluster" / "slurm.py"), "--jobs", "2"],
        capture_output=True, text=True, timeout=60, cwd=REPO, env=env, check=False,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "error: sbatch, scancel, squeue not found on PATH: run on a SLURM login node "
        "(or use a local cluster, client='local:N')"
    ]


@pytest.mark.parametrize("bad", [0, -1, True])
def test_jobs_must_be_positive(bad):
    with pytest.raises(ValueError, match="jobs must be >= 1"):
        with jobqueue.jobqueue_client("slurm", bad):
            pass


def test_batch_client_texts_parse_once_for_placement_and_preview():
    from guideloom.cluster.runtime import parse_client_text, preview_placement

    assert parse_client_text("slurm:4") == runtime_text("slurm:4", "slurm", 4)
    assert parse_client_text("pbs:1") == runtime_text("pbs:1", "pbs", 1)
    where = preview_placement("slurm:3", 1.0, 8)
    assert (where.mode, where.workers) == ("slurm", 3)
    assert where.reason == "3 SLURM worker jobs (submitted when the job runs)"
    for bad in ("slurm", "slurm:0", "slurm:x", "k8s:2", "slurm:-1", ""):
        with pytest.raises(ValueError, match="slurm:N"):
            parse_client_text(bad)


def runtime_text(text, kind, count):
    from guideloom.cluster.runtime import ClientText

    return ClientText(text, kind, count)


def test_settings_from_explicit_file_env_and_dask_config(tmp_path, monkeypatch):
    monkeypatch.delenv(jobqueue.CONFIG_ENV, raising=False)
    site = tmp_path / "site.yaml"
    site.write_text(textwrap.dedent("""
        jobqueue:
          slurm:
            name: site-worker
            cores: 2
            memory: 3GiB
            queue: compute
            account: proj42
    """))
    kwargs, source = jobqueue.find_jobqueue_config("slurm", site)
    assert source == str(site)
    assert kwargs == {"job_name": "site-worker", "cores": 2, "memory": "3GiB",
                      "queue": "compute", "account": "proj42"}

    monkeypatch.setenv(jobqueue.CONFIG_ENV, str(site))
    assert jobqueue.find_jobqueue_config("slurm")[1] == str(site)
    with pytest.raises(jobqueue.JobqueueConfigError, match=r"no 'jobqueue.pbs' section"):
        jobqueue.find_jobqueue_config("pbs")
    monkeypatch.setenv(jobqueue.CONFIG_ENV, str(tmp_path / "missing.yaml"))
    with pytest.raises(jobqueue.JobqueueConfigError, match="cannot read jobqueue config"):
        jobqueue.find_jobqueue_config("slurm")

    # no file named: the repo's cluster/jobqueue.yaml, unless the user's Dask config has one
    monkeypatch.delenv(jobqueue.CONFIG_ENV)
    kwargs, source = jobqueue.find_jobqueue_config("slurm")
    assert source == str(REPO / "cluster" / "jobqueue.yaml")
    assert kwargs["cores"] == 1
    assert kwargs["job_name"] == "guideloom-worker"
    import dask.config

    with dask.config.set({"jobqueue.slurm.cores": 2, "jobqueue.slurm.memory": "3GiB"}):
        kwargs, source = jobqueue.find_jobqueue_config("slurm")
        assert (kwargs, source) == ({}, "Dask config (jobqueue.slurm)")
        kwargs, _ = jobqueue.cluster_kwargs(
            "slurm", scheduler_host="127.0.0.1", dashboard_address="127.0.0.1:0"
        )
        with jobqueue.cluster_class("slurm")(**kwargs) as cluster:
            script = cluster.job_script()
    assert "#SBATCH --cpus-per-task=2" in script
    assert "#SBATCH --mem=3G" in script


@pytest.mark.cluster
def test_job_script_runs_this_python_in_this_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(jobqueue.CONFIG_ENV, raising=False)
    monkeypatch.chdir(REPO)
    extra = tmp_path / "my transforms"
    kwargs, source = jobqueue.cluster_kwargs(
        "slurm", job_options={"queue": "compute", "walltime": "00:10:00"},
        scheduler_host="127.0.0.1", dashboard_address="127.0.0.1:0", pythonpath=[extra],
    )
    assert source.endswith("cluster/jobqueue.yaml")
    with jobqueue.cluster_class("slurm")(**kwargs) as cluster:
        script = cluster.job_script()
        address = cluster.scheduler_address
        assert address.startswith("tcp://127.0.0.1:")
    lines = script.splitlines()
    assert "#SBATCH -p compute" in lines
    assert "#SBATCH -t 00:10:00" in lines
    site_line = lines.index("# source /shared/envs/guideloom/bin/activate")
    cd_line = lines.index(f"cd {REPO} || exit 1")
    (export,) = [line for line in lines if line.startswith("export PYTHONPATH=")]
    assert site_line < cd_line < lines.index(export)  # ours come after the site's prologue
    assert f"'{REPO}:{extra}'" in export
    assert export.endswith('"${PYTHONPATH:+:$PYTHONPATH}"')
    assert f"{sys.executable} -m distributed.cli.dask_worker {address}" in script


def test_the_job_environment_lines_make_guideloom_importable(tmp_path):
    """Run the generated lines in bash with an empty PYTHONPATH, as a job would."""
    module_dir = tmp_path / "mods"
    module_dir.mkdir()
    (module_dir / "site_transforms.py").write_text("VALUE = 42\n")
    lines = jobqueue.worker_environment_lines([module_dir])
    probe = (
        f"{sys.executable} -c 'import guideloom, site_transforms, os;"
        " print(guideloom.__file__, site_transforms.VALUE, os.getcwd())'"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(["bash", "-c", "\n".join([*lines, probe])], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    guideloom_file, value, cwd = proc.stdout.split()
    assert Path(guideloom_file) == Path(jobqueue.__file__).parents[1] / "__init__.py"
    assert (value, Path(cwd)) == ("42", Path.cwd())


def test_importing_dask_jobqueue_keeps_the_sigint_handler():
    code = textwrap.dedent("""
        import signal
        from guideloom.cluster import jobqueue
        mine = lambda *_: None
        signal.signal(signal.SIGINT, mine)
        jobqueue.cluster_class("slurm")  # imports dask_jobqueue
        assert signal.getsignal(signal.SIGINT) is mine, signal.getsignal(signal.SIGINT)
        print("kept")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "kept\n"


def test_qstat_full_output_is_parsed_into_states_and_reasons():
    text = textwrap.dedent("""\
        Job Id: 101.pbs-server
            Job_Name = guideloom-worker
            job_state = Q
            queue = workq
            comment = Not Running: Insufficient amount of resource: ncpus

        Job Id: 102.pbs-server
            Job_Name = guideloom-worker
            job_state = R
            queue = workq

        Job Id: 103.pbs-server
            job_state = F
    """)
    assert jobqueue.parse_qstat_full(text) == {
        "101.pbs-server": "QUEUED (Not Running: Insufficient amount of resource: ncpus)",
        "102.pbs-server": "RUNNING",
    }


def test_dashboard_line_names_the_ssh_tunnel():
    line = jobqueue._ssh_hint("http://10.1.2.3:41234/status", "127.0.0.1:0")
    assert line.startswith("Dask dashboard: http://10.1.2.3:41234/status")
    assert "ssh -L 8787:127.0.0.1:41234 " in line  # the dashboard listens on loopback
    assert line.endswith("then open http://127.0.0.1:8787/status")
    line = jobqueue._ssh_hint("http://10.1.2.3:8787/status", ":8787")
    assert "ssh -L 8787:10.1.2.3:8787 " in line


@pytest.mark.cluster
def test_no_interface_means_loopback_for_scheduler_and_workers(tmp_path, monkeypatch):
    """The shipped config names no interface: nothing listens on 0.0.0.0; a named one wins."""
    monkeypatch.delenv(jobqueue.CONFIG_ENV, raising=False)
    kwargs, _ = jobqueue.cluster_kwargs("slurm", dashboard_address="127.0.0.1:0")
    assert kwargs["scheduler_options"]["host"] == "127.0.0.1"
    with jobqueue.cluster_class("slurm")(**kwargs) as cluster:
        script = cluster.job_script()
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
    assert "--host 127.0.0.1" in script
    assert "--dashboard-address 127.0.0.1:0" in script

    kwargs, _ = jobqueue.cluster_kwargs("slurm", job_options={"interface": "lo"},
                                        dashboard_address="127.0.0.1:0")
    assert "host" not in kwargs["scheduler_options"]  # the site's interface decides
    assert "--host" not in (kwargs.get("worker_extra_args") or [])
