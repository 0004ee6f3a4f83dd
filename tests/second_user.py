"""A real second local user for attack tests: created as root, removed afterwards."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class User:
    """A local account the test may act as (``run`` executes a command as that user)."""

    name: str
    uid: int
    gid: int

    def run(self, *argv: str, **kwargs) -> subprocess.CompletedProcess:
        """Run ``argv`` as this user (setuid/setgid in the child); raise if it fails."""
        return subprocess.run(list(argv), user=self.uid, group=self.gid, extra_groups=[],
                              check=True, capture_output=True, text=True, timeout=60, **kwargs)


@contextmanager
def second_user() -> Iterator[User]:
    """Create a throw-away user (``useradd``) and remove it with its home (``userdel -r``)."""
    if os.name != "posix" or os.geteuid() != 0:
        pytest.skip("needs root to create a second local user (useradd)")
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.skip("useradd/userdel are not installed")
    name = f"gltest{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", name], check=True,
                   capture_output=True, timeout=60)
    try:
        entry = pwd.getpwnam(name)
        yield User(name, entry.pw_uid, entry.pw_gid)
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True, timeout=60)


@contextmanager
def shared_folder() -> Iterator[Path]:
    """A folder every user may write to, without the sticky bit (mode 0o777), outside any
    private pytest directory (so that the second user can reach it)."""
    path = Path(tempfile.mkdtemp(prefix="guideloom-shared-", dir="/tmp"))
    try:
        path.chmod(0o777)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
