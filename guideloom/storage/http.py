"""Read GuideLoom shards from an HTTP(S) server with range requests.

:class:`HTTPIO` is a read interface for storages whose directory is a URL::

    storage = StreamStorage("https://data.example.org/tokens", fmt, read_interface=HTTPIO())

It uses fsspec's HTTP filesystem (``pip install "guideloom[http]"`` for aiohttp):

* **Range requests.** Every read is a ``GET`` with a ``Range`` header; a reply of the wrong
  length (a server that ignores ``Range``) is an error, never silently wrong data.
* **Connection reuse.** One aiohttp session (keep-alive connection pool) per process serves
  every shard and thread.
* **Read-ahead.** When a thread's reads of a shard are sequential (a read starts where its
  previous one ended), a read that misses fetches ``readahead`` bytes, so consecutive windows
  cost one request per ``readahead`` bytes; random reads fetch exactly what they need. Opening a
  shard is one suffix-range request that returns its size and its tail (footer and indexes).
* **Shard discovery.** The directory's HTML index (what ``python -m http.server``, nginx
  ``autoindex`` or Apache serve) lists the shards; without one, ``shard-000000.gls``,
  ``shard-000001.gls``... are probed until the first missing number. Pass ``num_shards`` to
  require an exact count instead: then a missing shard is an error naming its URL.

* **Bounded answers.** No response body is read past what was asked: a reply that announces
  (``Content-Length``) or sends more bytes than the range requested is refused after at most
  one byte too many, naming the URL and both sizes; an index page is read up to 16 MiB.
* **Finite waits.** Connecting and each read from the socket give up after ``timeout`` seconds
  (30 by default) with a ``TimeoutError`` naming the URL, instead of aiohttp's 300 s total; and
  as every HTTP request of guideloom (:mod:`guideloom.net.deadline`), the answer's status line
  and headers must come within ``timeout`` in all, a range's body within
  :func:`~guideloom.net.deadline.body_budget`, an index page's body at a minimum rate: a
  server trickling a byte per second cannot hold a read.

A missing file, a server error or a refused connection raises an ``OSError`` (a
``FileNotFoundError`` for 404) whose message names the URL. Remote storages are read-only.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import Iterator
from typing import Any

from guideloom.errors import DeadlineError, TooSlowError, TransientDownloadError
from guideloom.net.deadline import (
    BODY_MIN_RATE,
    Pace,
    answer_late,
    body_budget,
    body_late,
    within,
)
from guideloom.storage.types import FileReader, ReadInterface

__all__ = ["HTTPIO"]

_SHARD = re.compile(r"shard-\d+\.gls$")
_HREF = re.compile(r"""href\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)
DEFAULT_TIMEOUT_S = 30.0
INDEX_LIMIT = 16 << 20  # bytes of a directory's index page read at most
_CHUNK = 1 << 20


def _remote_error(url: str, error: BaseException, timeout: float | None = None) -> OSError:
    """Return an ``OSError`` naming ``url`` for whatever fsspec/aiohttp raised."""
    if isinstance(error, FileNotFoundError):
        return FileNotFoundError(f"{url}: not found on the server (HTTP 404)")
    if isinstance(error, TimeoutError):
        within = f" within {timeout:g} s" if timeout else ""
        return TimeoutError(
            f"{url}: the server did not answer{within} ({type(error).__name__}); "
            "raise HTTPIO(timeout=...) for a slow server"
        )
    status = getattr(error, "status", None)
    what = f"HTTP {status}" if status else f"{type(error).__name__}: {error}"
    return OSError(f"{url}: remote read failed ({what})")


@contextlib.contextmanager
def _naming(url: str, timeout: float | None) -> Iterator[None]:
    """Re-raise what the block raises as an ``OSError`` naming ``url`` (one that already names
    it passes unchanged); the sync reads and the awaited reads share it."""
    try:
        yield
    except TooSlowError as error:
        raise TimeoutError(str(error)) from None
    except OSError as error:
        if url in str(error) and not isinstance(error, FileNotFoundError):
            raise
        raise _remote_error(url, error, timeout) from error
    except Exception as error:
        raise _remote_error(url, error, timeout) from error


class _Span:
    """Bytes ``[start, start + len(data))`` of a file kept for later reads."""

    __slots__ = ("data", "start")

    def __init__(self, start: int, data: bytes) -> None:
        self.start = start
        self.data = data

    def covers(self, offset: int, nbytes: int) -> bool:
        return self.start <= offset and offset + nbytes <= self.start + len(self.data)


_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)$")


