"""TLS with throwaway credentials between the processes of one embedded cluster.

Any local user can connect to a port on 127.0.0.1; a Dask scheduler, worker or nanny that
accepts the connection runs whatever function it is sent (``run_on_scheduler`` runs it in the
exporter's own process). :func:`cluster_credentials` makes a fresh self-signed key and
certificate (distributed's :meth:`~distributed.security.Security.temporary`, in memory only)
for one cluster: the scheduler requires TLS with a certificate signed by that key, so a
process without it cannot connect in the clear nor complete the handshake with credentials
of its own.

The worker processes receive the same credentials through their environment (Dask's
``DASK_DISTRIBUTED__COMM__*`` configuration variables), which only processes of the same user
can read; no key is written to disk.
"""

from __future__ import annotations

from typing import Any

PROTOCOL = "tls"
_ENV_PREFIX = "DASK_DISTRIBUTED__COMM__"


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
