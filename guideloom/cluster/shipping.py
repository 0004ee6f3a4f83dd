"""Getting the user's code to the Dask workers without installing it there.

A job carries user callables (transforms, filters, storage formats). Functions defined in
``__main__`` (a script, a notebook cell) are pickled by value by cloudpickle anyway; functions from
a module beside the script, or named by a workflow's ``python_path``, would be pickled by
reference, and a worker that cannot import that module fails. For the block of
:func:`shipped_by_value`, such *local* modules (files outside the standard library and every
``site-packages`` folder) are registered with :func:`cloudpickle.register_pickle_by_value`, and
:func:`pack` serialises a job with cloudpickle inside it, so the workers receive the code itself;
the registration is undone when the block ends. Installed packages still travel by reference:
they must be installed on the workers.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import socket
import sys
import sysconfig
import types
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import cloudpickle

from guideloom.errors import WorkerImportError
from guideloom.runtime.caches import BoundedCache, cache

_UNPACKED: BoundedCache[str, Any] = cache("unpacked_transforms")


OWN_PACKAGE = "guideloom"


@functools.lru_cache(maxsize=1)
def _installed_roots() -> tuple[Path, ...]:
    """The standard library and every ``site-packages``/``dist-packages`` folder on the path."""
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    roots = {Path(p).resolve() for p in {sysconfig.get_paths()[n] for n in names}}
    roots |= {Path(p).resolve() for p in sys.path
              if Path(p).name in ("site-packages", "dist-packages")}
    return tuple(roots)


def is_local_module(module: types.ModuleType) -> bool:
    """Whether ``module`` is the user's own code: a file outside the standard library and every
    ``site-packages`` folder (guideloom itself excepted: the workers have it)."""
    name = module.__name__
    if name == "__main__" or name.split(".")[0] == OWN_PACKAGE:
        return False
    if name in sys.builtin_module_names or name.split(".")[0] in sys.stdlib_module_names:
        return False
    file = getattr(module, "__file__", None)
    if not file:
        return False
    path = Path(file).resolve()
    return not any(path.is_relative_to(root) for root in _installed_roots())


def _local_modules_of(obj: Any, seen: set[str]) -> list[types.ModuleType]:
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    if module is None or module.__name__ in seen or not is_local_module(module):
        return []
    seen.add(module.__name__)
    found = [module]
    for value in vars(module).values():  # helpers and modules it uses
        if isinstance(value, types.ModuleType):
            if value.__name__ not in seen and is_local_module(value):
                seen.add(value.__name__)
                found.append(value)
        elif callable(value):
            found += _local_modules_of(value, seen)
    return found


@contextlib.contextmanager
def shipped_by_value(objects: Iterable[Any]) -> Iterator[list[str]]:
    """Register the local modules that ``objects`` come from for pickling by value, for the
    block: :func:`pack` the job inside it. On exit the modules this call registered are
    unregistered again (those registered before stay), so cloudpickle's process-wide registry
    is as it was and later pickling in the host process is by reference again.

    Yields:
        The names of the modules that travel by value.
    """
    seen: set[str] = set()
    modules: list[types.ModuleType] = []
    for obj in objects:
        if obj is not None:
            modules += _local_modules_of(obj, seen)
            modules += _local_modules_of(type(obj), seen)
    added: list[types.ModuleType] = []
    try:
        for module in modules:
            if module.__name__ not in cloudpickle.list_registry_pickle_by_value():
                cloudpickle.register_pickle_by_value(module)
                added.append(module)
        yield [m.__name__ for m in modules]
    finally:
        for module in added:
            if module.__name__ in cloudpickle.list_registry_pickle_by_value():
                cloudpickle.unregister_pickle_by_value(module)


def pack(obj: Any) -> bytes:
    """Serialise ``obj`` (a job and its user code) with cloudpickle for the workers."""
    blob: bytes = cloudpickle.dumps(obj)
    return blob


def unpack(payload: bytes) -> Any:
    """The object of :func:`pack`, unpickled once per worker process and payload.

    Raises:
        WorkerImportError: A module the job refers to is not importable here (one line naming
            the module, the host and the fix).
    """
    key = hashlib.blake2b(payload, digest_size=16).hexdigest()
    obj = _UNPACKED.get(key)
    if obj is None:
        try:
            obj = cloudpickle.loads(payload)
        except ModuleNotFoundError as exc:
            raise WorkerImportError(
                f"the Dask worker on {socket.gethostname()} cannot import module {exc.name!r}, "
                "which this job's transforms use: install it on the workers (modules beside "
                "your script, or named by a workflow's python_path, are shipped automatically)"
            ) from None
        _UNPACKED.put(key, obj)
    return obj
