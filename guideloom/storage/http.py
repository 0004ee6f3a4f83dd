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

A missing file, a server error or a refused connection raises an ``OSError`` (a
``FileNotFoundError`` for 404) whose message names the URL. Remote storages are read-only.
"""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

from guideloom.storage.types import FileReader, ReadInterface

__all__ = ["HTTPIO"]

_SHARD = re.compile(r"shard-\d+\.gls$")


def _remote_error(url: str, error: BaseException) -> OSError:
    """Return an ``OSError`` naming ``url`` for whatever fsspec/aiohttp raised."""
    if isinstance(error, FileNotFoundError):
        return FileNotFoundError(f"{url}: not found on the server (HTTP 404)")
    status = getattr(error, "status", None)
    what = f"HTTP {status}" if status else f"{type(error).__name__}: {error}"
    return OSError(f"{url}: remote read failed ({what})")


class _Span:
    """Bytes ``[start, start + len(data))`` of a file kept for later reads."""

    __slots__ = ("data", "start")

    def __init__(self, start: int, data: bytes) -> None:
        self.start = start
        self.data = data

    def covers(self, offset: int, nbytes: int) -> bool:
        return self.start <= offset and offset + nbytes <= self.start + len(self.data)


_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)$")


async def _fetch_tail(fs: Any, url: str, tail: int) -> tuple[int, int, bytes]:
    """GET the last ``tail`` bytes (a suffix range); return ``(size, start, data)``."""
    session = await fs.set_session()
    headers = {"Range": f"bytes=-{max(tail, 1)}"}
    async with session.get(url, headers=headers, **getattr(fs, "kwargs", {})) as response:
        if response.status == 404:
            raise FileNotFoundError(url)
        response.raise_for_status()
        match = _CONTENT_RANGE.match(response.headers.get("Content-Range", "").strip())
        if response.status != 206 or match is None:
            raise OSError(
                f"{url}: the server answered a Range request with HTTP {response.status} and no "
                "Content-Range; it must honour HTTP Range requests"
            )
        data = await response.read()
    start, end, size = (int(g) for g in match.groups())
    if len(data) != end - start + 1:
        raise OSError(f"{url}: got {len(data)} bytes for the range {start}-{end}")
    return size, start, data


class _HTTPFile(FileReader):
    """One remote shard: size and tail from one suffix-range request, per-thread read-ahead."""

    def __init__(self, fs: Any, url: str, readahead: int, tail: int) -> None:
        from fsspec.asyn import sync

        self._fs = fs
        self._url = url
        self._readahead = readahead
        self._local = threading.local()
        try:
            self._size, start, data = sync(fs.loop, _fetch_tail, fs, url, tail)
        except OSError as error:
            if str(url) in str(error) and not isinstance(error, FileNotFoundError):
                raise
            raise _remote_error(url, error) from error
        except Exception as error:  # noqa: BLE001 - re-raised naming the URL
            raise _remote_error(url, error) from error
        self._tail = _Span(start, data)

    def _fetch(self, offset: int, nbytes: int) -> bytes:
        if nbytes == 0:
            return b""
        try:
            data = self._fs.cat_file(self._url, start=offset, end=offset + nbytes)
        except Exception as error:  # noqa: BLE001 - re-raised naming the URL
            raise _remote_error(self._url, error) from error
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
        coroutine = self._fs._cat_file(self._url, start=offset, end=offset + nbytes)
        future = asyncio.run_coroutine_threadsafe(coroutine, self._fs.loop)
        try:
            data = await asyncio.wrap_future(future)
        except Exception as error:  # noqa: BLE001 - re-raised naming the URL
            raise _remote_error(self._url, error) from error
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
        client_kwargs: Passed to ``aiohttp.ClientSession`` (for example ``{"headers": ...}``
            or ``{"timeout": aiohttp.ClientTimeout(total=60)}``).
    """

    def __init__(
        self,
        readahead: int = 4 << 20,
        tail: int = 64 << 10,
        num_shards: int | None = None,
        client_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if readahead < 0 or tail < 0:
            raise ValueError("readahead and tail must be >= 0")
        self.readahead = int(readahead)
        self.tail = int(tail)
        self.num_shards = num_shards
        self.client_kwargs = dict(client_kwargs or {})

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
        import fsspec

        # fsspec caches instances per arguments: one session (connection pool) per process.
        return fsspec.filesystem("http", client_kwargs=self.client_kwargs)

    def open(self, path: Any) -> FileReader:
        """Open the shard at URL ``path``."""
        return _HTTPFile(self._fs(), str(path), self.readahead, self.tail)

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
        fs = self._fs()
        base = str(directory).rstrip("/")
        names: list[str] = []
        try:
            listed = fs.ls(base + "/", detail=False)
        except Exception:  # noqa: BLE001 - no usable index page: probe instead
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
                fs.size(url)
            except FileNotFoundError:
                break
            except Exception as error:  # noqa: BLE001 - re-raised naming the URL
                raise _remote_error(url, error) from error
            names.append(f"shard-{number:06d}.gls")
            number += 1
        if not names:
            raise FileNotFoundError(
                f"{base}: no shards found (no index page listing shard-NNNNNN.gls, and "
                f"{self.join(base, 'shard-000000.gls')} does not exist)"
            )
        return names

    def __repr__(self) -> str:
        return f"HTTPIO(readahead={self.readahead}, tail={self.tail}, num_shards={self.num_shards})"