async def _read_at_most(response: Any, limit: int, url: str, asked: str,
                        timeout: float, exact: bool = True) -> bytes:
    """The body of ``response``, refused once it exceeds ``limit`` bytes (``asked`` says what
    was requested, for the message); never buffers more than ``limit + 1`` bytes. A range's
    body (``exact``) must come within :func:`~guideloom.net.deadline.body_budget`, another
    keep up :data:`~guideloom.net.deadline.BODY_MIN_RATE` over each ``timeout`` seconds."""
    if not exact:
        return await _read_body(response, limit, url, asked, Pace(timeout, BODY_MIN_RATE))
    budget = body_budget(timeout, limit)
    try:
        return await within(_read_body(response, limit, url, asked, None), budget)
    except DeadlineError:
        raise TooSlowError(f"{url}: {asked}: {body_late(None, limit, budget)}") from None


async def _read_body(response: Any, limit: int, url: str, asked: str, pace: Pace | None
                     ) -> bytes:
    declared = response.content_length
    if declared is not None and declared > limit:
        raise OSError(
            f"{url}: asked for {asked} ({limit} bytes) and the server announced a body of "
            f"{declared} bytes; refused unread (the server must honour HTTP Range requests)"
        )
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = await response.content.read(min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if pace is not None:
            try:
                pace.add(len(chunk))
            except TransientDownloadError as error:
                raise TooSlowError(f"{url}: {asked}: {error}") from None
        if total > limit:
            raise OSError(
                f"{url}: asked for {asked} ({limit} bytes) and the server sent more; refused "
                "after one byte too many (the server must honour HTTP Range requests)"
            )
        chunks.append(chunk)


async def _answer(fs: Any, url: str, timeout: float, headers: dict[str, str] | None = None,
                  method: str = "GET") -> Any:
    """The response of one request to ``url``: its status line and headers within ``timeout``
    seconds in all (:mod:`guideloom.net.deadline`)."""
    session = await fs.set_session()
    kwargs = dict(getattr(fs, "kwargs", {}))
    merged = {**kwargs.pop("headers", {}), **(headers or {})}
    try:
        return await within(session.request(method, url, headers=merged, **kwargs), timeout)
    except DeadlineError:
        raise TooSlowError(f"{url}: {answer_late(timeout)}") from None


async def _get(fs: Any, url: str, limit: int, asked: str,
               span: tuple[int, int] | None = None, timeout: float = DEFAULT_TIMEOUT_S
               ) -> bytes:
    """GET ``url`` (bytes ``span = (first, last)`` when given) reading at most ``limit`` body
    bytes; a ranged answer must be exactly that span."""
    headers = {}
    if span is not None:
        headers["Range"] = f"bytes={span[0]}-{span[1]}"
    async with await _answer(fs, url, timeout, headers) as response:
        if response.status == 404:
            raise FileNotFoundError(url)
        response.raise_for_status()
        if span is not None:
            match = _CONTENT_RANGE.match(response.headers.get("Content-Range", "").strip())
            whole = response.status == 200 and span[0] == 0  # the file is exactly the span
            if response.status == 206 and match is not None:
                got = (int(match.group(1)), int(match.group(2)))
                if got != span:
                    raise OSError(f"{url}: asked for {asked} and the server answered bytes "
                                  f"{got[0]}-{got[1]}; refused unread")
            elif not whole:
                raise OSError(
                    f"{url}: the server answered a Range request with HTTP {response.status} "
                    "and no Content-Range; it must honour HTTP Range requests"
                )
        return await _read_at_most(response, limit, url, asked, timeout, span is not None)


async def _fetch_tail(fs: Any, url: str, tail: int, timeout: float = DEFAULT_TIMEOUT_S
                      ) -> tuple[int, int, bytes]:
    """GET the last ``tail`` bytes (a suffix range); return ``(size, start, data)``."""
    want = max(tail, 1)
    async with await _answer(fs, url, timeout, {"Range": f"bytes=-{want}"}) as response:
        if response.status == 404:
            raise FileNotFoundError(url)
        response.raise_for_status()
        match = _CONTENT_RANGE.match(response.headers.get("Content-Range", "").strip())
        if response.status != 206 or match is None:
            raise OSError(
                f"{url}: the server answered a Range request with HTTP {response.status} and no "
                "Content-Range; it must honour HTTP Range requests"
            )
        start, end, size = (int(g) for g in match.groups())
        if end - start + 1 > want or end >= size:
            raise OSError(
                f"{url}: asked for the last {want} bytes and the server answered the range "
                f"{start}-{end} of {size}; refused unread"
            )
        data = await _read_at_most(response, end - start + 1, url, f"the last {want} bytes",
                                   timeout)
    if len(data) != end - start + 1:
        raise OSError(f"{url}: got {len(data)} bytes for the range {start}-{end}")
    return size, start, data


async def _fetch_range(fs: Any, url: str, offset: int, nbytes: int,
                       timeout: float = DEFAULT_TIMEOUT_S) -> bytes:
    """GET bytes ``[offset, offset + nbytes)`` reading at most ``nbytes`` body bytes."""
    last = offset + nbytes - 1
    return await _get(fs, url, nbytes, f"bytes {offset}-{last}", (offset, last), timeout)


async def _fetch_index(fs: Any, url: str, timeout: float = DEFAULT_TIMEOUT_S) -> list[str]:
    """The link targets of the index page at ``url`` (read up to :data:`INDEX_LIMIT`)."""
    data = await _get(fs, url, INDEX_LIMIT, "the directory's index page", None, timeout)
    return _HREF.findall(data.decode("utf-8", errors="replace"))


async def _exists(fs: Any, url: str, timeout: float) -> bool:
    """Whether ``url`` exists (one ``HEAD``; 404 is False, another error status raises)."""
    async with await _answer(fs, url, timeout, method="HEAD") as response:
        if response.status == 404:
            return False
        response.raise_for_status()
        return True


class _HTTPFile(FileReader):
    """One remote shard: size and tail from one suffix-range request, per-thread read-ahead."""

    def __init__(self, fs: Any, url: str, readahead: int, tail: int,
                 timeout: float | None = None) -> None:
        from fsspec.asyn import sync

        self._fs = fs
        self._url = url
        self._timeout = timeout
        self._readahead = readahead
        self._local = threading.local()
        with _naming(str(url), timeout):
            self._size, start, data = sync(fs.loop, _fetch_tail, fs, url, tail,
                                           timeout or DEFAULT_TIMEOUT_S)
        self._tail = _Span(start, data)

    def _fetch(self, offset: int, nbytes: int) -> bytes:
        if nbytes == 0:
            return b""
        from fsspec.asyn import sync

        with _naming(self._url, self._timeout):
            data = sync(self._fs.loop, _fetch_range, self._fs, self._url, offset, nbytes,
                        self._timeout or DEFAULT_TIMEOUT_S)
        return self._check(offset, nbytes, data)

    def _check(self, offset: int, nbytes: int, data: bytes) -> bytes:
        if len(data) != nbytes:
            raise OSError(
                f"{self._url}: asked for bytes {offset}-{offset + nbytes - 1} and got "
                f"{len(data)} bytes; the server must honour HTTP Range requests"
            )
        return data

    def size(self) -> int:
        return self._size

    def _copy(self, span: _Span, offset: int, view: memoryview) -> None:
        begin = offset - span.start
        view[:] = span.data[begin : begin + len(view)]

    def readinto(self, offset: int, buffer: Any) -> None:
        view = memoryview(buffer).cast("B")
        nbytes = len(view)
        if offset < 0 or offset + nbytes > self._size:
            raise EOFError(
                f"{self._url}: wanted {nbytes} bytes at offset {offset}, the file has {self._size}"
            )
        if self._tail.covers(offset, nbytes):
            self._copy(self._tail, offset, view)
            return
        local = self._local
        span = getattr(local, "span", None)
        if span is None or not span.covers(offset, nbytes):
            sequential = offset == getattr(local, "end", None)
            wanted = max(nbytes, self._readahead) if sequential else nbytes
            span = _Span(offset, self._fetch(offset, min(wanted, self._size - offset)))
            local.span = span
        local.end = offset + nbytes
        self._copy(span, offset, view)

    async def areadinto(self, offset: int, buffer: Any) -> None:
        """Read with one range request on fsspec's event loop, without blocking a thread."""
        view = memoryview(buffer).cast("B")
        nbytes = len(view)
        if offset + nbytes > self._size:
            raise EOFError(
                f"{self._url}: wanted {nbytes} bytes at offset {offset}, the file has {self._size}"
            )
        if self._tail.covers(offset, nbytes):
            self._copy(self._tail, offset, view)
            return
        if nbytes == 0:
            return
        coroutine = _fetch_range(self._fs, self._url, offset, nbytes,
                                 self._timeout or DEFAULT_TIMEOUT_S)
        future = asyncio.run_coroutine_threadsafe(coroutine, self._fs.loop)
        with _naming(self._url, self._timeout):
            data = await asyncio.wrap_future(future)
        view[:] = self._check(offset, nbytes, data)

    def close(self) -> None:
        self._local = threading.local()


class HTTPIO(ReadInterface):
    """Reads shards over HTTP(S) with range requests, keep-alive connections and read-ahead.

    Args:
        readahead: Bytes fetched by a synchronous read that misses the read-ahead buffer
            (at least the bytes asked for). ``0`` fetches exactly what is read.
        tail: Bytes fetched from the end of each shard when it is opened (footer and indexes).
        num_shards: If given, exactly this many shards must exist (no listing or probing);
            a missing one raises ``FileNotFoundError`` naming its URL.
        client_kwargs: Passed to ``aiohttp.ClientSession`` (for example ``{"headers": ...}``);
            a ``"timeout"`` there (an ``aiohttp.ClientTimeout``) replaces ``timeout``.
        timeout: Seconds to wait for a connection and for each read from the socket (a
            server that stops answering raises ``TimeoutError`` naming the URL).
    """

    def __init__(
        self,
        readahead: int = 4 << 20,
        tail: int = 64 << 10,
        num_shards: int | None = None,
        client_kwargs: dict[str, Any] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if readahead < 0 or tail < 0:
            raise ValueError("readahead and tail must be >= 0")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, not {timeout!r}")
        self.readahead = int(readahead)
        self.tail = int(tail)
        self.num_shards = num_shards
        self.client_kwargs = dict(client_kwargs or {})
        self.timeout = float(timeout)

    @classmethod
    def is_supported(cls) -> bool:
        """Return whether aiohttp (needed by fsspec's HTTP filesystem) is installed."""
        try:
            import aiohttp  # noqa: F401
        except ImportError:
            return False
        return True

    def _fs(self) -> Any:
        if not self.is_supported():
            raise OSError('HTTPIO needs aiohttp: pip install "guideloom[http]"')
        import aiohttp
        import fsspec

        kwargs = dict(self.client_kwargs)
        kwargs.setdefault("timeout", aiohttp.ClientTimeout(
            total=None, connect=self.timeout, sock_connect=self.timeout, sock_read=self.timeout))
        # fsspec caches instances per arguments: one session (connection pool) per process.
        return fsspec.filesystem("http", client_kwargs=kwargs)

    def open(self, path: Any) -> FileReader:
        """Open the shard at URL ``path``."""
        return _HTTPFile(self._fs(), str(path), self.readahead, self.tail, self.timeout)

    def join(self, directory: Any, name: str) -> str:
        """Return ``directory/name`` as a URL."""
        return f"{str(directory).rstrip('/')}/{name}"

    def list_names(self, directory: Any) -> list[str]:
        """Return the shard file names under the URL ``directory``.

        Raises:
            FileNotFoundError: No shard is found; the message names the URL tried.
        """
        if self.num_shards is not None:
            return [f"shard-{n:06d}.gls" for n in range(self.num_shards)]
        from fsspec.asyn import sync

        fs = self._fs()
        base = str(directory).rstrip("/")
        names: list[str] = []
        try:
            listed = sync(fs.loop, _fetch_index, fs, base + "/", self.timeout)
        except TooSlowError as error:  # the server is there, too slow: probing would be too
            raise TimeoutError(str(error)) from None
        except OSError as error:
            if isinstance(error, FileNotFoundError) or "index page" not in str(error):
                listed = []  # no usable index page: probe instead
            else:
                raise  # an index page larger than INDEX_LIMIT
        except Exception as error:
            if isinstance(error, TimeoutError):
                raise _remote_error(base + "/", error, self.timeout) from error
            listed = []
        for url in listed:
            name = str(url).rstrip("/").rsplit("/", 1)[-1]
            if _SHARD.fullmatch(name):
                names.append(name)
        if names:
            return names
        number = 0
        while True:
            url = self.join(base, f"shard-{number:06d}.gls")
            try:
                if not sync(fs.loop, _exists, fs, url, self.timeout):
                    break
            except TooSlowError as error:
                raise TimeoutError(str(error)) from None
            except Exception as error:
                raise _remote_error(url, error, self.timeout) from error
            names.append(f"shard-{number:06d}.gls")
            number += 1
        if not names:
            raise FileNotFoundError(
                f"{base}: no shards found (no index page listing shard-NNNNNN.gls, and "
                f"{self.join(base, 'shard-000000.gls')} does not exist)"
            )
        return names

    def __repr__(self) -> str:
        return (f"HTTPIO(readahead={self.readahead}, tail={self.tail}, "
                f"num_shards={self.num_shards}, timeout={self.timeout:g})")
