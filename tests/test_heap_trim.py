"""Freed heap memory goes back to the operating system with
:func:`guideloom.runtime.os_support.trim_heap` (the pointcloud stage calls it between steps).

glibc raises its mapping threshold to the largest mapped block freed so far (up to 32 MiB), so
after a 24 MiB array is dropped a 16 MiB one comes from the heap; with a small block allocated
after it, its pages stay resident once it is freed (it is not at the heap's top). Each case
runs in a fresh interpreter, without the ``MALLOC_*`` variables that would change the policy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCENARIO = r"""
import json, sys
import numpy as np
from guideloom.runtime import os_support

def resident():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) * 1024 for l in fh if l.startswith("VmRSS:"))

big = np.ones(24 << 20, dtype=np.uint8)  # mapped; freed, glibc's threshold rises to 24 MiB
del big
before = resident()
block = np.ones(16 << 20, dtype=np.uint8)  # from the heap now; every page touched
after = np.ones(1 << 16, dtype=np.uint8)  # above it: the heap's top is not free
held = resident() - before
del block
kept = resident() - before
trimmed = os_support.trim_heap() if sys.argv[1] == "trim" else None
print(json.dumps({"held": held, "kept": kept, "trimmed": trimmed,
                  "left": resident() - before}))
"""


def _glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (AttributeError, ValueError, OSError):  # no confstr, or not glibc's name
        return False


def _run(mode: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", SCENARIO, mode], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _glibc(),
                    reason="glibc on Linux only")
def test_a_freed_block_inside_the_heap_leaves_the_resident_set() -> None:
    """A freed 16 MiB block inside the heap stays resident (what the call is for) until
    :func:`trim_heap` gives its pages back (less than 2 MiB of it stays)."""
    plain = _run("keep")
    assert plain["held"] >= 15 << 20, plain  # the block was resident while it lived
    assert plain["kept"] >= 15 << 20, plain
    assert plain["left"] >= 15 << 20, plain
    found = _run("trim")
    assert found["trimmed"] is True
    assert found["kept"] >= 15 << 20, found
    assert found["left"] < 2 << 20, found


def test_trim_heap_says_whether_it_could() -> None:
    """``True`` where the C library is glibc, ``False`` elsewhere, and it never raises."""
    from guideloom.runtime import os_support

    assert os_support.trim_heap() is _glibc()
