"""Turn the zipped layout into the loose ``h5/<id>.h5`` layout, in parallel, atomically per file.

``extract_zips(data_dir)`` copies every zip member that holds an experiment to
``data_dir/h5/<name>`` (the anchor dataset's ``--extract --remove-zip``):

* The target name is rebuilt from the experiment id parsed from the member's *base name*
  (``0042.h5``); the member path is never used as a path, so ``../../evil.h5`` or
  ``dir/0042.h5`` cannot write outside ``h5/``.
* Each file is written to ``h5/.<name>.tmp-<pid>-<random>``, its CRC-32 is checked against the
  archive's central directory while copying, it is fsynced and only then renamed to its final
  name: a crash or a corrupt member never leaves a partial file under the final name.
* Work runs on Dask, one task per partition of members (keys ``("extract", archive, job, i)``).
  Tasks receive :class:`~guideloom.read.locations.Location` objects and read the archives
  themselves.
* With ``remove_zip=True`` an archive is deleted only once every one of its members is loose
  and verified (extracted now, or already present with the member's size).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guideloom import config
from guideloom.cluster.embedded import default_worker_count
from guideloom.cluster.runtime import (
    default_partition_size,
    placement,
    progress_bar,
    run_partitions,
    task_key,
)
from guideloom.errors import (
    CorruptDataError,
    ExperimentReadError,
    ExtractError,
    summarize_ids,
)
from guideloom.read.locations import Location
from guideloom.read.scan import LOOSE_SUBDIR, archive_paths, id_parser, scan_locations
from guideloom.read.zipdir import archive_members, following_headers, overlapping_members
from guideloom.read.zipmember import MemberReader, file_crc32

if TYPE_CHECKING:
    from guideloom.select.parse import Dataset

CHUNK_BYTES = 8 << 20
# In-process cost model (copy + CRC-32 of a stored member; see cluster.runtime.placement).
COPY_BYTES_PER_S = 800e6
PER_MEMBER_S = 1e-3
TMP_NAME = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<pid>\d+)-(?P<token>[0-9a-f]+)$")
_MAX_NAME_BYTES = 200  # leaves room for the temporary-name decoration within NAME_MAX (255)


@dataclass
class ExtractReport:
    """What :func:`extract_zips` did.

    Attributes:
        extracted: Ids written to ``h5/`` by this run, in archive and member order.
        skipped_existing: Ids left alone because a loose file was already there.
        removed_archives: Archives deleted (``remove_zip=True``).
        bytes: Bytes written.
        seconds: Wall time of the whole call.
        kept_archives: Archives not deleted although ``remove_zip=True``, with the reason.
        cleaned_tmp: Stale temporary files of crashed earlier runs that were removed.
        failed: Ids whose extraction failed (the call then raises :class:`ExtractError`).
    """

    extracted: list[Any] = field(default_factory=list)
    skipped_existing: list[Any] = field(default_factory=list)
    removed_archives: list[str] = field(default_factory=list)
    bytes: int = 0
    seconds: float = 0.0
    kept_archives: dict[str, str] = field(default_factory=dict)
    cleaned_tmp: list[str] = field(default_factory=list)
    failed: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class ExtractItem:
    """One member to copy: where it is, its target file name and what it must check out as."""

    loc: Location
    name: str
    crc: int
    file_size: int
    encrypted: bool = False
    method: int = 0  # the zip compression method (0 stored, 8 deflated, ...)


@dataclass(frozen=True)
class ExtractPartition:
    """The members of one archive that one task extracts."""

    archive: str
    index: int
    items: tuple[ExtractItem, ...]


@dataclass
class _ArchivePlan:
    path: str
    stat: tuple[int, int]
    items: list[ExtractItem] = field(default_factory=list)
    ids: list[Any] = field(default_factory=list)  # every experiment this archive holds
    blockers: list[str] = field(default_factory=list)  # why it must never be removed


@dataclass
class ExtractPlan:
    """Which members to extract, which are already loose, and what keeps archives."""

    archives: list[_ArchivePlan]
    skipped: list[Any]
    unmet: dict[Any, str]  # id -> why its archive data is not safely loose
    failed: list[ExperimentReadError]
    existing: dict[Any, tuple[str, int]] = field(default_factory=dict)  # id -> (file, CRC)

    @property
    def items(self) -> list[ExtractItem]:
        """Every member to extract."""
        return [item for a in self.archives for item in a.items]

    def partitions(self, size: int) -> list[ExtractPartition]:
        """Split each archive's members into partitions of at most ``size``."""
        parts: list[ExtractPartition] = []
        for archive in self.archives:
            for start in range(0, len(archive.items), size):
                parts.append(ExtractPartition(archive.path, len(parts),
                                              tuple(archive.items[start:start + size])))
        return parts


