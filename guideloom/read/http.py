"""HTTP(S) byte ranges on a base install: :class:`HttpRangeSource`.

The client is the standard library's ``http.client``: keep-alive connections are pooled per host
(scheme, host, port) and shared by every source of the process, and ``read_ranges`` issues the
coalesced ranges on a few threads at once (``Settings.connections``), so no optional dependency
(aiohttp) is needed and a Dask worker reuses its connections from task to task.

Every answer is checked before its bytes are used: a ``206`` whose ``Content-Range`` is exactly the
range asked and whose body has exactly that length. A wrong ``Content-Range``, a short body, a
reset connection, a timeout and ``429``/``5xx`` (waiting as ``Retry-After`` says) are retried
with backoff (:func:`guideloom.net.fetch.with_retries`), then raised as a
:class:`~guideloom.errors.RemoteReadError` naming the URL, the bytes and the experiment. A
``200`` with the whole file to a ``Range`` request is asked once more at once (a cache filling
itself may answer so), and a second one fails at once, saying what the server must support.
The answer and the body have the deadlines of :mod:`guideloom.net.deadline`.

Redirects are followed (DaRUS sends file bytes to a second server) and the final URL is
remembered; when it stops working (``403``/``404``/``410``: a signed URL that expired) the
original URL is asked again. The API token (``X-Dataverse-key``) goes only to the host of the
URL given, never to a host a redirect names.

Example:
    >>> src = HttpRangeSource("https://darus.example/api/access/datafile/42")  # doctest: +SKIP
    >>> head, tail = src.read_ranges([(0, 4), (src.size() - 22, 22)])           # doctest: +SKIP
"""

from __future__ import annotations

import http.client
import os
import re
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from guideloom.errors import (
    RangeIgnoredError,
    RemoteChangedError,
    RemoteReadError,
    TransientDownloadError,
)
from guideloom.net.deadline import RANGE_MIN_RATE as MIN_RATE  # noqa: F401 - remote.http's
from guideloom.net.deadline import (
    WATCH_PERIOD,  # noqa: F401 - re-exported by remote.http
    answer_late,
    body_budget,
    body_late,
    watchdog,
)
from guideloom.net.fetch import RETRY_STATUS, Settings, retry_after, with_retries
from guideloom.read.ranges import coalesce_ranges, split_coalesced
from guideloom.read.types import SourceDefaults
from guideloom.runtime.caches import BoundedCache, cache

USER_AGENT = "guideloom-remote"
TOKEN_HEADER = "X-Dataverse-key"
MAX_REDIRECTS = 5
MAX_IDLE_PER_HOST = 16
MAX_THREADS = 32  # threads of the process-wide pool that concurrent ranges run on
REDIRECT_STATUS = frozenset({301, 302, 303, 307, 308})
EXPIRED_STATUS = frozenset({403, 404, 410})  # a remembered redirect target no longer valid
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)$")
_DEFAULT_PORT = {"http": 80, "https": 443}
# what a keep-alive connection the server closed while idle raises on its next request
_IDLE_CLOSED = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)

T = TypeVar("T")
_HostKey = tuple[str, str, int]


def _close_idle(conns: list[http.client.HTTPConnection]) -> None:
    while conns:  # list.pop is atomic: a connection taken meanwhile is not closed
        conns.pop().close()


