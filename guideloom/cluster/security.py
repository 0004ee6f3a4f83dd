"""TLS between our own Dask processes: throwaway credentials, in memory or in a private folder.

Any local user can connect to a port on 127.0.0.1; a Dask scheduler, worker or nanny that
accepts the connection runs whatever function it is sent (``run_on_scheduler`` runs it in the
exporter's own process). Every cluster guideloom starts therefore gets a fresh self-signed key
and certificate (distributed's :meth:`~distributed.security.Security.temporary`): the
scheduler requires TLS with a certificate signed by that key, so a process without it can
neither connect in the clear nor complete the handshake with credentials of its own.

* The embedded cluster (:func:`cluster_credentials`) keeps them in memory; its worker processes
  receive them through their environment (Dask's ``DASK_DISTRIBUTED__COMM__*`` variables),
  which only processes of the same user can read.
* A cluster that other commands connect to by address (``cluster/local.py``,
  ``cluster/slurm.py``, :func:`~guideloom.cluster.local_procs.start_local_cluster`) writes them
  with :func:`write_credentials` into ``STATE_DIR/tls/`` (mode 0o700; ``ca.pem``, ``cert.pem``,
  ``key.pem``, each 0o600) beside the scheduler file ``STATE_DIR/scheduler.json``. A client
  finds them with :func:`find_security` (what ``client="tls://..."`` and ``guideloom run
  --scheduler tls://...`` do) or loads them with :func:`load`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from guideloom import config
from guideloom.errors import SchedulerCredentialsError, UnsafeFileError
from guideloom.runtime.private_files import check_private_dir, private_dir

#: The address every server guideloom starts binds to (schedulers, workers, dashboards):
#: loopback only; a user who wants another interface starts the cluster herself.
HOST = "127.0.0.1"
#: Where the embedded cluster's dashboard listens unless told otherwise.
DEFAULT_DASHBOARD = f"{HOST}:8787"
PROTOCOL = "tls"
SCHEME = f"{PROTOCOL}://"
_ENV_PREFIX = "DASK_DISTRIBUTED__COMM__"
TLS_DIR_NAME = "tls"
CA_FILE, CERT_FILE, KEY_FILE = "ca.pem", "cert.pem", "key.pem"
SCHEDULER_FILE_NAME = "scheduler.json"
STATE_DIR_ENV = "GUIDELOOM_CLUSTER_STATE_DIR"
STATE_ROOT = Path.home() / ".cache" / "guideloom"
LOCAL_STATE_DIR = STATE_ROOT / "local-cluster"
SLURM_STATE_DIR = STATE_ROOT / "slurm-cluster"
# address -> state directory of every TLS cluster this user started and has not stopped
ADDRESS_BOOK = STATE_ROOT / "tls-clusters"

# Credentials of schedulers named in this process (``guideloom run --scheduler-file``).
_KNOWN: dict[str, Any] = {}


def cluster_credentials() -> tuple[Any, dict[str, str]]:
    """A new :class:`~distributed.security.Security` and the environment its workers need.

    Returns:
        ``(security, env)``: the object for the scheduler and clients in this process, and the
        variables that give a ``dask spec`` worker process the same credentials.

    Raises:
        ImportError: ``cryptography`` is not installed (it is a dependency of guideloom).
    """
    from distributed.security import Security

    security = Security.temporary()
    env = {
        f"{_ENV_PREFIX}REQUIRE_ENCRYPTION": "True",
        f"{_ENV_PREFIX}TLS__CA_FILE": security.tls_ca_file,
        f"{_ENV_PREFIX}TLS__WORKER__CERT": security.tls_worker_cert,
        f"{_ENV_PREFIX}TLS__WORKER__KEY": security.tls_worker_key,
        f"{_ENV_PREFIX}TLS__CLIENT__CERT": security.tls_client_cert,
        f"{_ENV_PREFIX}TLS__CLIENT__KEY": security.tls_client_key,
    }
    return security, env


def default_state_dir() -> Path:
    """``$GUIDELOOM_CLUSTER_STATE_DIR`` (read now), else ``~/.cache/guideloom/local-cluster``."""
    return Path(config.get("cluster_state_dir") or LOCAL_STATE_DIR)


def tls_dir(state_dir: str | os.PathLike[str]) -> Path:
    """The folder of a state directory that holds its cluster's credentials."""
    return Path(state_dir) / TLS_DIR_NAME