def extract_zips(
    data_dir: str | Path,
    *,
    dataset: Dataset | None = None,
    source: str | Path | None = None,
    client: Any = None,
    remove_zip: bool = False,
    partition_size: int | None = None,
    show_progress: bool = False,
    overwrite: bool = False,
) -> ExtractReport:
    """Extract every experiment held in a zip member to ``data_dir/h5/<name>``.

    Args:
        data_dir: The dataset directory (with the archives and the manifest).
        dataset: A loaded dataset; default: ``load(data_dir, source)``.
        source: The manifest path when ``dataset`` is not given.
        client: Where to run: ``None`` (the active Dask client or an embedded LocalCluster),
            ``"sync"`` (in this process), ``"local:N"``, a scheduler address or a ``Client``.
        remove_zip: Delete each archive once all of its members are loose and verified.
        partition_size: Members per Dask task (default: about four tasks per worker, at most
            64 members per task).
        show_progress: Show a progress bar of members done.
        overwrite: Extract members even when a loose file for the id already exists.

    Returns:
        An :class:`ExtractReport`.

    Raises:
        ExtractError: Some members failed (corrupt, unreadable or unwritable); the others were
            extracted, and only archives whose members all succeeded were removed.
        GuideloomError: An archive's central directory cannot be read.
        ValueError: ``data_dir`` (or the dataset's) is a URL or DOI: extracting writes next to
            the archives, so it needs a local copy.
    """
    from guideloom.read.roots import folder_of
    from guideloom.select.manifest import load

    wheres: list[tuple[object, Path | None]] = [(data_dir, folder_of(data_dir))]
    if dataset is not None:
        wheres.append((dataset.data_dir, dataset.root.local_folder()))
    for given, folder in wheres:
        if folder is None:
            raise ValueError(
                f"extract writes loose files next to the archives, so it needs a local copy of "
                f"the release, not {given}: download it with `guideloom download --out DIR "
                "--extract` (guideloom.download), or read it where it is with iter_view and the "
                "exports (data_dir=URL), which fetch only the bytes a view needs")
    started = time.monotonic()
    root = Path(os.path.abspath(data_dir))
    ds = dataset if dataset is not None else load(root, source)
    h5_dir = root / LOOSE_SUBDIR
    report = ExtractReport()
    report.cleaned_tmp = clean_stale_tmp(h5_dir)
    plan = plan_extract(ds, root, overwrite=overwrite)
    report.skipped_existing = list(plan.skipped)
    failures = list(plan.failed)
    if plan.items:
        h5_dir.mkdir(exist_ok=True)
        items = plan.items
        estimate = (sum(i.file_size for i in items) / config.get("extract_bytes_per_s")
                    + len(items) * config.get("extract_per_member_s"))
        n_tasks = len(plan.partitions(default_partition_size(len(items), default_worker_count())))
        with placement(client, estimate_s=estimate, n_tasks=n_tasks) as where:
            size = partition_size or default_partition_size(len(items), where.workers)
            summaries = _execute(plan.partitions(max(1, int(size))), str(h5_dir), where.client,
                                 show_progress)
        for summary in summaries:
            report.extracted.extend(summary["extracted"])
            report.bytes += summary["bytes"]
            failures.extend(summary["failed"])
    report.failed = [e.sim_id for e in failures]
    if remove_zip:
        _remove_archives(plan, report, failures, root, h5_dir)
    report.seconds = time.monotonic() - started
    if failures:
        raise ExtractError(
            f"extraction failed for {summarize_ids(report.failed)}; first error: {failures[0]}",
            errors=failures, report=report,
        )
    return report


