"""Fingerprints of user code, for the job identity: the same code gives the same digest in every
process, on every machine; an edit anywhere the code reaches gives another, a comment,
docstring or formatting edit does not.

The fingerprint is the digest of a transform's recipe components
(:mod:`guideloom.export.recipe`): the normalised source of the code it reaches in the user's
own modules, installed packages by distribution version, the values it reaches by
deterministic token, and what it reads of the world.
"""

from __future__ import annotations

import logging
from typing import Any

from guideloom.export.recipe import FINGERPRINT_HEX_CHARS, callable_name, transform_recipe
from guideloom.read.fingerprint import local_fingerprint

logger = logging.getLogger(__name__)

__all__ = ["CODE_HASH_HEX_CHARS", "callable_fingerprint", "callable_name", "data_fingerprint"]

CODE_HASH_HEX_CHARS = FINGERPRINT_HEX_CHARS


def callable_fingerprint(fn: Any, code_version: str | None = None) -> str | None:
    """``module:qualname#digest`` of a callable and everything of the user's it uses
    (``None`` passes through)."""
    if fn is None:
        return None
    return transform_recipe(fn, code_version).fingerprint


def data_fingerprint(index: bytes, locations: Any) -> str:
    """The identity of a local job's input data (now
    :func:`guideloom.read.fingerprint.local_fingerprint`, which a data root's
    :meth:`~guideloom.read.roots.DataRoot.fingerprint` uses)."""
    return local_fingerprint(index, locations)
