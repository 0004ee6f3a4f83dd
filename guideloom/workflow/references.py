"""``module:function`` references to transforms, resolved with :mod:`importlib` (no ``eval``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def split_reference(ref: str) -> tuple[str, str]:
    """``(module, attribute path)`` of a ``module:function`` reference.

    Raises:
        ValueError: The text is not of that form.
    """
    module_name, sep, attr_path = ref.partition(":")
    if not sep or not module_name or not attr_path or " " in ref:
        raise ValueError(f"expected a 'module:function' reference, got {ref!r}")
    return module_name, attr_path


def resolve_reference(ref: str) -> Callable[..., Any]:
    """Import ``module`` and return its attribute ``function`` (dotted paths allowed).

    Raises:
        ValueError: The text is not ``module:function``, the module does not import, the
            attribute is missing or not callable. The message says which.
    """
    module_name, attr_path = split_reference(ref)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"cannot import module {module_name!r} ({exc}); it must be importable by the "
            "driver and the Dask workers (see python_path)"
        ) from exc
    except Exception as exc:
        raise ValueError(
            f"importing module {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    target: Any = module
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ValueError(f"module {module_name!r} has no attribute {attr_path!r}") from None
    if not callable(target):
        raise ValueError(f"{ref!r} is a {type(target).__name__}, not a callable")
    return target


OWN_PACKAGE_PREFIX = "guideloom."


class DeferredReference:
    """A ``module:function`` reference left unimported (a dry run imports no user module).

    It carries the reference's name for messages; calling it is an error.
    """

    def __init__(self, ref: str):
        module, _, attr = ref.partition(":")
        self.ref = ref
        self.__module__ = module
        self.__qualname__ = attr

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self.ref} was not imported (a dry run imports no user module)")

    def __repr__(self) -> str:
        return f"DeferredReference({self.ref!r})"


def is_own(ref: str) -> bool:
    """Whether ``ref`` names guideloom's own code (the shipped workflows' transforms)."""
    return ref.startswith(OWN_PACKAGE_PREFIX)
