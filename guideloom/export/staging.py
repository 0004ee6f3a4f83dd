"""The staging area of an export: hidden, resumable, published by one rename.

Layout (beside the target ``out``)::

    .out.guideloom-staging/
        job.json           identity of the job, schema, partitioning
        parts/000012.json  one marker per finished partition (its summary)
        rows/              npy/zarr rows as workers write them (row i = i-th selected id)
        data/              what becomes ``out``: data files, sim_ids, export.json (last)

The final step renames ``data`` to ``out``. Local paths use ``os.replace`` (atomic); fsspec URLs
(zarr only) use the filesystem's move.
"""

from __future__ import annotations

import errno
import json
import os
import posixpath
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import fsspec
from fsspec.implementations.local import LocalFileSystem

from guideloom.errors import UnsafeTargetError
from guideloom.export.ownership import why_not_replaceable
from guideloom.formats.durable import fsync_path
from guideloom.formats.generations import retire, sweep
from guideloom.formats.layout import EXPORT_MANIFEST, resolve_target, staging_dir
from guideloom.formats.manifest_types import PartitionSummary
from guideloom.runtime.faults import fault_point
from guideloom.runtime.flush import fsync_paths
from guideloom.runtime.os_support import exchange
from guideloom.runtime.private_files import private_dir

TMP_MARK = ".tmp-"  # temporary files are NAME.tmp-PID
_TEMPORARY = re.compile(r"\.tmp-\d+$")
PHASE_FINALIZING = "finalizing"  # all partitions written; rows are being moved into data/
FAILED_KEY = "failed"  # job.json: {"error", "at"} of a run that failed (None once rerun)
PHASE_PUBLISHING = "publishing"  # data/ is complete; it is being renamed to the target
PUBLISHING_KEY = "publishing"  # job.json: the export_id of the export being published


