"""The published release on a Dataverse server (DaRUS): what it holds, and downloading it.

``download`` writes the layout ``rddac download`` writes: each file at
``OUT/<directoryLabel>/<name>`` (the zips under ``OUT/h5/``, ``metadata.json`` and
``process_parameters.csv`` at the top). Files are fetched in parallel threads with one progress
bar; each is verified against the repository's checksum (MD5 on DaRUS; SHA-1/256/512 are
understood too) and the manifest's ``md5``/``sha256`` when
``metadata.json`` lists the file) before it is renamed into place (see
:mod:`guideloom.net.fetch`). A file already present and verified is not fetched again; the
checksums verified are remembered in ``OUT/.guideloom-download.json`` (keyed by size,
modification time, inode, device, owner and ctime: a file replaced or rewritten since, even
keeping size and mtime, is checked again) so a second run reads nothing back either.

``OUT`` may be a folder other users can write to: the folders below it are made or checked by
:mod:`guideloom.net.folder` (a link or folder planted by another user is refused), the
record is read only if it is a file of ours and written by renaming a new file of an
unguessable name, and a file that is a link or another user's is never "present".
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from guideloom.errors import DownloadError, UsageError
from guideloom.net.dataverse import (
    DEFAULT_VERSION,
    RDDAC_DOI,
    RemoteFile,
    title_of,
    version_files,
)
from guideloom.net.dataverse import api_token as _token
from guideloom.net.dataverse import server_url as _server
from guideloom.net.fetch import (
    Checksum,
    Expected,
    Hashes,
    Settings,
    fetch_file,
    part_path,
)
from guideloom.net.folder import file_mode, own_file

DEFAULT_OUT = "data"
#: The DDACS simulations the RDDAC experiments were matched to (what ``rddac download`` fetches
#: beside the measurements): DDACS's ``rddac.zip`` with its manifest and parameter table, into
#: ``OUT/simulation/`` (a DDACS data folder of its own).
SIM_DOI = "doi:10.18419/DARUS-4801"
SIM_VERSION = "3.0"
SIM_FILES = ("rddac.zip", "metadata.json", "process_parameters.csv")
SIM_SUBDIR = "simulation"
SMALL_FILES = ("process_parameters.csv", "metadata.json", "sample.zip")
RECORD = ".guideloom-download.json"
LOCK = ".guideloom-download.lock"
MANIFEST = "metadata.json"
logger = logging.getLogger(__name__)


@dataclass
class DownloadPlan:
    """What :func:`download` will do: the files chosen, which are present, which to fetch."""

    server: str
    doi: str
    version: str
    out: Path
    title: str
    files: list[RemoteFile]
    present: list[RemoteFile] = field(default_factory=list)
    to_fetch: list[RemoteFile] = field(default_factory=list)

    @property
    def bytes_to_fetch(self) -> int:
        """Bytes of the files not yet present (a partial file's bytes are fetched only once)."""
        return sum(f.size for f in self.to_fetch)


@dataclass
class DownloadReport:
    """What :func:`download` did."""

    out: Path
    downloaded: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    bytes_fetched: int = 0
    seconds: float = 0.0
    extract: Any = None
    simulations: DownloadReport | None = None


def _select(files: list[RemoteFile], names: Sequence[str] | None, small: bool
            ) -> list[RemoteFile]:
    if names:
        wanted = list(names)
    elif small:
        wanted = list(SMALL_FILES)
    else:
        return sorted(files, key=lambda f: f.size)
    chosen = [f for f in files if f.name in wanted or f.relpath in wanted]
    found = {f.name for f in chosen} | {f.relpath for f in chosen}
    missing = [n for n in wanted if n not in found]
    if missing:
        listed = ", ".join(sorted(f.relpath for f in files)[:20])
        raise UsageError(f"not in this version of the dataset: {', '.join(missing)} "
                         f"(it lists: {listed})")
    return sorted(chosen, key=lambda f: f.size)


def _identity(st: os.stat_result) -> dict[str, int]:
    """What changes when a file is replaced or rewritten, even keeping its size and mtime: its
    inode, device and owner, and its ctime (which no one can set back)."""
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "inode": st.st_ino, "device": st.st_dev, "uid": st.st_uid}