def plan_extract(ds: Dataset, root: str | Path, *, overwrite: bool = False) -> ExtractPlan:
    """Decide what to extract from the archives' central directories (no member data is read).

    Two members naming one id are refused by :func:`~guideloom.read.scan.scan_locations`.
    """
    root = Path(root)
    pattern = re.compile(ds.spec.member_pattern)
    to_id = id_parser(ds)
    loose = {i: loc.path for i, loc in scan_locations(ds, root).items() if loc.member is None}
    h5_dir = root / LOOSE_SUBDIR
    claimed: dict[Any, tuple[int, int, str]] = {}
    plan = ExtractPlan([], [], {}, [])
    for archive in archive_paths(ds, root):
        st = os.stat(archive)
        infos = archive_members(archive)  # the readers' own parser and cache
        ap = _ArchivePlan(str(archive), (st.st_size, st.st_mtime_ns))
        plan.archives.append(ap)
        following = following_headers((i.header_offset, i.name) for i in infos)
        defects = overlapping_members(infos)
        for info in infos:
            if info.is_dir():
                continue
            base = info.name.rsplit("/", 1)[-1]
            m = pattern.match(base)
            if m is None:
                ap.blockers.append(f"member {info.name!r} is not an experiment file")
                continue
            sim_id = to_id(m.group("id"))
            ap.ids.append(sim_id)
            where = f"{archive}::{info.name}"
            if sim_id in claimed:
                crc, size, first = claimed[sim_id]
                if (crc, size) != (info.crc, info.file_size):
                    ap.blockers.append(f"member {info.name!r} repeats experiment {sim_id} of "
                                       f"{first} with other bytes")
                continue
            claimed[sim_id] = (info.crc, info.file_size, where)
            name = target_name(base, m, sim_id, pattern, to_id)
            if name is None:
                plan.failed.append(ExperimentReadError(
                    f"experiment {sim_id}: {where}: no safe file name can be built for it",
                    sim_id=sim_id, file=where))
                plan.unmet[sim_id] = "it has no safe file name"
                continue
            existing = loose.get(sim_id)
            target = h5_dir / name
            if target.is_file():
                existing = str(target)
            if existing is not None and not overwrite:
                plan.skipped.append(sim_id)
                have = os.stat(existing).st_size
                if have != info.file_size:
                    plan.unmet[sim_id] = (f"experiment {sim_id} is already loose at {existing} "
                                          f"with {have} bytes, the member has {info.file_size}")
                else:
                    plan.existing[sim_id] = (existing, info.crc)
                continue
            after = following.get(info.header_offset)
            loc = Location(sim_id=sim_id, path=str(archive), member=info.name,
                           header_offset=info.header_offset, size=info.compress_size,
                           stored=info.stored, crc=info.crc, defect=defects.get(info.name),
                           next_header=None if after is None else after[0],
                           next_member=None if after is None else after[1])
            ap.items.append(ExtractItem(loc, name, info.crc, info.file_size,
                                        encrypted=bool(info.flags & 0x1), method=info.method))
    return plan


def target_name(
    base: str, match: re.Match[str], sim_id: Any, pattern: re.Pattern[str],
    to_id: Callable[[str], Any],
) -> str | None:
    """The loose file name of an experiment, built from its parsed id; ``None`` if unsafe.

    Integer ids are written with ASCII digits and the member's zero padding (``0042.h5``);
    text ids keep the member's base name. The name must match the member pattern and parse
    back to the same id, so the loose file is found again.
    """
    candidates = []
    if isinstance(sim_id, int):
        digits = match.group("id")
        width = len(digits) if digits.isascii() and digits.isdigit() else 4
        start, end = match.span("id")
        candidates.append(f"{base[:start]}{sim_id:0{width}d}{base[end:]}")
        candidates.append(f"{sim_id:04d}.h5")
    else:
        candidates.append(base)
    for name in candidates:
        if not _plain_name(name):
            continue
        again = pattern.match(name)
        if again is not None and to_id(again.group("id")) == sim_id:
            return name
    return None


def _plain_name(name: str) -> bool:
    return (
        bool(name) and name not in (".", "..") and not name.startswith(".")
        and not any(c in name for c in "/\\\0")
        and len(name.encode("utf-8", "surrogateescape")) <= _MAX_NAME_BYTES
    )


def clean_stale_tmp(h5_dir: str | Path) -> list[str]:
    """Delete temporary files left in ``h5_dir`` by processes that no longer run here.

    Temporary files of live processes on this host (a concurrent extraction) are kept.
    """
    removed: list[str] = []
    if not os.path.isdir(h5_dir):
        return removed
    for entry in os.scandir(h5_dir):
        m = TMP_NAME.match(entry.name)
        if m is None or not entry.is_file(follow_symlinks=False):
            continue
        if _pid_alive(int(m.group("pid"))):
            continue
        try:
            os.unlink(entry.path)
        except FileNotFoundError:
            continue
        removed.append(entry.path)
    return sorted(removed)


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OSError, OverflowError):
        return False
    return True



TASK_STAGE = "extract"


def _execute(parts: list[ExtractPartition], h5_dir: str, dask: Any,
             show_progress: bool) -> list[dict[str, Any]]:
    progress = progress_bar(show_progress, sum(len(p.items) for p in parts), unit="file",
                            desc="extract")
    token = secrets.token_hex(4)
    results = run_partitions(
        dask, _extract_task, parts, args=(h5_dir,),
        key=lambda part: task_key(TASK_STAGE, os.path.basename(part.archive), token,
                                  part.index),
        done=lambda s: s["n"], progress=progress,
    )
    return sorted(results, key=lambda s: s["index"])


def _extract_task(h5_dir: str, part: ExtractPartition) -> dict[str, Any]:
    return extract_partition(part, h5_dir)


