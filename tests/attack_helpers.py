"""An attacker process for the cluster security tests (issue 22, B19).

:data:`ATTACK` is a script run as ``python -c ATTACK MARKER_DIR SCHEDULER [SERVER ...]``: it tries
to run a function that leaves a file in MARKER_DIR through a plain ``distributed.Client`` on the
scheduler's port (``run_on_scheduler``, ``submit``) and straight at each SERVER's ``run``
handler (workers, nannies), once in the clear and once over TLS with credentials of its own,
and prints one JSON object: attempt -> ``"ran"`` or ``"refused: ErrorName"``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ATTACK = textwrap.dedent("""
    import asyncio
    import json
    import sys

    from distributed import Client
    from distributed.core import rpc
    from distributed.protocol.pickle import dumps
    from distributed.security import Security

    marker_dir, scheduler, *servers = sys.argv[1:]
    own = Security.temporary()  # TLS credentials of the attacker's own, not the cluster's


    def plant(where=marker_dir):
        import os
        with open(os.path.join(where, f"ran-in-{os.getpid()}"), "w") as fh:
            fh.write("attacker code ran")
        return "ran"


    def hostport(address):
        return address.split("://")[-1]


    results = {}
    for scheme, security in (("tcp", None), ("tls", own)):
        try:
            client = Client(f"{scheme}://{hostport(scheduler)}", security=security, timeout=3,
                            set_as_default=False)
        except Exception as exc:
            results[f"client-{scheme}"] = f"refused: {type(exc).__name__}"
        else:
            outcome = []
            for attempt in (lambda: client.run_on_scheduler(plant),
                            lambda: client.submit(plant, pure=False).result(timeout=10)):
                try:
                    outcome.append(str(attempt()))
                except Exception as exc:
                    outcome.append(f"refused: {type(exc).__name__}")
            client.close()
            results[f"client-{scheme}"] = ",".join(outcome)


    async def run_on(address, scheme, security):
        args = security.get_connection_args("client") if security else {}
        server = rpc(f"{scheme}://{hostport(address)}", connection_args=args, timeout=3)
        try:
            return str(await asyncio.wait_for(server.run(function=dumps(plant)), 10))
        except Exception as exc:
            return f"refused: {type(exc).__name__}"
        finally:
            await server.close_rpc()


    for address in servers:
        for scheme, security in (("tcp", None), ("tls", own)):
            results[f"{address}-{scheme}"] = asyncio.run(run_on(address, scheme, security))
    print(json.dumps(results))
""")


def attack(marker_dir: Path, scheduler: str, servers: list[str], cwd: Path) -> dict[str, str]:
    """Run :data:`ATTACK` in a separate process; return its results (it must not crash)."""
    done = subprocess.run(
        [sys.executable, "-c", ATTACK, str(marker_dir), scheduler, *servers],
        capture_output=True, text=True, timeout=300, cwd=cwd,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def all_refused(results: dict[str, str]) -> bool:
    """Whether every attempt of the attacker was refused."""
    attempts = [part for value in results.values() for part in value.split(",")]
    return bool(attempts) and all(part.startswith("refused: ") for part in attempts)