def _read_own(path: Path) -> str | None:
    """The text of ``path`` if it is a regular file of ours (a planted link or another user's
    file is not read), else ``None``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            logger.warning("%s is not a file of yours; it is ignored and replaced", path)
            return None
        return fh.read().decode("utf-8", "replace")


class _Record:
    """``OUT/.guideloom-download.json``: checksums verified, by path and file identity
    (:func:`_identity`); only a record file of ours is read, and it is replaced whole by a
    rename of a new file of a name nobody could guess."""

    def __init__(self, out: Path):
        self.path = out / RECORD
        self.lock = threading.Lock()
        try:
            data = json.loads(_read_own(self.path) or "{}")
        except ValueError:
            data = {}
        self.data: dict[str, dict[str, Any]] = data if isinstance(data, dict) else {}

    def verified(self, f: RemoteFile, target: Path) -> bool:
        entry = self.data.get(f.relpath)
        st = own_file(target)
        if st is None or not isinstance(entry, dict) or not f.checksum:
            return False
        return entry.get("checksum") == f.checksum.value and all(
            entry.get(k) == v for k, v in _identity(st).items())

    def add(self, f: RemoteFile, target: Path) -> None:
        st = own_file(target)
        if st is None:
            return
        with self.lock:
            self.data[f.relpath] = {"checksum": f.checksum.value if f.checksum else None,
                                    **_identity(st)}
            fd, tmp = tempfile.mkstemp(prefix=RECORD + ".", suffix=".tmp", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(json.dumps(self.data, indent=1, sort_keys=True) + "\n")
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise


def manifest_checksums(path: Path) -> dict[str, dict[str, str]]:
    """``{file name: {"md5": .., "sha256": ..}}`` of the FileObjects a manifest lists."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    sums: dict[str, dict[str, str]] = {}
    for entry in doc.get("distribution", []) if isinstance(doc, dict) else []:
        if not isinstance(entry, dict):
            continue
        known = {k: str(entry[k]).lower() for k in ("md5", "sha256") if entry.get(k)}
        for key in ("contentUrl", "name"):
            if known and isinstance(entry.get(key), str):
                sums.setdefault(PurePosixPath(entry[key]).name, known)
    return sums


def _expected(f: RemoteFile, sums: dict[str, dict[str, str]]) -> Expected:
    listed = sums.get(f.name, {}) if f.name != MANIFEST else {}
    checks = [f.checksum] if f.checksum else []
    for algorithm, value in listed.items():
        if f.checksum and f.checksum.algorithm == algorithm:
            if value != f.checksum.value:
                raise DownloadError(
                    f"{f.relpath}: the repository lists {algorithm} {f.checksum.value} "
                    f"but {MANIFEST} lists {value}; one of them is out of date (tell the "
                    "dataset's maintainers)")
            continue
        checks.append(Checksum(algorithm, value, f"the manifest {MANIFEST}"))
    return Expected(size=f.size, checksums=tuple(checks))


def _file_matches(path: Path, expected: Expected) -> bool:
    if expected.size is not None and path.stat().st_size != expected.size:
        return False
    return not Hashes.of_file(path, expected).problems()


