"""Helpers the remote-reading tests share: records of a view, and their exact comparison."""

from __future__ import annotations

import uuid
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from guideloom.streaming import iter_view


def records(view: str, **kw) -> list[dict]:
    """Every record of ``view`` (skip warnings silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(iter_view(view, **kw))


def assert_same(remote: list[dict], local: list[dict]) -> None:
    """The same ids in the same order, the same fields, equal values and dtypes."""
    assert [r["_sim_id"] for r in remote] == [r["_sim_id"] for r in local]
    assert local
    for a, b in zip(remote, local, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]), strict=True)


def s3_options(server: Any, secret: str | None = None) -> dict[str, Any]:
    """The storage options reaching the private S3 server (``secret``: another secret)."""
    from tests.remote_servers import S3_KEY, S3_SECRET

    return {"key": S3_KEY, "secret": S3_SECRET if secret is None else secret,
            "client_kwargs": {"endpoint_url": server.url, "region_name": "us-east-1"}}


def upload(server: Any, root: Path, bucket: str = "guideloom-private") -> str:
    """Every file under ``root`` copied to a fresh prefix of the private S3 server; its URL."""
    import s3fs

    fs = s3fs.S3FileSystem(**s3_options(server), skip_instance_cache=True)
    if not fs.exists(bucket):
        fs.mkdir(bucket)
    prefix = f"{bucket}/{uuid.uuid4().hex[:8]}/release"
    for path in sorted(root.rglob("*")):
        if path.is_file():
            fs.pipe(f"{prefix}/{path.relative_to(root).as_posix()}", path.read_bytes())
    return f"s3://{prefix}"
