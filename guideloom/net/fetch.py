"""Fetch one file over HTTP into place: resumable, verified, never half-written under its name.

The bytes go to ``NAME.part``; a killed run leaves that file and the next run asks for the rest
with ``Range: bytes=N-`` and ``If-Range`` naming the version the part is of (its first answer's
ETag or Last-Modified, kept in ``NAME.part.json``): a file changed on the server since comes
whole. Where the server names no version and no checksum is known, the rest is not asked for
(it could be of another version): the file is fetched again, and a log record says so. The
MD5 (and SHA-256 when one is known) is computed while the bytes arrive; only a file whose size
and checksums match is fsynced and renamed to ``NAME``.

The client is the standard library's ``urllib`` (one blocking connection per thread): it follows
redirects, keeps ``Range`` across them and drops headers added as "unredirected" (the API
token), and it needs no optional dependency, so ``guideloom download`` works on a base install.
"""

from __future__ import annotations

import contextlib
import email.message
import email.utils
import hashlib
import http.client
import logging
import os
import re
import socket
import stat
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guideloom.errors import (
    DownloadError,
    GuideloomError,
    RestartDownloadError,
    TransientDownloadError,
)
from guideloom.net.deadline import BODY_MIN_RATE, Pace, open_url

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
CHUNK = 1 << 18  # bytes reach the .part file as they arrive (read1), at most this many at once
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)$")
USER_AGENT = "guideloom-download"
logger = logging.getLogger(__name__)


HASH_NAMES = {"MD5": "md5", "SHA-1": "sha1", "SHA-256": "sha256", "SHA-512": "sha512"}
_LABELS = {v: k for k, v in HASH_NAMES.items()}


@dataclass(frozen=True)
class Checksum:
    """One checksum a file must have: ``algorithm`` a hashlib name (``md5``, ``sha256``, ...),
    ``value`` lower-case hex, ``source`` who lists it (for the error message)."""

    algorithm: str
    value: str
    source: str = "the repository"


@dataclass(frozen=True)
class Expected:
    """What a file must be: its size in bytes (where known) and its checksums."""

    size: int | None = None
    checksums: tuple[Checksum, ...] = ()


class Hashes:
    """The hashes of :class:`Expected`'s algorithms, computed over the bytes given."""

    def __init__(self, expected: Expected):
        self.expected = expected
        self.hashers = {c.algorithm: hashlib.new(c.algorithm, usedforsecurity=False)
                        for c in expected.checksums}

    def update(self, data: bytes | memoryview) -> None:
        for h in self.hashers.values():
            h.update(data)

    def problems(self) -> list[str]:
        """One line per checksum that does not match (empty when all match)."""
        out = []
        for c in self.expected.checksums:
            got = self.hashers[c.algorithm].hexdigest()
            if got != c.value.lower():
                out.append(f"{_LABELS.get(c.algorithm, c.algorithm)} {got}, {c.source} lists "
                           f"{c.value}")
        return out

    @classmethod
    def of_file(cls, path: Path, expected: Expected) -> Hashes:
        """The hashes of a whole file."""
        hashes = cls(expected)
        _hash_prefix(path, hashes)
        return hashes


@dataclass(frozen=True)
class Settings:
    """How hard to try: ``timeout`` seconds per connect or read, ``retries`` after the first
    attempt, ``backoff`` seconds before the first retry (doubling, at most ``max_wait``)."""

    timeout: float = 60.0
    retries: int = 5
    backoff: float = 0.5
    max_wait: float = 30.0
    token: str | None = None
    parallel: int = 4  # files fetched at once (used by guideloom.releases.release)
    connections: int = 16  # byte ranges of one file fetched at once (guideloom.read.http)
    min_rate: float = BODY_MIN_RATE  # bytes/s a body keeps up over each `timeout` s


def _request(url: str, settings: Settings, headers: Mapping[str, str] | None = None
             ) -> urllib.request.Request:
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **(headers or {})})
    if settings.token:  # never follows a redirect (DaRUS sends large files to another host)
        req.add_unredirected_header("X-Dataverse-key", settings.token)
    return req