def _check_patience(timeout: float, retries: int) -> None:
    """``timeout`` a finite number of seconds above 0, ``retries`` a whole number >= 0."""
    import math

    if isinstance(timeout, bool) or not isinstance(timeout, int | float) \
            or not (math.isfinite(timeout) and timeout > 0):
        raise UsageError(f"timeout must be a finite number of seconds above 0, not {timeout!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise UsageError(f"retries must be a whole number >= 0, not {retries!r}")


def plan_download(out: str | Path = DEFAULT_OUT, *, version: str = DEFAULT_VERSION,
                  files: Sequence[str] | None = None, small: bool = False,
                  token: str | None = None, server: str | None = None, doi: str = RDDAC_DOI,
                  timeout: float = 60.0, retries: int = 5) -> DownloadPlan:
    """List the version's files, choose them and see which are already present and verified.

    Arguments as for :func:`download`.
    """
    _check_patience(timeout, retries)
    base = _server(server)
    meta, listed = version_files(version, server=base, doi=doi, token=token, timeout=timeout,
                                 retries=retries)
    chosen = _select(listed, files, small)
    if not chosen:
        raise UsageError(f"version {version} of {doi} lists no files")
    number = f"{meta.get('versionNumber', '?')}.{meta.get('versionMinorNumber', 0)}"
    plan = DownloadPlan(base, doi, number if meta.get("versionNumber") else version,
                        Path(out), title_of(meta), chosen)
    record = _Record(plan.out)
    sums = manifest_checksums(plan.out / MANIFEST)
    for f in chosen:
        target = plan.out / f.relpath
        ok = own_file(target) is not None and (record.verified(f, target)
                                               or _file_matches(target, _expected(f, sums)))
        if not ok and target.is_symlink():
            logger.info("%s is a symbolic link; it is replaced by the file downloaded",
                        target)
        if ok and not record.verified(f, target):
            record.add(f, target)
        (plan.present if ok else plan.to_fetch).append(f)
    return plan


@contextmanager
def _out_lock(out: Path) -> Iterator[None]:
    """Hold ``OUT/.guideloom-download.lock``: two downloads never write the same files."""
    from guideloom.runtime.os_support import try_lock, unlock
    from guideloom.runtime.private_files import open_private_file

    path = str(out / LOCK)
    fd = open_private_file(path, "the download lock")
    locked = False
    try:
        locked = try_lock(fd, path)
        if not locked:
            raise DownloadError(f"another guideloom download is writing into {out}; wait for "
                                "it to finish (or stop it) and run this again")
        yield
    finally:
        if locked:
            unlock(fd, path)
        os.close(fd)


def _bar(total: int, initial: int, show: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, unit="B", unit_scale=True, unit_divisor=1024,
                desc="download", disable=not show, dynamic_ncols=True)


def run_download(plan: DownloadPlan, *, token: str | None = None, parallel: int = 4,
                 timeout: float = 60.0, retries: int = 5, show_progress: bool = True,
                 extract: bool = False, remove_zip: bool = False, client: Any = "sync",
                 private: bool = False) -> DownloadReport:
    """Fetch ``plan.to_fetch`` (in ``parallel`` threads), then extract the zips if asked.

    Files get the mode the umask allows (``0o600`` with ``private``)."""
    if remove_zip and not extract:
        raise UsageError("--remove-zip deletes the zips after --extract; pass both")
    _check_patience(timeout, retries)
    t0 = time.perf_counter()
    settings = Settings(timeout=timeout, retries=retries, token=_token(token), parallel=parallel)
    report = DownloadReport(plan.out, present=[f.relpath for f in plan.present])
    plan.out.mkdir(parents=True, exist_ok=True)
    with _out_lock(plan.out):
        _fetch_all(plan, report, settings, show_progress, file_mode(private))
    if extract:
        from guideloom.export.extract import extract_zips

        report.extract = extract_zips(plan.out, client=client, remove_zip=remove_zip,
                                      show_progress=show_progress)
    report.seconds = time.perf_counter() - t0
    return report


def _fetch_all(plan: DownloadPlan, report: DownloadReport, settings: Settings,
               show_progress: bool, mode: int) -> None:
    record = _Record(plan.out)
    partial = sum(min(part_path(plan.out / f.relpath).stat().st_size, f.size)
                  for f in plan.to_fetch if part_path(plan.out / f.relpath).is_file())
    lock = threading.Lock()
    with _bar(plan.bytes_to_fetch, partial, show_progress and bool(plan.to_fetch)) as bar:
        def progress(n: int) -> None:
            with lock:
                bar.update(n)

        def one(f: RemoteFile, sums: dict[str, dict[str, str]]) -> int:
            target = plan.out / f.relpath
            url = f"{plan.server}/api/access/datafile/{f.id}?format=original"
            have = part_path(target).stat().st_size if part_path(target).is_file() else 0
            progress(-min(have, f.size))  # fetch_file counts what it finds on disk
            got = fetch_file(url, target, _expected(f, sums), settings=settings,
                             label=f.relpath, progress=progress, root=plan.out, mode=mode)
            record.add(f, target)
            return got

        queue = list(plan.to_fetch)
        manifest_first = [f for f in queue if f.relpath == MANIFEST]
        for f in manifest_first:  # the manifest's checksums then check the other files
            report.bytes_fetched += one(f, {})
            report.downloaded.append(f.relpath)
        sums = manifest_checksums(plan.out / MANIFEST)
        rest = [f for f in queue if f.relpath != MANIFEST]
        errors: list[DownloadError] = []
        pool = ThreadPoolExecutor(max_workers=max(1, settings.parallel),
                                  thread_name_prefix="guideloom-download")
        try:
            futures = {pool.submit(one, f, sums): f for f in rest}
            for fut, f in futures.items():
                try:
                    report.bytes_fetched += fut.result()
                    report.downloaded.append(f.relpath)
                except DownloadError as exc:
                    errors.append(exc)
        except BaseException:  # Ctrl-C: start nothing more; the .part files stay for a resume
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise DownloadError(f"{errors[0]}{more}; {len(report.downloaded)} file(s) were "
                            "downloaded and verified")


def plan_simulations(out: str | Path = DEFAULT_OUT, *, token: str | None = None,
                     server: str | None = None, timeout: float = 60.0, retries: int = 5
                     ) -> DownloadPlan:
    """The DDACS simulations' plan: :data:`SIM_FILES` of :data:`SIM_DOI` into
    ``out/simulation/`` (the same checks, resume and record as the measurements)."""
    return plan_download(Path(out) / SIM_SUBDIR, version=SIM_VERSION, files=SIM_FILES,
                         token=token, server=server, doi=SIM_DOI, timeout=timeout,
                         retries=retries)


def wants_simulations(files: Sequence[str] | None, small: bool, no_sim: bool,
                      doi: str = RDDAC_DOI) -> bool:
    """Whether a download brings the simulations: a full download of the RDDAC release, unless
    ``no_sim`` (as ``rddac download``: never with ``--small`` or ``--files``)."""
    return not (files or small or no_sim) and doi == RDDAC_DOI


def download(out: str | Path = DEFAULT_OUT, *, version: str = DEFAULT_VERSION,
             files: Sequence[str] | None = None, small: bool = False, extract: bool = False,
             remove_zip: bool = False, token: str | None = None, server: str | None = None,
             doi: str = RDDAC_DOI, parallel: int = 4, timeout: float = 60.0, retries: int = 5,
             show_progress: bool = True, client: Any = "sync",
             confirm: Callable[[DownloadPlan], bool] | None = None,
             private: bool = False, no_sim: bool = False) -> DownloadReport:
    """Download the published release (or some of its files) into ``out``, verified.

    Args:
        out: Output directory; files go to ``out/<folder>/<name>`` as rddac writes them.
        version: Dataset version (``"2.0"``, ``":latest-published"``, ``":draft"``).
        files: File names (or ``folder/name``) to fetch; default all of them.
        small: Fetch the sample bundle only (``process_parameters.csv``, ``metadata.json``,
            ``sample.zip``), as ``rddac download --small``.
        extract: Extract the zips to ``out/h5/`` afterwards (:func:`guideloom.extract_zips`).
        remove_zip: Delete each zip once extracted and verified (with ``extract``).
        token: Dataverse API token, sent as ``X-Dataverse-key`` to the server only (default
            ``$GUIDELOOM_DATAVERSE_TOKEN``).
        server: Dataverse base URL (default ``$GUIDELOOM_DATAVERSE_URL``, else DaRUS).
        doi: The dataset's persistent id (default the RDDAC release).
        parallel: Files fetched at once.
        timeout: Seconds per connect or read before a retry.
        retries: Retries of the file list and of each file after the first attempt (429,
            5xx, resets, timeouts; a server name that does not resolve is not retried).
        show_progress: One progress bar of bytes, rate and time left.
        client: Where ``extract`` runs (see :func:`guideloom.extract_zips`).
        confirm: Called with the plan before anything is fetched; a false answer fetches
            nothing (the report then lists only what was present). The simulations come
            with the measurements' answer.
        private: Files readable by you only (``0o600``); by default they get the mode your
            umask allows, as every other file you write (so colleagues can read a shared copy).
        no_sim: Skip the DDACS simulations a full download brings into ``out/simulation/``
            (``rddac download --no-sim``); ``small`` and ``files`` never bring them.

    Raises:
        DownloadError: A file could not be fetched or failed its checksum (named, with its
            URL); the files that succeeded stay, a partial file stays as ``NAME.part`` for a
            resume, and nothing unverified is under its final name.
        UsageError: A file asked for is not in the version.
    """
    plan = plan_download(out, version=version, files=files, small=small, token=token,
                         server=server, doi=doi, timeout=timeout, retries=retries)
    if confirm is not None and plan.to_fetch and not confirm(plan):
        return DownloadReport(plan.out, present=[f.relpath for f in plan.present])
    report = run_download(plan, token=token, parallel=parallel, timeout=timeout,
                          retries=retries, show_progress=show_progress, extract=extract,
                          remove_zip=remove_zip, client=client, private=private)
    if wants_simulations(files, small, no_sim, doi):
        sims = plan_simulations(out, token=token, server=server, timeout=timeout,
                                retries=retries)
        logger.info("the DDACS simulations (%s) into %s", SIM_DOI, sims.out)
        report.simulations = run_download(sims, token=token, parallel=parallel,
                                          timeout=timeout, retries=retries,
                                          show_progress=show_progress, private=private)
    return report
