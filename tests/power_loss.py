"""A power cut, emulated: a fresh ext4 file system on a loop device of the test, shut down
with ext4's shutdown ioctl without flushing its journal (what is not on disk yet is lost), then
mounted again. Needs root and mkfs.ext4/losetup/mount; the ``disk`` fixture
(tests/conftest.py) skips without."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

EXT4_IOC_SHUTDOWN = (2 << 30) | (4 << 16) | (ord("X") << 8) | 125  # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_NOLOGFLUSH = 2  # drop what is not on disk yet, like pulling the plug


class Disk:
    """A fresh ext4 file system on a loop device of this test, mounted at ``path``."""

    def __init__(self, image: Path, path: Path):
        self.image, self.path = image, path
        subprocess.run(["truncate", "-s", "256M", str(image)], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
        self.device = subprocess.run(["losetup", "-f", "--show", str(image)], check=True,
                                     capture_output=True, text=True).stdout.strip()
        path.mkdir()
        self._mount()

    def _mount(self) -> None:
        subprocess.run(["mount", self.device, str(self.path)], check=True, capture_output=True)

    def power_loss(self) -> None:
        """Stop the file system as a power cut would (unwritten data is lost), then mount it
        again (the journal is replayed)."""
        import fcntl
        import struct

        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
        finally:
            os.close(fd)
        subprocess.run(["umount", str(self.path)], check=True, capture_output=True)
        self._mount()

    def close(self) -> None:
        """Unmount (lazily if a failed test still holds a file open) and free the device."""
        if subprocess.run(["umount", str(self.path)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
        subprocess.run(["losetup", "-d", self.device], capture_output=True)


def no_disk_reason() -> str | None:
    import shutil

    if os.geteuid() != 0:
        return "emulating a power loss needs root (loop device, mount)"
    missing = [t for t in ("mkfs.ext4", "losetup", "mount", "umount") if shutil.which(t) is None]
    if missing:
        return f"emulating a power loss needs {', '.join(missing)}"
    return None