@dataclass
class Staging:
    """Paths and markers of one export's staging area.

    Attributes:
        fs: The filesystem (local or any fsspec one).
        target: The published location (a path on ``fs``).
        url: The target as the user gave it (for messages and zarr stores).
        discarded: :meth:`start` removed the staging area of another job.
    """

    fs: fsspec.AbstractFileSystem
    target: str
    url: str
    discarded: bool = False
    job_synced: bool = True  # job.json is on disk as last written (see sync_job)

    @classmethod
    def for_target(cls, target: str | os.PathLike[str]) -> Staging:
        """Build the staging area for a local path or an fsspec URL."""
        fs, path, text = resolve_target(target)
        return cls(fs=fs, target=path, url=text)

    @property
    def is_local(self) -> bool:
        """True for the local filesystem (npy/npz need it)."""
        return isinstance(self.fs, LocalFileSystem)

    @property
    def root(self) -> str:
        """The staging directory."""
        return staging_dir(self.target)

    def path(self, *parts: str) -> str:
        """A path inside the staging directory."""
        return posixpath.join(self.root, *parts)

    def url_of(self, *parts: str) -> str:
        """An fsspec URL (or local path) for a path inside the staging directory."""
        path = self.path(*parts)
        if self.is_local:
            return path
        protocol = self.fs.protocol[0] if isinstance(self.fs.protocol, tuple) else self.fs.protocol
        return f"{protocol}://{path.lstrip('/')}" if protocol != "memory" else f"memory://{path}"

    # --- published state -------------------------------------------------------------
    def target_complete(self) -> bool:
        """True when a finished export is at the target."""
        return bool(self.fs.exists(posixpath.join(self.target, EXPORT_MANIFEST)))

    def target_exists(self) -> bool:
        """True when anything is at the target."""
        return bool(self.fs.exists(self.target))

    # --- job identity and markers -----------------------------------------------------
    def read_job(self) -> dict[str, Any] | None:
        """The staged job description, if any."""
        return self._read_json(self.path("job.json"))

    def start(self, job: Mapping[str, Any]) -> bool:
        """Prepare the staging area for ``job``; return True when resuming a previous run.

        A staging area left by a job with another identity is removed first, and
        :attr:`discarded` says so (the caller tells the user). The new ``job.json`` is not
        fsynced yet: nothing depends on it before a partition is marked, and the job's next
        write of it (the schema) or :meth:`sync_job`, before the partitions run, makes it
        durable with the folders (one flush instead of two).
        """
        previous = self.read_job()
        if previous is not None and previous.get("identity") == job["identity"]:
            return True
        self.discarded = previous is not None
        self.discard()
        if self.is_local:  # private while the job runs (0o700), and not one another user
            private_dir(self.root, "the staging directory")  # planted after the lock's check
        for sub in ("parts", "rows", "data"):
            self.fs.makedirs(self.path(sub), exist_ok=True)
        self.write_json(self.path("job.json"), job, durable=False)
        self.job_synced = not self.is_local
        return False

    def update_job(self, **changes: Any) -> None:
        """Store more facts in ``job.json`` (e.g. the probed schema), durably."""
        job = self.read_job() or {}
        job.update(changes)
        self.write_json(self.path("job.json"), job)
        self.job_synced = True

    def sync_job(self) -> None:
        """Make ``job.json`` and the staging folders durable if :meth:`start` left them
        unflushed (before any partition can be marked: a marker stands on its job)."""
        if self.job_synced:
            return
        fsync_paths([self.path("job.json"), self.root])  # and the names in the root
        self.job_synced = True

    def write_marker(self, index: int, summary: PartitionSummary) -> None:
        """Mark partition ``index`` finished (called by the worker after its data is durable)."""
        self.write_json(self.path("parts", f"{index:06d}.json"), summary, compact=True)

    def marker_paths(self) -> list[str]:
        """The marker files of the finished partitions."""
        folder = self.path("parts")
        if not self.fs.exists(folder):
            return []
        return [entry for entry in self.fs.ls(folder, detail=False)
                if posixpath.basename(entry).removesuffix(".json").isdigit()
                and entry.endswith(".json")]

    def marker(self, index: int) -> PartitionSummary | None:
        """The summary of partition ``index``, or ``None`` while it is not finished."""
        return cast("PartitionSummary | None",
                    self._read_json(self.path("parts", f"{index:06d}.json")))

    def write_note(self, index: int, doc: Mapping[str, Any]) -> None:
        """Store what partition ``index`` has decided before it is finished (a zarr partition:
        where its rows go), for the partitions after it."""
        self.fs.makedirs(self.path("notes"), exist_ok=True)  # beside parts/: not markers
        self.write_json(self.path("notes", f"{index:06d}.json"), doc)

    def note(self, index: int) -> dict[str, Any] | None:
        """What :meth:`write_note` stored for partition ``index``, if anything."""
        return self._read_json(self.path("notes", f"{index:06d}.json"))

    def markers(self) -> dict[int, PartitionSummary]:
        """Summaries of the finished partitions (as :meth:`write_marker` wrote them)."""
        found: dict[int, PartitionSummary] = {}
        for entry in self.marker_paths():
            doc = self._read_json(entry)
            if doc is not None:
                found[int(posixpath.basename(entry)[:-5])] = cast(PartitionSummary, doc)
        return found

    # --- publishing -------------------------------------------------------------------
    def publish(self, overwrite: bool, export_id: str | None = None) -> None:
        """Rename ``data`` to the target; replace an existing target only with ``overwrite``.

        The job is marked ``publishing`` first, so that :meth:`recover` can finish (or clean up
        after) a publish that was interrupted at any point. ``export_id``: the staged
        ``export.json``'s, when the caller just wrote it (else it is read from there).
        """
        data = self.path("data")
        old = self.path("replaced")
        self.remove_temporaries(data)
        if export_id is None:
            export_id = (self._read_json(posixpath.join(data, EXPORT_MANIFEST)) or {}).get(
                "export_id")
        self.update_job(phase=PHASE_PUBLISHING, **{PUBLISHING_KEY: export_id})
        fault_point("publishing")
        if self.fs.exists(self.target):
            empty = self.fs.isdir(self.target) and not self.fs.ls(self.target, detail=False)
            if empty:
                self.fs.rmdir(self.target)
            elif not overwrite:
                raise FileExistsError(f"{self.url} exists; pass overwrite=True to replace it")
            elif (reason := why_not_replaceable(self.fs, self.target, self.url)) is not None:
                raise UnsafeTargetError(f"refusing to replace {self.url}: {reason}; remove it "
                                        "yourself or choose another output path")
            elif self.is_local and exchange(data, self.target):
                # one atomic step: the new export at the target, the old one in data/; a
                # reader of the path never finds it missing (a kill now: recover() sees data/
                # is not the export being published, and retires it)
                fault_point("target-moved-aside")
                self.move(data, old)
                fault_point("data-moved")
                self.discard()
                return
            else:
                self.move(self.target, old)
                fault_point("target-moved-aside")
        self.move(data, self.target)
        fault_point("data-moved")
        self.discard()

    def retire_replaced(self) -> None:
        """Remove the export a publish replaced (``replaced/``), or keep it beside the target
        while readers still have it open (:mod:`guideloom.formats.generations`); then remove
        the earlier ones no reader has open any more."""
        if not self.is_local:
            return
        old = self.path("replaced")
        if os.path.isdir(old):
            replaced = self._read_json(posixpath.join(old, EXPORT_MANIFEST)) or {}
            retire(old, self.target, str(replaced.get("export_id", "")))
        sweep(self.target)

    def recover(self) -> str | None:
        """Finish a publish that a killed run left half done; say what was done, if anything.

        If the new data was not moved yet, it is moved now (the job was complete); if it was,
        only the staging area is left and it is removed.
        """
        job = self.read_job()
        if job is None or job.get("phase") != PHASE_PUBLISHING:
            return None
        data = self.path("data")
        if self.fs.exists(data):
            staged = self._read_json(posixpath.join(data, EXPORT_MANIFEST)) or {}
            publishing = job.get(PUBLISHING_KEY)
            if publishing and staged.get("export_id") != publishing:  # exchanged already:
                self.move(data, self.path("replaced"))  # data/ holds the replaced export
                self.discard()
                return f"finished publishing {self.url}, which an interrupted run had completed"
            self.publish(overwrite=True)
            return f"finished publishing {self.url}, which an interrupted run had completed"
        self.discard()
        return f"removed the staging area that a published run left beside {self.url}"

    def remove_temporaries(self, folder: str) -> list[str]:
        """Remove the temporary files (``*.tmp-PID``) interrupted writes left in ``folder``
        (top level); return their names. They are never published."""
        removed = []
        for entry in self.fs.ls(folder, detail=False) if self.fs.exists(folder) else []:
            name = posixpath.basename(str(entry).rstrip("/"))
            if _TEMPORARY.search(name) and self.fs.isfile(entry):
                self.fs.rm(entry)
                removed.append(name)
        return removed

    def move(self, src: str, dst: str) -> None:
        """Rename ``src`` to ``dst`` (atomic on a local disk)."""
        if self.is_local:
            os.replace(src, dst)
        else:
            self.fs.mv(src, dst, recursive=True)

    def discard(self) -> None:
        """Remove the staging area (a replaced export in it is retired first: readers that
        have it open keep it)."""
        self.retire_replaced()
        if self.is_local:  # what fsspec's local rm does, without its path handling
            if os.path.isdir(self.root):
                shutil.rmtree(self.root)
            elif os.path.exists(self.root):
                os.remove(self.root)
        elif self.fs.exists(self.root):
            self.fs.rm(self.root, recursive=True)

    # --- small JSON files -------------------------------------------------------------
    def write_json(self, path: str, doc: Mapping[str, Any], *, durable: bool = True,
                   compact: bool = False) -> bytes:
        """Write ``doc`` to ``path`` atomically (temp name, then rename, on local disks);
        return the bytes written.

        The temporary file lives in the staging directory itself, never in ``data/``: a run
        killed between the write and the rename leaves nothing that could be published.
        ``durable``: fsync the file, and its folder after the rename; ``False`` for a file
        that the caller makes durable later with others (one flush for all: finalize fsyncs
        ``data/`` once). ``compact``: no indentation, for files that machines read
        (markers, provenance, checksums: Python encodes JSON in C only without an indent,
        about ten times faster).
        """
        blob = json.dumps(doc, indent=None if compact else 1,
                          separators=(",", ":") if compact else None, sort_keys=True,
                          default=_json_default).encode()
        if self.is_local:
            name = posixpath.basename(path)
            tmp = self.path(f".{name}{TMP_MARK}{os.getpid()}")
            try:
                with open(tmp, "wb") as fh:
                    fh.write(blob)
                    fh.flush()
                    if durable:
                        os.fsync(fh.fileno())
            except OSError as exc:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                hint = ("; free space there or write the export elsewhere"
                        if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "")
                raise type(exc)(exc.errno, f"cannot write {path}: "
                                           f"{exc.strerror or exc}{hint}") from exc
            fault_point(f"json-written:{name}")
            os.replace(tmp, path)
            if durable:
                fsync_path(os.path.dirname(path))  # the rename too survives a power loss
        else:
            self.fs.pipe_file(path, blob)
        return blob

    def _read_json(self, path: str) -> dict[str, Any] | None:
        try:
            with self.fs.open(path, "rb") as fh:
                doc: dict[str, Any] | None = json.loads(fh.read())
                return doc
        except FileNotFoundError:
            return None
        except json.JSONDecodeError:
            return None  # a marker torn by a crash counts as absent


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
