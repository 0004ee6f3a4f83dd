"""zarr stores for a local path or an fsspec URL, strict ones for published exports, and
array access that treats a group where an array belongs as damage."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from guideloom.formats.base import fail

if TYPE_CHECKING:  # zarr is imported where it is used (import guideloom stays cheap)
    from zarr import Array, Group
    from zarr.abc.store import ByteRequest, Store
    from zarr.core.buffer import Buffer, BufferPrototype


def zarr_store(url: str, strict: bool = False) -> Store:
    """A zarr store for a local path or an fsspec URL.

    ``strict`` (reading a published export): a chunk whose file is missing raises
    :class:`~guideloom.errors.CorruptExportError` instead of reading as the fill value.
    """
    import zarr.storage

    if strict:
        return _strict_store(url)
    if "://" not in url:
        return zarr.storage.LocalStore(url)
    return zarr.storage.FsspecStore.from_url(url)


def member_array(group: Group, name: str, root: str) -> Array[Any]:
    """``group[name]`` (the group at ``root``), which must be an array: a subgroup there is a
    :class:`CorruptExportError` naming its ``name/zarr.json``."""
    return as_array(group[name], root, name)


def as_array(node: Array[Any] | Group, root: str, name: str) -> Array[Any]:
    import zarr

    if not isinstance(node, zarr.Array):
        fail(root, f"{name}/zarr.json", "the metadata of a zarr group where an array belongs")
    return node


def is_chunk_key(key: str) -> bool:
    """Whether a store key names a chunk (``alias/c/0/0``), not metadata (``zarr.json``)."""
    parts = key.split("/")
    return parts[-1] != "zarr.json" and "c" in parts[:-1]


def _strict_store(url: str) -> Store:
    """A store of the published export at ``url`` whose missing chunks are errors."""
    import zarr.storage

    base = zarr.storage.LocalStore if "://" not in url else zarr.storage.FsspecStore

    class StrictStore(base):  # type: ignore[misc, valid-type]
        async def get(self, key: str, prototype: BufferPrototype | None = None,
                      byte_range: ByteRequest | None = None) -> Buffer | None:
            value: Buffer | None = await super().get(key, prototype, byte_range)
            if value is None and is_chunk_key(key):
                fail(url, key, "the chunk file is missing")
            return value

    store: Store
    if base is zarr.storage.LocalStore:
        store = StrictStore(url)
        return store
    fs, path = fs_of(url)
    store = StrictStore(fs=_async_fs(fs), path=path)
    return store


def fs_of(url: str) -> tuple[Any, str]:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    return fs, str(path)


def _async_fs(fs: Any) -> Any:
    """An async view of ``fs`` (what FsspecStore needs)."""
    from fsspec.implementations.asyn_wrapper import AsyncFileSystemWrapper

    return fs if getattr(fs, "async_impl", False) else AsyncFileSystemWrapper(fs)


UNREADABLE_METADATA = (ValueError, TypeError)  # JSONDecodeError is a ValueError
