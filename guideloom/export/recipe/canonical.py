"""Source code as text that does not depend on the Python version that parsed it.

The code identity of a transform (:mod:`guideloom.export.recipe.code`) digests its syntax tree, and
a job must get the same identity on every interpreter of a cluster. ``ast.dump`` does not give
that: Python 3.12 added fields (``type_params``) and 3.13 leaves empty ones out of its output.
This module imports nothing of guideloom (its tests load it on a second interpreter alone).
"""

from __future__ import annotations

import ast
from typing import Any


def canonical_dump(node: Any) -> str:
    """``node`` as text; a field that is ``None`` or empty is always left out and fields are
    named, so a field one version lacks and another holds empty give the same text.

    Args:
        node: An ``ast.AST`` node (or a list of them, or a field's plain value).

    Returns:
        The node's type, then its non-empty fields by name, recursively.
    """
    if isinstance(node, ast.AST):
        fields = []
        for name in node._fields:
            value = getattr(node, name, None)
            if value is None or (isinstance(value, list) and not value):
                continue
            fields.append(f"{name}={canonical_dump(value)}")
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return f"[{', '.join(canonical_dump(v) for v in node)}]"
    return repr(node)
