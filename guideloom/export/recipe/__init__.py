"""The recipe of a transform, in layers: what its result can depend on, or a refusal.

:func:`transform_recipe` walks a transform (:mod:`~guideloom.export.recipe.walk`) into named
components: code (:mod:`~guideloom.export.recipe.code`), values
(:mod:`~guideloom.export.recipe.values`) and readings of the world
(:mod:`~guideloom.export.recipe.world`). ``export.json`` records them, so that an update whose
transform differs refuses naming the component (:mod:`~guideloom.export.recipe.compare`).
An explicit ``code_version`` replaces the code and world layers (the user's promise that code
of the same version makes the same rows); values still count.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from guideloom.export.recipe.code import digest
from guideloom.export.recipe.walk import Walk

logger = logging.getLogger(__name__)

__all__ = ["FINGERPRINT_HEX_CHARS", "TransformRecipe", "callable_name", "transform_recipe"]

FINGERPRINT_HEX_CHARS = 16  # 64 bits of sha256
_CODE_KINDS = ("code", "package", "world", "opaque", "stale")
UNPROVABLE_KINDS = ("world", "opaque", "stale")  # components no digest can vouch for


@dataclass(frozen=True)
class TransformRecipe:
    """What one transform's rows depend on.

    Attributes:
        name: ``module:qualname`` of the transform.
        components: ``{"<kind> <name>": digest}`` (see :mod:`~guideloom.export.recipe.walk`);
            with a ``code_version``, its value replaces the code, package and world
            components.
    """

    name: str
    components: dict[str, str]

    @property
    def fingerprint(self) -> str:
        """``module:qualname#digest`` of all components (the job identity's part)."""
        text = json.dumps(self.components, sort_keys=True)
        return f"{self.name}#{digest(text)[:FINGERPRINT_HEX_CHARS]}"

    @property
    def unprovable(self) -> tuple[str, ...]:
        """The components no digest vouches for (``world os.environ``, ``opaque x``, ``stale
        f``): with any of them, two runs of the same recipe may make other rows."""
        return tuple(sorted(k for k in self.components
                            if k.partition(" ")[0] in UNPROVABLE_KINDS))


def callable_name(fn: Any) -> str | None:
    """``module:qualname`` of a callable (``None`` passes through)."""
    if fn is None:
        return None
    module = getattr(fn, "__module__", None) or type(fn).__module__
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}:{name}"


def transform_recipe(fn: Any, code_version: str | None = None) -> TransformRecipe:
    """The components of everything ``fn`` reaches; ``code_version`` stands for its code."""
    walk = Walk()
    try:
        walk.root(fn)
    except Exception as exc:
        # fail the export for it, and never trust it for an update
        logger.warning("the recipe of %s could not be made (%s: %s); an update will refuse "
                       "unless code_version= is given", callable_name(fn), type(exc).__name__,
                       exc)
        walk.components[f"opaque {callable_name(fn)}"] = f"not walkable: {type(exc).__name__}"
    components = walk.components
    if code_version is not None:
        components = {k: v for k, v in components.items()
                      if k.partition(" ")[0] not in _CODE_KINDS}
        components["code_version"] = code_version
    components["name"] = str(callable_name(fn))
    logger.debug("recipe of %s: %d components", callable_name(fn), len(components))
    return TransformRecipe(str(callable_name(fn)), components)