def write_credentials(state_dir: str | os.PathLike[str], security: Any = None) -> Path:
    """Write a cluster's CA, certificate and key into ``STATE_DIR/tls/``; return that folder.

    The folder is created with mode 0o700 (an existing one must be ours and writable by nobody
    else); each file is created afresh (``O_EXCL | O_NOFOLLOW``) with mode 0o600, replacing the
    previous cluster's.

    Args:
        state_dir: The cluster's private state directory.
        security: A :class:`~distributed.security.Security` holding PEM text (as
            :meth:`~distributed.security.Security.temporary` makes); default: a new one.

    Raises:
        UnsafeFileError: The folder is a symlink, another user's, or writable by others.
    """
    if security is None:
        from distributed.security import Security

        security = Security.temporary()
    folder = private_dir(tls_dir(state_dir), "the cluster's TLS folder")
    contents = {CA_FILE: security.tls_ca_file, CERT_FILE: security.tls_client_cert,
                KEY_FILE: security.tls_client_key}
    for name, text in contents.items():
        if not text or "-----BEGIN" not in text:
            raise ValueError(f"{name}: expected PEM text in the Security object")
        _write_private(folder / name, text.encode())
    return folder


def _write_private(path: Path, data: bytes) -> None:
    """Create ``path`` anew with mode 0o600 and write ``data`` (never through a symlink)."""
    path.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def write_scheduler_file(state_dir: str | os.PathLike[str], address: str) -> Path:
    """Record ``address`` in ``STATE_DIR/scheduler.json`` (mode 0o600), as ``dask scheduler
    --scheduler-file`` would, for :func:`find_security` and ``--scheduler-file``."""
    path = Path(state_dir) / SCHEDULER_FILE_NAME
    _write_private(path, json.dumps({"type": "Scheduler", "address": address}).encode())
    return path


