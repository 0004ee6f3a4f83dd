"""Run a command with SIGINT at its default disposition: ``python3 default_sigint.py CMD ARGS...``.

A background job of a non-interactive shell (``nohup sh -c '... &'``, many CI runners, cron)
starts with SIGINT ignored, and an ignored signal stays ignored across ``exec``: a Python child
then never sees its Ctrl-C. This resets the disposition and replaces itself with the command
(same PID, so the caller's ``killpg(proc.pid, SIGINT)`` reaches it). Used through
:func:`tests.child_processes.interruptible`; a file, not a ``-c`` string, so nothing is
evaluated from text.
"""

from __future__ import annotations

import os
import signal
import sys


def main(argv: list[str]) -> None:
    """Reset SIGINT to ``SIG_DFL`` and exec ``argv`` (searched on ``PATH``)."""
    if not argv:
        sys.exit("usage: default_sigint.py COMMAND [ARGS...]")
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