def retry_after(headers: Mapping[str, str] | email.message.Message | None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (a number or an HTTP date), else None."""
    value = headers.get("Retry-After") if headers else None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _retry_after(exc: urllib.error.HTTPError) -> float | None:
    return retry_after(exc.headers)


def _http_error(exc: urllib.error.HTTPError, url: str, label: str) -> Exception:
    if exc.code in RETRY_STATUS:
        return TransientDownloadError(f"HTTP {exc.code} {exc.reason}", _retry_after(exc))
    hint = ""
    if exc.code in (401, 403):
        hint = ("; a draft or restricted file needs an API token (--token, or the "
                "GUIDELOOM_DATAVERSE_TOKEN environment variable)")
    elif exc.code == 404:
        hint = "; check the version (--version) and the file name"
    return DownloadError(f"{label}: {url} answered HTTP {exc.code} {exc.reason}{hint}")


def with_retries(action: Callable[[], Any], url: str, label: str, settings: Settings, *,
                 give_up: Callable[[str, int], Exception] | None = None) -> Any:
    """Run ``action`` until it succeeds, retrying transient failures with backoff.

    Transient failures are :class:`TransientDownloadError` (its ``wait``, a ``Retry-After``,
    replaces the backoff), an HTTP status in :data:`RETRY_STATUS`, and connection errors and
    timeouts (``OSError``, ``http.client.HTTPException``). Any other :class:`GuideloomError`
    passes through at once.

    Args:
        give_up: Builds the error raised when the retries run out, from the last reason and the
            number of attempts (default: a :class:`DownloadError` that says to run the command
            again).

    Raises:
        DownloadError: A permanent failure, or the retries ran out (naming ``url``, ``label``
            and the last reason).
    """
    attempt = 0
    while True:
        try:
            return action()
        except TransientDownloadError as exc:
            reason, wait = str(exc), exc.wait
        except GuideloomError:
            raise
        except urllib.error.HTTPError as exc:
            err = _http_error(exc, url, label)
            if isinstance(err, DownloadError):
                raise err from None
            reason, wait = str(err), getattr(err, "wait", None)
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            cause = getattr(exc, "reason", None) or exc
            if isinstance(cause, socket.gaierror):  # no retry brings a name that is not there
                raise _unresolved(url, label, cause, give_up) from None
            reason, wait = f"{type(cause).__name__}: {cause}", None
        attempt += 1
        if attempt > settings.retries:
            if give_up is not None:
                raise give_up(reason, attempt) from None
            raise DownloadError(f"{label}: {url} failed after {attempt} attempts "
                                f"(last: {reason}); run the command again to resume") from None
        delay = settings.backoff * 2 ** (attempt - 1) if wait is None else wait
        time.sleep(min(delay, settings.max_wait))


def _unresolved(url: str, label: str, cause: socket.gaierror,
                give_up: Callable[[str, int], Exception] | None) -> Exception:
    """The error of a host name that does not resolve: said once, without retries."""
    host = urllib.parse.urlsplit(url).hostname or url
    reason = f"cannot resolve {host}: no network? ({cause.strerror or cause})"
    if give_up is not None:
        return give_up(reason, 1)
    return DownloadError(f"{label}: {url}: {reason}; check the network and the server name, "
                         "then run the command again")


MAX_JSON = 256 << 20  # bytes of one API answer read at most (DaRUS' file list: about 3 MB)


def get_json(url: str, settings: Settings, label: str) -> Any:
    """GET a JSON document, with the retries of :func:`with_retries`."""
    import json

    def once() -> Any:
        with open_url(_request(url, settings, {"Accept": "application/json"}),
                      settings.timeout) as resp:
            pace = Pace(settings.timeout, settings.min_rate)
            parts: list[bytes] = []
            size = 0
            while size <= MAX_JSON and (block := resp.read1(CHUNK)):  # we never hold more
                parts.append(block)
                size += len(block)
                pace.add(len(block))
            body = b"".join(parts)
        if len(body) > MAX_JSON:
            raise DownloadError(f"{label}: {url} answered more than {MAX_JSON >> 20} MiB of "
                                "JSON; that is not a Dataverse answer (check the server URL)")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise DownloadError(f"{label}: {url} did not answer JSON ({exc})") from None

    return with_retries(once, url, label, settings)


def _hash_prefix(part: Path, hashes: Hashes) -> int:
    done = 0
    with part.open("rb") as fh:
        while block := fh.read(CHUNK):
            hashes.update(block)
            done += len(block)
    return done


def _check_content_range(value: str | None, start: int, size: int | None) -> None:
    m = _CONTENT_RANGE.match((value or "").strip())
    if not m:
        raise RestartDownloadError(f"answered 206 with Content-Range {value!r}")
    first, last, total = int(m[1]), int(m[2]), m[3]
    if first != start or (size is not None and (last != size - 1 or total not in ("*", str(size)))):
        raise RestartDownloadError(f"asked for bytes {start}-, got Content-Range {value!r}")


def part_path(target: Path) -> Path:
    """Where the bytes of ``target`` are written until they are verified."""
    return target.with_name(target.name + ".part")


VERSION_SUFFIX = ".json"  # NAME.part.json: the version (ETag or Last-Modified) NAME.part is of


def _validator_of(headers: Mapping[str, str] | email.message.Message) -> str | None:
    """What an ``If-Range`` may name of an answer: a strong ETag, else its Last-Modified."""
    etag = headers.get("ETag")
    if etag and not etag.startswith("W/"):
        return str(etag)
    modified = headers.get("Last-Modified")
    return str(modified) if modified else None


class _Folder:
    """The open folder of one download: its ``.part`` file, the version that file is of
    (``NAME.part.json``) and the final rename, all by name in the folder (``dir_fd``)."""

    def __init__(self, fd: int, target: Path):
        self.fd = fd
        self.target = target
        self.name = target.name
        self.part = target.name + ".part"
        self.version_file = self.part + VERSION_SUFFIX

    def shown(self, name: str) -> Path:
        return self.target.with_name(name)

    def part_size(self) -> int:
        try:
            info = os.stat(self.part, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return 0
        if stat.S_ISLNK(info.st_mode):
            from guideloom.errors import UnsafeFileError

            raise UnsafeFileError(f"the partial download {self.shown(self.part)} is a symbolic "
                                  "link (planted by someone?); guideloom does not follow it: "
                                  "remove it and rerun")
        return info.st_size

    def open_part(self, truncate: bool) -> Any:
        """The ``.part`` file for writing at its end (emptied first if ``truncate``); a planted
        link or another user's file is refused."""
        from guideloom.runtime.private_files import open_private_file

        fd = open_private_file(self.part, "the partial download", dir_fd=self.fd,
                               shown=str(self.shown(self.part)))
        if truncate:
            os.ftruncate(fd, 0)
            os.fsync(fd)  # empty on disk before a version is recorded for it
        os.lseek(fd, 0, os.SEEK_END)
        return os.fdopen(fd, "wb", closefd=True)

    def cut_part(self, size: int) -> None:
        with self.open_part(False) as fh:
            os.ftruncate(fh.fileno(), size)

    def hash_part(self, hashes: Hashes) -> int:
        fd = os.open(self.part, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=self.fd)
        done = 0
        with os.fdopen(fd, "rb") as fh:
            while block := fh.read(CHUNK):
                hashes.update(block)
                done += len(block)
        return done

    def version(self) -> str | None:
        """The ``If-Range`` value recorded for the ``.part`` file (None: none, or not ours)."""
        import json

        try:
            fd = os.open(self.version_file, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=self.fd)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                return None
            doc = json.loads(os.read(fd, 1 << 16))
        except (OSError, ValueError):
            return None
        finally:
            os.close(fd)
        value = doc.get("if_range") if isinstance(doc, dict) else None
        return value if isinstance(value, str) else None

    def set_version(self, value: str | None) -> None:
        import json

        from guideloom.runtime.private_files import open_private_file

        if value is None:
            self.remove(self.version_file)
            return
        fd = open_private_file(self.version_file, "the partial download's version",
                               dir_fd=self.fd, shown=str(self.shown(self.version_file)))
        with os.fdopen(fd, "wb") as fh:
            fh.truncate(0)
            fh.write(json.dumps({"if_range": value}).encode() + b"\n")
            fh.flush()
            os.fsync(fh.fileno())

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def publish(self, mode: int) -> None:
        """Give the verified ``.part`` its mode and rename it to its final name."""
        fd = os.open(self.part, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=self.fd)
        try:
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.replace(self.part, self.name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        self.remove(self.version_file)
        os.fsync(self.fd)


def fetch_file(url: str, target: Path, expected: Expected, *, settings: Settings, label: str,
               progress: Callable[[int], None] = lambda n: None, root: Path | None = None,
               mode: int | None = None) -> int:
    """Download ``url`` to ``target`` (resuming ``target.part``); returns the bytes fetched.

    A partial file is continued only when it is provably of the version the server has now:
    with ``If-Range`` naming the ETag (or Last-Modified) of the answer it began with, or, where
    the server gave neither, when ``expected`` has a checksum that will catch a mix. Otherwise
    it is fetched again from byte 0, and a log record says why.

    Args:
        url: The file's URL (redirects are followed; the token is not sent after one).
        target: Final path; written only once size and checksums match.
        expected: Size and checksums to verify against.
        settings: Timeout, retries and token.
        label: Names the file in errors (e.g. ``h5/concave.zip``).
        progress: Called with the bytes added (negative when a partial file is discarded).
        root: The output folder: the folders between it and ``target`` are made or checked by
            :func:`guideloom.net.folder.open_folder` (default ``target``'s own folder).
        mode: The finished file's mode (default ``0o666`` less the umask).

    Raises:
        DownloadError: After the retries, or when the data fails its checksum twice; the
            partial file is removed in the second case, and ``target`` is never touched.
        UnsafeFileError: A folder on the way or the ``.part`` file was planted by someone.
    """
    from guideloom.net.folder import file_mode, open_folder

    root = target.parent if root is None else root
    fd = open_folder(root, target.parent.relative_to(root).parts)
    try:
        return _fetch(url, _Folder(fd, target), expected, settings, label, progress,
                      file_mode() if mode is None else mode)
    finally:
        os.close(fd)


def _fetch(url: str, folder: _Folder, expected: Expected, settings: Settings, label: str,
           progress: Callable[[int], None], mode: int) -> int:
    target = folder.target
    state = {"fetched": 0, "use_range": True, "mismatches": 0, "counted": 0}

    def count(n: int) -> None:
        state["counted"] += n
        progress(n)

    def discard() -> None:
        folder.remove(folder.part)
        folder.remove(folder.version_file)
        count(-state["counted"])

    def once() -> None:
        have = folder.part_size()
        if expected.size is not None and have > expected.size:
            discard()
            have = 0
        version = folder.version() if have else None
        if have and version is None and not expected.checksums:
            logger.warning("%s: cannot resume safely: the server gave no ETag or Last-Modified "
                           "for it and the file list no checksum, so the %d bytes fetched "
                           "before may be of another version; fetching the whole file again",
                           label, have)
            discard()
            have = 0
        if have and have == expected.size and not expected.checksums:
            have -= 1  # the last byte again, asked with If-Range: proves the version
            folder.cut_part(have)
        if state["counted"] != have:  # what the bar shows follows what is on disk
            count(have - state["counted"])
        hashes = Hashes(expected)
        if not (expected.size is not None and have == expected.size):
            _receive(have, hashes, version)
        else:
            folder.hash_part(hashes)
        _verify(hashes)

    def _receive(have: int, hashes: Hashes, version: str | None) -> None:
        headers = {"Range": f"bytes={have}-"} if have and state["use_range"] else {}
        if headers and version is not None:
            headers["If-Range"] = version
        try:
            resp = open_url(_request(url, settings, headers), settings.timeout)
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and headers:  # the partial file does not fit the server's file
                exc.close()
                raise RestartDownloadError(f"answered 416 to Range bytes={have}-") from None
            raise
        with resp:
            now = _validator_of(resp.headers)
            if resp.status == 206 and headers:
                _check_content_range(resp.headers.get("Content-Range"), have, expected.size)
                if version is not None and now is not None and now != version \
                        and now.startswith('"') == version.startswith('"'):
                    raise RestartDownloadError(f"answered 206 for version {now}, not {version} "
                                               "that the partial file is of")
                folder.hash_part(hashes)
                truncate = False
            elif resp.status == 200:
                if have:  # the file changed (If-Range), or the server ignored Range
                    if "If-Range" in headers:
                        logger.info("%s changed on the server since %d bytes of it were "
                                    "fetched; fetching the new version whole", label, have)
                    count(-have)
                    have = 0
                truncate = True
            else:
                raise DownloadError(f"{label}: {url} answered HTTP {resp.status} "
                                    f"{resp.reason} to a download request")
            received = have
            pace = Pace(settings.timeout, settings.min_rate)
            with folder.open_part(truncate) as out:
                if truncate:
                    folder.set_version(now)
                try:
                    while block := resp.read1(CHUNK):
                        out.write(block)
                        hashes.update(block)
                        received += len(block)
                        state["fetched"] += len(block)
                        count(len(block))
                        pace.add(len(block))  # what came is kept for a resume
                        if expected.size is not None and received > expected.size:
                            raise RestartDownloadError(
                                f"sent more than the {expected.size} bytes listed")
                except http.client.IncompleteRead as exc:
                    out.write(exc.partial)
                    hashes.update(exc.partial)
                    received += len(exc.partial)
                    state["fetched"] += len(exc.partial)
                    count(len(exc.partial))
                    raise TransientDownloadError(
                        f"body ended after {received} bytes (connection closed)") from None
                finally:
                    out.flush()
                    os.fsync(out.fileno())
        if expected.size is not None and received != expected.size:
            raise TransientDownloadError(f"body ended after {received} of {expected.size} bytes")

    def _verify(hashes: Hashes) -> None:
        problems = hashes.problems()
        if problems:
            discard()
            state["mismatches"] += 1
            if state["mismatches"] >= 2:
                raise DownloadError(f"{label}: the data from {url} has {'; '.join(problems)}; "
                                    f"the damaged download was deleted and {target} was not "
                                    "written (the repository copy may be damaged: tell its "
                                    "maintainers)")
            raise RestartDownloadError("checksum mismatch; fetching the whole file again", wait=0.0)
        folder.publish(mode)

    def attempt() -> None:
        try:
            once()
        except RestartDownloadError:
            folder.remove(folder.part)
            folder.remove(folder.version_file)
            count(-state["counted"])
            state["use_range"] = False
            raise

    with_retries(attempt, url, label, settings)
    return state["fetched"]