def extract_partition(part: ExtractPartition, h5_dir: str) -> dict[str, Any]:
    """Extract one partition's members into ``h5_dir`` (runs on a worker).

    A member that fails is reported, not raised, so the other members still get extracted.
    Idempotent: a re-run writes the same bytes under the same names.
    """
    reader = MemberReader()  # one descriptor per archive for the task
    extracted: list[Any] = []
    failed: list[ExperimentReadError] = []
    n_bytes = 0
    try:
        for item in part.items:
            try:
                n_bytes += extract_member(item, h5_dir, reader)
            except ExperimentReadError as exc:
                failed.append(exc)
                continue
            extracted.append(item.loc.sim_id)
    finally:
        reader.close()
    if extracted:
        _fsync_dir(h5_dir)  # the renames are durable before the driver may delete archives
    return {"index": part.index, "archive": part.archive, "n": len(part.items),
            "extracted": extracted, "failed": failed, "bytes": n_bytes}


def extract_member(item: ExtractItem, h5_dir: str, reader: MemberReader | None = None) -> int:
    """Copy one member to ``h5_dir/item.name`` through a verified temporary file.

    The member is opened as every reader opens it (:func:`guideloom.read.zipmember.open_span`:
    its listed defect, local header and extent checked), a compressed one inflated as it
    streams, size and CRC-32 checked before the file is renamed into place.

    Returns:
        The number of bytes written.

    Raises:
        CorruptDataError: The member is damaged (bad CRC-32, size or zip structure).
        ExperimentReadError: The archive cannot be read or the file cannot be written.
    """
    loc = item.loc
    where = loc.describe()
    final = os.path.join(h5_dir, item.name)
    tmp = os.path.join(h5_dir, f".{item.name}.tmp-{os.getpid()}-{secrets.token_hex(6)}")
    placed = False
    own = reader is None
    reader = reader or MemberReader()
    try:
        if item.encrypted:
            raise ExperimentReadError(f"experiment {loc.sim_id}: {where} is encrypted",
                                      sim_id=loc.sim_id, file=where)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        out = os.open(tmp, flags | getattr(os, "O_CLOEXEC", 0), 0o666)
        n = 0
        try:
            for piece in reader.pieces(loc, (item.file_size, item.method), CHUNK_BYTES):
                _write_all(out, memoryview(piece))
                n += len(piece)
            os.fsync(out)
        finally:
            os.close(out)
        if n != item.file_size:  # member_pieces checks it; a second look costs nothing
            raise CorruptDataError(
                f"experiment {loc.sim_id}: {where} is corrupt: {n} bytes extracted, the "
                f"archive's central directory says {item.file_size}; nothing was written to "
                f"{final}", sim_id=loc.sim_id, file=where)
        os.replace(tmp, final)
        placed = True
        return n
    except ExperimentReadError:
        raise
    except (OSError, NotImplementedError, RuntimeError) as exc:
        raise ExperimentReadError(
            f"experiment {loc.sim_id}: extracting {where} to {final} failed ({exc})",
            sim_id=loc.sim_id, file=where) from exc
    finally:
        if own:
            reader.close()
        if not placed:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data):]


def _fsync_dir(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_archives(plan: ExtractPlan, report: ExtractReport,
                     failures: Sequence[ExperimentReadError], root: Path, h5_dir: Path) -> None:
    unmet = dict(plan.unmet)
    for exc in failures:
        unmet.setdefault(exc.sim_id, f"experiment {exc.sim_id} failed: {exc}")
    done = set(report.extracted) | set(plan.skipped)
    synced = False
    for ap in plan.archives:
        reasons = list(ap.blockers)
        reasons += [unmet[i] for i in dict.fromkeys(ap.ids) if i in unmet]
        reasons += [f"experiment {i} was not extracted" for i in dict.fromkeys(ap.ids)
                    if i not in unmet and i not in done]
        if not reasons:  # loose files found there before: their bytes must be the member's
            reasons += [f"experiment {i}: the loose file {plan.existing[i][0]} differs from "
                        "the archive's member (CRC-32)"
                        for i in dict.fromkeys(ap.ids)
                        if i in plan.existing and file_crc32(plan.existing[i][0])
                        != plan.existing[i][1]]
        if not reasons:
            try:
                st = os.stat(ap.path)
            except FileNotFoundError:
                continue
            if (st.st_size, st.st_mtime_ns) != ap.stat:
                reasons.append("the archive changed during extraction")
        if reasons:
            more = f" (and {len(reasons) - 1} more reasons)" if len(reasons) > 1 else ""
            report.kept_archives[ap.path] = reasons[0] + more
            continue
        if not synced and h5_dir.is_dir():
            _fsync_dir(h5_dir)
            synced = True
        os.unlink(ap.path)
        report.removed_archives.append(ap.path)
    if report.removed_archives:
        _fsync_dir(root)