class _ConnectionPool:
    """Idle keep-alive connections per host; a connection is in use by one thread at a time.

    The hosts are the ``http_connections`` cache of :mod:`guideloom.runtime.caches`: the host used
    longest ago has its idle connections closed when too many hosts are kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: BoundedCache[_HostKey, list[http.client.HTTPConnection]] = cache(
            "http_connections", close=_close_idle)
        self._context: ssl.SSLContext | None = None

    def get(self, key: _HostKey, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        """A connection to ``key`` and whether it was used before."""
        with self._lock:
            idle = self._idle.get(key)
            conn = idle.pop() if idle else None
        if conn is not None:
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            conn.timeout = timeout
            return conn, True
        scheme, host, port = key
        if scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=timeout,
                                               context=self._tls()), False
        return http.client.HTTPConnection(host, port, timeout=timeout), False

    def _tls(self) -> ssl.SSLContext:
        """One TLS context (system CAs or ``SSL_CERT_FILE``, hostname checked) for every
        connection: loading the CA certificates is the slow part of making one."""
        with self._lock:
            if self._context is None:
                self._context = ssl.create_default_context()
            return self._context

    def put(self, key: _HostKey, conn: http.client.HTTPConnection) -> None:
        """Keep ``conn`` for the next request to ``key`` (or close it when enough are idle)."""
        with self._lock:
            idle = self._idle.get(key)
            if idle is None:
                idle = []
                self._idle.put(key, idle)
            if len(idle) < MAX_IDLE_PER_HOST:
                idle.append(conn)
                return
        conn.close()

    def clear(self) -> None:
        """Close every idle connection."""
        self._idle.clear()


_POOL = _ConnectionPool()
_EXECUTOR: ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(MAX_THREADS, thread_name_prefix="guideloom-http")
        return _EXECUTOR


def _after_fork() -> None:  # a forked child must not share sockets or threads with its parent
    global _POOL, _EXECUTOR, _EXECUTOR_LOCK
    _POOL = _ConnectionPool()
    _EXECUTOR = None
    _EXECUTOR_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


def close_connections() -> None:
    """Close the idle connections of this process (they reopen on the next read)."""
    _POOL.clear()


def run_concurrently(fn: Callable[[T], Any], items: Sequence[T], width: int) -> list[Any]:
    """``[fn(x) for x in items]`` on at most ``width`` threads (the caller's among them); the
    first exception stops the rest and is raised."""
    if width <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    results: list[Any] = [None] * len(items)
    lock = threading.Lock()
    todo = iter(range(len(items)))
    failed: list[BaseException] = []

    def lane() -> None:
        while not failed:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            try:
                results[i] = fn(items[i])
            except BaseException as exc:
                failed.append(exc)
                return

    pool = _executor()
    lanes = [pool.submit(lane) for _ in range(min(width, len(items)) - 1)]
    lane()
    for f in lanes:
        f.result()
    if failed:
        raise failed[0]
    return results


def _host_key(url: str) -> tuple[_HostKey, str]:
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORT or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    key = (scheme, parts.hostname.lower(), parts.port or _DEFAULT_PORT[scheme])
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return key, target


def _show(url: str) -> str:
    """``url`` without its query string (a signed redirect target carries secrets there)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def _byte_span(offset: int | None, size: int) -> str:
    """The range for messages; ``offset`` None is the file's last ``size`` bytes."""
    if offset is None:
        return f"the last {size} bytes"
    return f"bytes {offset}-{offset + size - 1} ({size} bytes)"


def _range_header(offset: int | None, size: int) -> str:
    return f"bytes=-{size}" if offset is None else f"bytes={offset}-{offset + size - 1}"


class HttpRangeSource(SourceDefaults):
    """One file on an HTTP(S) server, read by ``Range`` requests (a :class:`ByteSource`).

    Args:
        url: The file's URL (redirects are followed and the final one remembered).
        token: A Dataverse API token, sent as ``X-Dataverse-key`` to the host of ``url`` only.
        settings: Timeout per connect or read, retries, backoff, and how many ranges are fetched
            at once (``connections``); ``settings.token`` is used when ``token`` is not given.
        size: The file's size when already known (a Dataverse file list gives it); otherwise
            the first ``Content-Range`` total gives it.

    Attributes:
        requests: GET requests sent (redirect hops and retries included).
        bytes_received: Body bytes of the ranges received.
    """

    high_latency = True

    def __init__(self, url: str, *, token: str | None = None, settings: Settings | None = None,
                 size: int | None = None):
        _host_key(url)  # a ValueError now rather than at the first read
        self._url = url
        self._settings = settings or Settings()
        self._token = token if token is not None else self._settings.token
        self._origin = _host_key(url)[0]
        self._lock = threading.Lock()
        self._resolved: str | None = None
        self._size = size
        self.requests = 0
        self.bytes_received = 0

    @property
    def name(self) -> str:
        return self._url

    @property
    def resolved_url(self) -> str:
        """Where the bytes come from: the URL after redirects (the URL itself before a read)."""
        return self._resolved or self._url

    def __repr__(self) -> str:
        return f"HttpRangeSource({self._url!r})"

    def __reduce__(self) -> tuple[Any, ...]:  # a Dask task may carry a source: the copy
        # opens its own connections
        return (_rebuild, (self._url, self._token, self._settings, self._size))

    def size(self) -> int:
        if self._size is None:
            try:
                self._fetch((0, 1), None, probe=True)  # the Content-Range total tells it
            except RemoteReadError:
                if self._size is None:  # an empty file answers 416 with its size
                    raise
        assert self._size is not None
        return self._size

    def read(self, offset: int, size: int, *, sim_id: object = None) -> bytes:
        """Exactly ``size`` bytes from ``offset``.

        Raises:
            RemoteReadError: After the retries, or at once for a permanent answer; names the
                URL, the bytes and ``sim_id`` when given.
        """
        return self.read_ranges([(offset, size)], sim_id=sim_id)[0]

    def read_tail(self, size: int, *, sim_id: object = None) -> bytes:
        """The file's last ``size`` bytes (all of it when smaller), in one request that also
        tells the size when it is not known yet (a zip's end records; no ``size()`` first)."""
        if size <= 0:
            return b""
        if self._size is not None:
            n = min(size, self._size)
            return self.read(self._size - n, n, sim_id=sim_id)
        return self._fetch((None, size), sim_id)

    def read_ranges(self, ranges: Sequence[tuple[int, int]], *, sim_id: object = None
                    ) -> list[bytes]:
        """The bytes of each ``(offset, size)`` range, in the order given: neighbouring ranges
        are merged (:func:`coalesce_ranges`) and the merged ones fetched concurrently."""
        if not ranges:
            return []
        for offset, size in ranges:
            if offset < 0 or size < 0:
                raise ValueError(f"{self._url}: bad range (offset {offset}, size {size})")
        wanted = [(o, s) for o, s in ranges if s > 0]
        known = self._size
        beyond = [(o, s) for o, s in wanted if known is not None and o + s > known]
        if beyond:
            o, s = beyond[0]
            who = f" for experiment {sim_id}" if sim_id is not None else ""
            raise RemoteReadError(f"cannot read {_byte_span(o, s)} of {self._url}{who}: past "
                                  f"the end of the file ({known} bytes)", url=self._url,
                                  ranges=beyond, sim_id=sim_id)
        merged = coalesce_ranges(wanted)
        blobs = run_concurrently(lambda r: self._fetch(r, sim_id), merged,
                                 self._settings.connections)
        pieces = iter(split_coalesced(wanted, merged, blobs))
        return [next(pieces) if s > 0 else b"" for _, s in ranges]

    read_many = read_ranges

    def close(self) -> None:
        """Nothing: the source and its connections are shared by the process."""

    # -- one range, with retries ---------------------------------------------------------------

    def _fetch(self, span: tuple[int | None, int], sim_id: object, probe: bool = False
               ) -> bytes:
        offset, size = span
        who = f" for experiment {sim_id}" if sim_id is not None else ""

        def give_up(reason: str, attempts: int) -> Exception:
            return RemoteReadError(
                f"cannot read {_byte_span(offset, size)} of {self._url}{who}: failed after "
                f"{attempts} attempts (last: {reason}); check that the server is reachable and "
                "try again, or download the release (guideloom download) and read it locally",
                url=self._url, ranges=[span], sim_id=sim_id)

        def permanent(reason: str, cls: type[RemoteReadError] = RemoteReadError
                      ) -> RemoteReadError:
            return cls(f"cannot read {_byte_span(offset, size)} of {self._url}{who}: {reason}",
                       url=self._url, ranges=[span], sim_id=sim_id)

        def attempt() -> bytes:
            try:
                return self._attempt(offset, size, permanent, probe)
            except RangeIgnoredError:  # one such answer may come from a cache filling itself
                pass
            try:
                return self._attempt(offset, size, permanent, probe)
            except RangeIgnoredError as exc:  # no retry will change a server's abilities
                raise permanent(
                    f"{exc}, twice in a row; remote reads need a server that answers HTTP "
                    "Range requests (206 Partial Content with Content-Range), as Dataverse "
                    "and static file servers do: download the release (guideloom download) "
                    "and read it locally, or serve it with Range support") from None

        data: bytes = with_retries(attempt, self._url, _byte_span(offset, size), self._settings,
                                   give_up=give_up)
        return data

    def _attempt(self, offset: int | None, size: int,
                 permanent: Callable[..., RemoteReadError], probe: bool = False) -> bytes:
        remembered = self._resolved
        url = remembered or self._url
        for _hop in range(MAX_REDIRECTS + 1):
            status, headers, body = self._exchange(url, offset, size, permanent)
            if status in REDIRECT_STATUS:
                location = headers.get("Location")
                if not location:
                    raise permanent(f"{_show(url)} answered HTTP {status} without a Location")
                url = urllib.parse.urljoin(url, location)
                if urllib.parse.urlsplit(url).scheme.lower() not in _DEFAULT_PORT:
                    raise permanent(f"redirected to {_show(url)}, which is not http(s)")
                remembered = None
                continue
            if status in EXPIRED_STATUS and remembered is not None:
                with self._lock:
                    if self._resolved == remembered:
                        self._resolved = None
                raise TransientDownloadError(
                    f"the redirect target {_show(url)} answered HTTP {status} (expired); "
                    "asking the URL again", wait=0.0)
            if body is None and status == 200 and offset is None and self._size is not None:
                n = min(size, self._size)  # no suffix ranges here: ask for the bytes by offset
                return self._attempt(self._size - n, n, permanent)
            if body is None and status == 200 and probe and self._size is not None:
                return b""  # size(): known from Content-Length; reads will say Range is ignored
            if body is None:
                raise self._status_error(status, headers, url, permanent)
            with self._lock:
                self._resolved = url if url != self._url else None
                self.bytes_received += len(body)
            return body
        raise permanent(f"more than {MAX_REDIRECTS} redirects")

    def _status_error(self, status: int, headers: http.client.HTTPMessage, url: str,
                      permanent: Callable[..., RemoteReadError]) -> Exception:
        where = f"{_show(url)} answered HTTP {status}"
        if status in RETRY_STATUS:
            return TransientDownloadError(where, retry_after(headers))
        hint = ""
        if status in (401, 403):
            hint = ("; a draft or restricted file needs the Dataverse API token "
                    "(open_byte_source(url, token=...)); it is sent to this URL's host only")
        elif status == 404:
            hint = "; check the URL"
        elif status == 416:
            hint = f"; the file has {self._size} bytes" if self._size is not None else ""
        return permanent(where + hint)

    def _exchange(self, url: str, offset: int | None, size: int,
                  permanent: Callable[..., RemoteReadError]
                  ) -> tuple[int, http.client.HTTPMessage, bytes | None]:
        """One GET of ``url`` for the range; the body only for a valid 206 (or 200 that holds
        exactly the range), else ``None``. Raises a transient error for a bad answer."""
        key, target = _host_key(url)
        headers = {"Range": _range_header(offset, size), "User-Agent": USER_AGENT,
                   "Accept-Encoding": "identity"}
        if self._token and key == self._origin:
            headers[TOKEN_HEADER] = self._token
        timeout = self._settings.timeout
        for fresh_try in (False, True):
            conn, reused = _POOL.get(key, timeout)
            with self._lock:
                self.requests += 1
            dog, watch = watchdog(), None
            try:
                if conn.sock is None:
                    conn.connect()  # each step within the socket timeout
                # the answer (status line, headers) within the timeout in all (http_deadline)
                watch = dog.watch(conn.sock, time.monotonic() + timeout)
                conn.request("GET", target, headers=headers)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                if dog.done(watch):
                    raise TransientDownloadError(f"{_show(url)}: {answer_late(timeout)}"
                                                 ) from None
                if reused and not fresh_try and isinstance(exc, _IDLE_CLOSED):
                    continue  # the server closed an idle keep-alive connection
                if isinstance(exc, ssl.SSLCertVerificationError):
                    raise self._untrusted(key, exc, permanent) from None
                raise
            except BaseException:
                dog.done(watch)
                conn.close()
                raise
            break
        if dog.done(watch):  # cut while the headers came: what was parsed is not the answer
            conn.close()
            raise TransientDownloadError(f"{_show(url)}: {answer_late(timeout)}")
        try:
            body = self._body(resp, url, offset, size, permanent, conn.sock)
        except BaseException:
            conn.close()
            raise
        if resp.isclosed() and not resp.will_close:  # the whole answer was read: reusable
            _POOL.put(key, conn)
        else:
            conn.close()
        return resp.status, resp.headers, body

    @staticmethod
    def _untrusted(key: _HostKey, exc: ssl.SSLCertVerificationError,
                   permanent: Callable[..., RemoteReadError]) -> RemoteReadError:
        """Retrying cannot make a certificate trusted: a permanent error."""
        return permanent(
            f"the TLS certificate of {key[1]}:{key[2]} is not trusted "
            f"({exc.verify_message or exc}); if the server is right, point SSL_CERT_FILE "
            "at the CA certificate that signs it")

    def _body(self, resp: http.client.HTTPResponse, url: str, offset: int | None, size: int,
              permanent: Callable[..., RemoteReadError], sock: socket.socket | None = None
              ) -> bytes | None:
        status = resp.status
        asked = _range_header(offset, size)
        if status == 206:
            value = resp.headers.get("Content-Range") or ""
            m = _CONTENT_RANGE.match(value.strip())
            if m and offset is None and m[3] != "*":  # a suffix: the last bytes of the total
                first, last = max(0, int(m[3]) - size), int(m[3]) - 1
            else:
                first, last = (-1, -1) if offset is None else (offset, offset + size - 1)
            if (m and offset is not None and m[3] != "*" and int(m[1]) == offset
                    and int(m[2]) == int(m[3]) - 1 < last):
                self._note_size(int(m[3]), url)
                raise permanent(f"past the end of the file ({m[3]} bytes)")
            if not m or int(m[1]) != first or int(m[2]) != last:
                raise TransientDownloadError(
                    f"{_show(url)} answered 206 with Content-Range {value!r} to Range {asked}")
            if m[3] != "*":
                self._note_size(int(m[3]), url)
            n = last - first + 1
            length = resp.getheader("Content-Length")
            if length is not None and length.isdigit() and int(length) != n:
                raise TransientDownloadError(
                    f"{_show(url)} answered 206 with Content-Length {length} for {n} bytes")
            return self._read_body(resp, url, n, sock)
        if status == 200:
            length = resp.getheader("Content-Length")
            total = int(length) if length is not None and length.isdigit() else None
            if total is not None and offset == 0 and size == 1:
                self._note_size(total, url)  # size(): known, though the server ignores Range
                if total != 1:
                    return None
            whole = total is not None and (total <= size if offset is None else
                                           offset == 0 and total == size)
            if whole:  # the range asked was the whole file
                assert total is not None
                self._note_size(total, url)
                return self._read_body(resp, url, total, sock)
            if offset is None and total is not None:
                self._note_size(total, url)
                return None  # the caller asks again by offset; the body is not read
            raise RangeIgnoredError(
                f"{_show(url)} answered 200 with the whole file to Range {asked} (the server "
                "ignores Range requests)")
        if status == 416:
            m = re.fullmatch(r"bytes\s+\*/(\d+)", (resp.headers.get("Content-Range") or "").strip())
            if m:
                self._note_size(int(m[1]), url)
        if status in REDIRECT_STATUS or status in RETRY_STATUS or status >= 400:
            if not resp.will_close and resp.length is not None and resp.length <= 1 << 16:
                resp.read()  # a short error page: drain it so the connection can be reused
            return None
        raise TransientDownloadError(f"{_show(url)} answered HTTP {status} {resp.reason} "
                                     "to a Range request")

    def _read_body(self, resp: http.client.HTTPResponse, url: str, size: int,
                   sock: socket.socket | None = None) -> bytes:
        """Exactly ``size`` body bytes: at most one more is read (a body without a length
        cannot run forever), and a body slower than :func:`~guideloom.net.deadline.body_budget`
        allows is a timeout (a server trickling one byte per timeout cannot stall it: the
        :func:`~guideloom.net.deadline.watchdog` shuts the socket down at the deadline)."""
        budget = body_budget(self._settings.timeout, size)
        dog = watchdog()
        watch = dog.watch(sock, time.monotonic() + budget)
        try:
            body = resp.read(size + 1)
        except http.client.IncompleteRead as exc:
            if dog.done(watch):
                raise self._too_slow(url, len(exc.partial), size, budget) from None
            raise TransientDownloadError(
                f"{_show(url)}: body ended after {len(exc.partial)} of {size} bytes "
                "(connection closed)") from None
        except OSError:
            if dog.done(watch):
                raise self._too_slow(url, 0, size, budget) from None
            raise
        if dog.done(watch) and len(body) != size:  # a body without length, cut short
            raise self._too_slow(url, len(body), size, budget)
        if len(body) > size:
            raise TransientDownloadError(
                f"{_show(url)}: body has more than the {size} bytes asked for")
        if len(body) != size:
            raise TransientDownloadError(
                f"{_show(url)}: body ended after {len(body)} of {size} bytes (connection "
                "closed)")
        return body

    @staticmethod
    def _too_slow(url: str, got: int, size: int, budget: float) -> TransientDownloadError:
        return TransientDownloadError(f"{_show(url)}: {body_late(got, size, budget)}")

    def _note_size(self, total: int, url: str) -> None:
        with self._lock:
            known = self._size
            if known is None:
                self._size = total
        if known is not None and known != total:
            raise RemoteChangedError(
                f"{self._url} now has {total} bytes, {known} before (from {_show(url)}); the file "
                "changed on the server while it was read: start the read again",
                url=self._url)


_SOURCES: BoundedCache[tuple[Any, ...], HttpRangeSource] = cache("http_sources")


TIMEOUT_ENV = "GUIDELOOM_HTTP_TIMEOUT"  # seconds per connect or read of a remote read
RETRIES_ENV = "GUIDELOOM_HTTP_RETRIES"  # retries after the first attempt


def env_settings() -> Settings:
    """The default :class:`Settings` of remote reads, with the configured ``http_timeout`` and
    ``http_retries`` (``$GUIDELOOM_HTTP_TIMEOUT``, ``$GUIDELOOM_HTTP_RETRIES``) when set."""
    from guideloom import config

    changes: dict[str, Any] = {}
    for key, field in (("http_timeout", "timeout"), ("http_retries", "retries")):
        value = config.get(key)
        if value is not None:
            changes[field] = value
    return Settings(**changes)


def http_source(url: str, *, token: str | None = None, settings: Settings | None = None,
                size: int | None = None) -> HttpRangeSource:
    """The process's :class:`HttpRangeSource` for ``url`` (made on first use), so a Dask worker
    asking again reuses what the source learnt (size, redirect target) and its connections.
    Without ``settings``: :func:`env_settings`."""
    settings = settings or env_settings()
    token = token if token is not None else settings.token
    key = (url, token, settings)
    src = _SOURCES.get_or_create(
        key, lambda: HttpRangeSource(url, token=token, settings=settings, size=size))
    if size is not None and src._size is None:
        src._size = size
    return src


def clear_http_sources() -> None:
    """Forget the sources :func:`http_source` keeps."""
    _SOURCES.clear()


def _rebuild(url: str, token: str | None, settings: Settings, size: int | None
             ) -> HttpRangeSource:
    return http_source(url, token=token, settings=settings, size=size)