def remove_credentials(state_dir: str | os.PathLike[str]) -> None:
    """Delete ``STATE_DIR/tls/`` and its files (the cluster they belong to has stopped)."""
    folder = tls_dir(state_dir)
    for name in (CA_FILE, CERT_FILE, KEY_FILE):
        (folder / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()


def credential_files(path: str | os.PathLike[str]) -> dict[str, Path]:
    """The ``ca``, ``cert`` and ``key`` files for a state directory, its ``tls`` folder or its
    scheduler file (``STATE_DIR/scheduler.json``).

    Raises:
        SchedulerCredentialsError: No credentials there.
        UnsafeFileError: The ``tls`` folder is not a private folder of ours.
    """
    path = Path(path).expanduser()
    if path.is_file():  # a scheduler file
        path = path.parent
    folder = path if path.name == TLS_DIR_NAME and (path / KEY_FILE).exists() else tls_dir(path)
    files = {"ca": folder / CA_FILE, "cert": folder / CERT_FILE, "key": folder / KEY_FILE}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise SchedulerCredentialsError(
            f"no TLS credentials of a guideloom cluster in {folder} (missing {', '.join(missing)})"
            ": is the cluster still running? `python3 cluster/local.py status` shows it")
    # a folder someone else could plant or change could make us trust their scheduler
    check_private_dir(folder, "the cluster's TLS folder")
    return files


def load(path: str | os.PathLike[str]) -> Any:
    """The client :class:`~distributed.security.Security` of a cluster started by guideloom.

    Example:
        ``Client("tls://127.0.0.1:PORT", security=load("~/.cache/guideloom/local-cluster"))``

    Args:
        path: The cluster's state directory (``cluster/local.py --state-dir``), its ``tls``
            folder, or its scheduler file.
    """
    from distributed.security import Security

    files = credential_files(path)
    return Security(require_encryption=True, tls_ca_file=str(files["ca"]),
                    tls_client_cert=str(files["cert"]), tls_client_key=str(files["key"]))


def client_env(path: str | os.PathLike[str]) -> dict[str, str]:
    """Dask configuration variables that make any ``distributed.Client`` use these credentials.

    Args:
        path: As for :func:`load`.
    """
    files = credential_files(path)
    return {
        f"{_ENV_PREFIX}TLS__CA_FILE": str(files["ca"]),
        f"{_ENV_PREFIX}TLS__CLIENT__CERT": str(files["cert"]),
        f"{_ENV_PREFIX}TLS__CLIENT__KEY": str(files["key"]),
    }


def connect_lines(address: str, state_dir: str | os.PathLike[str]) -> list[str]:
    """What to print so that a user can connect to ``address`` from Python or a shell."""
    env = " ".join(f"{k}={v}" for k, v in client_env(state_dir).items())
    return [
        "python:    from distributed import Client; from guideloom.cluster import security; "
        f'client = Client("{address}", security=security.load("{state_dir}"))',
        f"env:       export {env}",
    ]


def read_scheduler_file(path: str | os.PathLike[str]) -> str:
    """The scheduler address recorded in a Dask scheduler file.

    Raises:
        SchedulerCredentialsError: The file is missing or names no address.
    """
    try:
        address = json.loads(Path(path).read_text()).get("address")
    except (OSError, ValueError, AttributeError) as exc:
        raise SchedulerCredentialsError(
            f"cannot read the scheduler file {path} ({exc}): is the cluster running? "
            "`python3 cluster/local.py start` writes STATE_DIR/scheduler.json") from None
    if not isinstance(address, str) or "://" not in address:
        raise SchedulerCredentialsError(f"the scheduler file {path} names no scheduler address")
    return address


def use_scheduler_file(path: str | os.PathLike[str]) -> str:
    """Remember the credentials beside a scheduler file for its address; return the address.

    Later :func:`find_security` calls in this process (``client="tls://..."``) use them.
    """
    address = read_scheduler_file(path)
    if address.startswith(SCHEME):
        _KNOWN[_host_port(address)] = load(path)
    return address


def _host_port(address: str) -> str:
    return address.split("://", 1)[-1]


def _book_entry(address: str) -> Path:
    host, _, port = _host_port(address).rpartition(":")
    safe = "".join(c if c.isalnum() or c in ".-" else "_" for c in host)
    return ADDRESS_BOOK / f"{safe}_{int(port)}.json"


def record_address(address: str, state_dir: str | os.PathLike[str]) -> None:
    """Note in this user's private address book (``~/.cache/guideloom/tls-clusters``, mode
    0o700) that ``address`` has its credentials in ``state_dir``, so that
    ``--scheduler tls://...`` finds them whatever ``--state-dir`` was."""
    ADDRESS_BOOK.parent.mkdir(parents=True, exist_ok=True)
    private_dir(ADDRESS_BOOK, "guideloom's address book of TLS clusters")
    data = {"address": address, "state_dir": str(Path(state_dir).resolve())}
    _write_private(_book_entry(address), json.dumps(data).encode())


def forget_address(address: str) -> None:
    """Remove ``address`` from the address book (its cluster stopped)."""
    if address.startswith(SCHEME):
        _book_entry(address).unlink(missing_ok=True)


def _booked_state_dir(address: str) -> Path | None:
    """The state directory the address book names for ``address``, if it is ours."""
    entry = _book_entry(address)
    try:
        check_private_dir(ADDRESS_BOOK, "guideloom's address book of TLS clusters")
        return Path(json.loads(entry.read_text())["state_dir"])
    except (OSError, ValueError, KeyError, TypeError, UnsafeFileError):
        return None


def _dask_config_has_tls() -> bool:
    import dask.config

    return bool(dask.config.get("distributed.comm.tls.client.cert", None)
                or dask.config.get("distributed.comm.tls.ca-file", None))


def candidate_state_dirs() -> list[Path]:
    """Where :func:`find_security` looks: ``$GUIDELOOM_CLUSTER_STATE_DIR``, then the default
    state directories of ``cluster/local.py`` and ``cluster/slurm.py``."""
    seen: list[Path] = []
    for folder in (config.get("cluster_state_dir"), LOCAL_STATE_DIR, SLURM_STATE_DIR):
        if folder and Path(folder) not in seen:
            seen.append(Path(folder))
    return seen


def find_security(address: str, state_dirs: Iterable[str | os.PathLike[str]] | None = None
                  ) -> Any:
    """The client credentials for the scheduler at ``address``; ``None`` for a ``tcp://`` one.

    Looked up in this order: a scheduler file named in this process (:func:`use_scheduler_file`);
    a state directory whose scheduler file records this address: the one the address book
    (:func:`record_address`) names, then :func:`candidate_state_dirs`; Dask's own
    configuration when it names TLS files (``DASK_DISTRIBUTED__COMM__TLS__*`` variables or a
    config file: ``None`` is returned and Dask uses them).

    Raises:
        SchedulerCredentialsError: A ``tls://`` address whose credentials are nowhere; the
            message says how to name them.
    """
    if not address.startswith(SCHEME):
        return None
    key = _host_port(address)
    if key in _KNOWN:
        return _KNOWN[key]
    folders = list(state_dirs) if state_dirs is not None else candidate_state_dirs()
    booked = _booked_state_dir(address)
    for folder in ([booked] if booked is not None else []) + folders:
        scheduler_file = Path(folder) / SCHEDULER_FILE_NAME
        try:
            recorded = read_scheduler_file(scheduler_file)
        except SchedulerCredentialsError:
            continue
        if _host_port(recorded) == key:
            try:
                return load(folder)
            except UnsafeFileError as exc:
                raise SchedulerCredentialsError(str(exc)) from None
    if _dask_config_has_tls():
        return None
    raise SchedulerCredentialsError(
        f"the Dask scheduler at {address} needs its cluster's TLS credentials, and none of "
        f"{', '.join(map(str, folders))} records that address: pass --scheduler-file "
        f"STATE_DIR/{SCHEDULER_FILE_NAME} (or set {STATE_DIR_ENV}=STATE_DIR), or export the "
        "DASK_DISTRIBUTED__COMM__TLS__* lines `python3 cluster/local.py start` printed")
