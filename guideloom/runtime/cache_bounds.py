"""The default bound of every in-process cache (:mod:`guideloom.runtime.caches` owns the caches;
:mod:`guideloom.config` makes a key of each bound). Imports nothing of guideloom."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULTS", "CacheBound"]


@dataclass(frozen=True)
class CacheBound:
    """The default bound of one named cache and what leaving it does.

    Attributes:
        entries: Entries kept (``None``: no bound by count).
        nbytes: Bytes kept, as the cache's ``weigh`` counts them (``None``: no bound by bytes).
        doc: What the cache holds.
        closes: What an entry leaving the cache closes (for the docs).
    """

    entries: int | None
    nbytes: int | None = None
    doc: str = ""
    closes: str = "nothing (plain values)"


DEFAULTS: dict[str, CacheBound] = {
    "archive_fds": CacheBound(64, None, "open zip archive descriptors, by path",
                              "the descriptor, once no open member file still reads through it"),
    "archive_listings": CacheBound(64, None, "zip central directories, by archive and its "
                                   "(inode, size, mtime)"),
    "crc_verdicts": CacheBound(1 << 16, None, "CRC-32 outcomes of local zip members"),
    "content_digests": CacheBound(1 << 16, None, "BLAKE3 digests of local inputs, by the "
                                  "input and its file's stat (a file last changed well before "
                                  "its hash)"),
    "remote_crc_verdicts": CacheBound(1 << 16, None, "CRC-32 outcomes of remote zip members"),
    "remote_view_reach": CacheBound(256, None, "how far into a remote member each view's "
                                    "reads went (the size of the next first read)"),
    "h5_header_blocks": CacheBound(4096, 16 << 20, "decoded HDF5 object-header blocks, by "
                                   "their bytes (h5native)"),
    "http_sources": CacheBound(256, None, "HTTP range sources, by URL, token and settings "
                               "(their size and redirect target)"),
    "http_connections": CacheBound(64, None, "idle keep-alive HTTP connections, by host (up to "
                                   "16 each)", "every idle connection of the host"),
    "byte_sources": CacheBound(256, None, "fsspec byte sources, by URL and storage options"),
    "fsspec_filesystems": CacheBound(32, None, "fsspec filesystems of remote reads, by "
                                     "protocol and storage options"),
    "remote_meta_dirs": CacheBound(8, None, "the handle on each on-disk metadata cache folder "
                                   "(the files stay on disk)"),
    "unpacked_transforms": CacheBound(8, None, "transforms unpickled on a worker, by the "
                                      "digest of their payload"),
    "npy_headers": CacheBound(256, None, "parsed .npy headers, by their bytes"),
    "chunk_steps": CacheBound(512, None, "HDF5 filter pipelines turned into read steps"),
    "output_names": CacheBound(4096, None, "verdicts on export output names"),
    "spare_buffers": CacheBound(8, 256 << 20, "page-aligned decode buffers an export's "
                                "partition gave back, by shape and dtype (the next "
                                "partition's, their pages already mapped)"),
}
