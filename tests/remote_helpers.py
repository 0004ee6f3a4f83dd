"""Helpers the remote-reading tests share: records of a view, and their exact comparison."""

from __future__ import annotations

import warnings

import numpy as np

from guideloom.streaming import iter_view


def records(view: str, **kw) -> list[dict]:  # noqa: ANN003 - iter_view's keywords
    """Every record of ``view`` (skip warnings silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(iter_view(view, **kw))


def assert_same(remote: list[dict], local: list[dict]) -> None:
    """The same ids in the same order, the same fields, equal values and dtypes."""
    assert [r["_sim_id"] for r in remote] == [r["_sim_id"] for r in local] and local
    for a, b in zip(remote, local, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]), strict=True)
