"""One byte source per remote file and process, and fetching small files whole.

Dask workers receive locations (URLs and offsets), never open connections: each process opens
its own source per URL on first use (:func:`source_of`) and reuses it, with its connection pool.
"""

from __future__ import annotations

from guideloom.remote.byte_source import ByteSource, FsspecSource, open_byte_source
from guideloom.remote.root import TOKEN_HEADER, RemotePath, RemoteRoot


def source_of(url: str, size: int | None = None,
              headers: tuple[tuple[str, str], ...] = ()) -> ByteSource:
    """This process's byte source of ``url`` (opened on first use, then reused: see
    :func:`~guideloom.remote.open_byte_source`); the token among ``headers`` goes to the
    Dataverse server only (:class:`~guideloom.remote.http.HttpRangeSource`)."""
    token = dict(headers).get(TOKEN_HEADER)
    src = open_byte_source(url, token=token, size=size) if token else \
        open_byte_source(url, size=size) if url.lower().startswith(("http://", "https://")) \
        else open_byte_source(url)
    if size and isinstance(src, FsspecSource) and src._size is None:  # noqa: SLF001
        src._size = size  # noqa: SLF001 - known from the listing: no metadata request
    return src


def http_validator(url: str, timeout: float = 60.0) -> tuple[int, str]:
    """The size of the file at ``url`` and its ETag or Last-Modified ('' when none), from one
    ``HEAD`` request (an archive replaced on the server is noticed by these)."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "guideloom-remote"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - http(s) only
            headers = resp.headers
    except urllib.error.HTTPError as exc:
        raise FileNotFoundError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    length = headers.get("Content-Length")
    if length is None:
        raise OSError(f"{url}: the server gives no size (Content-Length)")
    return int(length), headers.get("ETag") or headers.get("Last-Modified") or ""


MAX_WHOLE = 256 << 20  # bytes of a file fetched whole (a manifest, an index table)


def fetch_bytes(root: RemoteRoot, relpath: str, what: str) -> tuple[bytes, RemotePath]:
    """The whole file ``relpath`` of ``root`` and its :class:`RemotePath`.

    Raises:
        FileNotFoundError: The root has no such file or it cannot be read (naming its URL and
            ``what``).
    """
    entry = root.entry(relpath)
    if entry is None:
        raise FileNotFoundError(f"{what} {relpath!r} is not in {root}")
    try:
        src = source_of(entry.url, entry.size, root.headers)
        size = src.size()
        data = src.read(0, size) if size <= MAX_WHOLE else None
    except (OSError, ValueError) as exc:
        raise FileNotFoundError(f"{what} not found or not readable: {entry.url} ({exc})") \
            from exc
    if data is None:
        raise FileNotFoundError(f"{what} {entry.url} has {size} bytes, more than the "
                                f"{MAX_WHOLE >> 20} MiB a manifest or index table may have; "
                                "check the URL")
    return data, RemotePath(entry.url)
