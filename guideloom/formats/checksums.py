"""Full-data checksums: taken by the writers as they write, checked by ``Export.verify``.

Every output kind records a checksum for each *unit* of its data, grouped per file or array:

- npy: one per row of each ``{alias}.npy`` (group ``force.npy``), over the row's bytes;
- zarr: one per row of each array (group ``force``), over the decoded row, i.e. what a reader
  gets back, whatever the compressor;
- npz: one per experiment file (group ``*.npz``), over the whole file;
- storage: one per shard file (group ``shard-*.gls``, a unit covering the shard's rows), and one
  for ``record_offsets.npy``.

A worker hashes each row right after its sink writes it (the bytes are still in cache) through
:class:`RowDigests`, and returns the digests with its partition summary, which the staging area
keeps in the partition's marker: a resumed job keeps the digests of the partitions finished before
it was killed. At finalize, :func:`combine` puts them in published row order (rows of skipped
experiments never have one), the driver writes them to ``checksums.json`` beside the data and
``export.json`` records the algorithm, the groups and a sha256 of the digests.

The hash is xxh3_64 (the ``xxhash`` package): on the 2-core development machine it hashes
16-110 GB/s on one core (by buffer size and load), 3-10x zlib's crc32 and 10-30x sha256;
xxh3_128 is as fast on large rows but slower on small ones and doubles the stored digests, and 64
bits already make an accidental change that keeps a row's checksum a 2**-64 event
(``benchmarks/checksum_cost.py`` prints the table and the write-time cost). It detects
accidental damage (bit flips, truncation, torn or partial copies, a file copied over another); it
is not a defence against someone who also rewrites ``checksums.json`` and ``export.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import fsspec
import numpy as np
import xxhash

from guideloom import config
from guideloom.errors import UnverifiableExportError
from guideloom.formats.layout import EXPORT_MANIFEST as EXPORT_MANIFEST_NAME
from guideloom.formats.layout import fail
from guideloom.formats.manifest_types import ChecksumsEntry, DescriptionEntry

ALGORITHM = "xxh3_64"
CHECKSUMS_FILE = "checksums.json"
SUMMARY_KEY = "checksums"  # where a partition summary carries its digests
SWITCH_ENV = "GUIDELOOM_CHECKSUMS"  # "0": no write-time checksums (for cost measurements only)
READ_BLOCK = 16 << 20  # bytes read at once when verifying (bounded memory)
DIGEST_CHARS = 16  # hex digits of one checksum; a group's checksums are stored concatenated


def enabled() -> bool:
    """Whether writers take checksums (on unless ``GUIDELOOM_CHECKSUMS=0``)."""
    return bool(config.get("checksums"))  # SWITCH_ENV, read now


def as_bytes(data: Any) -> Any:
    """A byte buffer of ``data`` (bytes, memoryview or an array of any dtype), without a copy
    when the array is C-contiguous."""
    if isinstance(data, bytes | bytearray | memoryview):
        return data
    return np.ascontiguousarray(data).reshape(-1).view(np.uint8)


def digest(data: Any) -> str:
    """The checksum of ``data``'s bytes as :data:`DIGEST_CHARS` hex digits."""
    return xxhash.xxh3_64_hexdigest(as_bytes(data))


def file_digest(path: str, opener: Any = open) -> tuple[str, int]:
    """``(checksum, size)`` of a whole file, read in blocks."""
    hasher = xxhash.xxh3_64()
    size = 0
    with opener(path, "rb") as fh:
        while block := fh.read(READ_BLOCK):
            hasher.update(block)
            size += len(block)
    return hasher.hexdigest(), size


def files_digests(root: str, names: Iterable[str], opener: Any = open
                  ) -> Iterator[tuple[str, str, int]]:
    """``(name, checksum, size)`` of each whole file ``names`` under ``root`` (a path, or a URL
    with ``opener=fsspec.open``), in order; a missing one is a
    :class:`~guideloom.errors.CorruptExportError` naming it."""
    for name in names:
        try:
            value, size = file_digest(f"{root.rstrip('/')}/{name}", opener)
        except FileNotFoundError:
            fail(root, name, "missing")
        yield name, value, size


class RowDigests:
    """The digests a partition's sink takes, to return with its summary.

    Each unit is ``(group, order, rows)``: ``order`` sorts the units of a group (the global row,
    or the shard number) and ``rows`` is how many published rows the unit holds (1 for a row or
    an experiment file, a shard's record count, 0 for a file not tied to rows).
    """

    def __init__(self) -> None:
        self.on = enabled()
        self._units: dict[str, dict[int, tuple[str, int]]] = {}

    def add(self, group: str, order: int, data: Any, rows: int = 1) -> None:
        """Record the checksum of ``data`` (the bytes just written) for one unit."""
        if self.on:
            self._units.setdefault(group, {})[order] = (xxhash.xxh3_64_hexdigest(
                data if isinstance(data, bytes | memoryview) else as_bytes(data)), rows)

    def add_known(self, group: str, order: int, value: str, rows: int = 1) -> None:
        """Record a checksum taken before (a row carried unchanged from an earlier
        generation of the export, whose ``checksums.json`` has it)."""
        if self.on:
            self._units.setdefault(group, {})[int(order)] = (value, rows)

    def add_file(self, group: str, order: int, path: str, rows: int = 1) -> None:
        """Record the checksum of the whole file at ``path`` (just written: in the page cache)."""
        if self.on:
            self._units.setdefault(group, {})[int(order)] = (file_digest(path)[0], rows)

    def discard(self, order: int) -> list[str]:
        """Forget the unit ``order`` of every group (a row that is never published); return
        the groups that had one."""
        return [group for group, units in self._units.items()
                if units.pop(int(order), None) is not None]

    def summary(self) -> dict[str, Any]:
        """``{"checksums": {group: {"order": [...], "digests": "<hex><hex>...",
        "rows": [...]}}}`` (``rows`` only when not all 1), or ``{}`` when off.

        The digests are one string, so that a partition's marker stays small and fast to write.
        """
        if not self.on:
            return {}
        out: dict[str, Any] = {}
        for group, units in self._units.items():
            orders = sorted(units)
            entry: dict[str, Any] = {"order": [int(o) for o in orders],
                                     "digests": "".join(units[o][0] for o in orders)}
            rows = [units[o][1] for o in orders]
            if any(r != 1 for r in rows):
                entry["rows"] = rows
            out[group] = entry
        return {SUMMARY_KEY: out}


def combine(summaries: Sequence[Mapping[str, Any]], count: int,
            files: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The ``checksums.json`` document of a job: every group's digests in published order.

    Args:
        summaries: The partition summaries (from workers and markers).
        count: Published rows.
        files: Digests of whole files taken on the driver (name → digest).

    Returns:
        ``None`` when some partition wrote rows without checksums (they were turned off, or
        an older guideloom wrote it) or the digests do not cover every row: nothing is recorded
        rather than a partial set.
    """
    groups: dict[str, list[tuple[int, str, int]]] = {}
    for s in summaries:
        found = s.get(SUMMARY_KEY)
        if found is None:
            if s["written"]:
                return None
            continue
        for group, e in found.items():
            rows = e.get("rows") or [1] * len(e["order"])
            text = e["digests"]
            groups.setdefault(group, []).extend(
                (o, text[k * DIGEST_CHARS:(k + 1) * DIGEST_CHARS], rows[k])
                for k, o in enumerate(e["order"]))
    doc: dict[str, Any] = {}
    for group, units in sorted(groups.items()):
        units.sort(key=lambda u: u[0])
        rows = [int(u[2]) for u in units]
        if sum(rows) != count:
            return None
        entry: dict[str, Any] = {"digests": "".join(u[1] for u in units)}
        if any(r != 1 for r in rows):
            entry["rows"] = rows
        doc[group] = entry
    if not doc:
        return None
    for name, value in (files or {}).items():
        doc[name] = {"digests": value, "rows": [0]}
    return {"algorithm": ALGORITHM, "groups": doc}


def groups_sha256(groups: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of the groups (``export.json`` keeps it)."""
    blob = json.dumps(groups, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def manifest_entry(doc: Mapping[str, Any]) -> ChecksumsEntry:
    """What ``export.json`` records about the checksums (small: no digests)."""
    return {"algorithm": doc["algorithm"], "file": CHECKSUMS_FILE,
            "sha256": groups_sha256(doc["groups"]),
            "groups": {g: len(e["digests"]) // DIGEST_CHARS for g, e in doc["groups"].items()}}


# --- verifying ------------------------------------------------------------------------------
def row_digests(path: str, offset: int, row_bytes: int, n_rows: int) -> Iterator[tuple[str, int]]:
    """``(digest, bytes)`` of each of ``n_rows`` fixed-size rows starting at ``offset``.

    Reads blocks of whole rows up to :data:`READ_BLOCK` bytes; a larger row is hashed in pieces
    of that size, so memory stays bounded.
    """
    with open(path, "rb", buffering=0) as fh:
        fh.seek(offset)
        if row_bytes <= READ_BLOCK:
            per_block = max(1, READ_BLOCK // max(row_bytes, 1))
            buf = bytearray(per_block * row_bytes)
            view = memoryview(buf)
            for start in range(0, n_rows, per_block):
                k = min(per_block, n_rows - start)
                got = readinto_full(fh, view[:k * row_bytes])
                for i in range(k):
                    row = view[i * row_bytes:(i + 1) * row_bytes]
                    if (i + 1) * row_bytes > got:  # truncated: hash what is there
                        row = view[i * row_bytes:max(got, i * row_bytes)]
                    yield xxhash.xxh3_64_hexdigest(row), len(row)
            return
        buf = bytearray(READ_BLOCK)
        view = memoryview(buf)
        for _ in range(n_rows):
            hasher = xxhash.xxh3_64()
            left = row_bytes
            while left:
                got = readinto_full(fh, view[:min(left, READ_BLOCK)])
                hasher.update(view[:got])
                if got < min(left, READ_BLOCK):
                    break
                left -= got
            yield hasher.hexdigest(), row_bytes - left


def readinto_full(fh: Any, view: memoryview) -> int:
    """Fill ``view`` from ``fh`` (several reads if needed); return the bytes read (less at EOF)."""
    got = 0
    while got < len(view):
        n = fh.readinto(view[got:])
        if not n:
            break
        got += n
    return got


@dataclass(frozen=True)
class VerifyReport:
    """What :meth:`guideloom.Export.verify` checked.

    Attributes:
        root: The export.
        kind: Its output kind.
        algorithm: The checksum algorithm.
        rows: Rows whose data was checked.
        files: Files (or arrays) read.
        bytes: Bytes hashed.
        seconds: Time taken.
    """

    root: str
    kind: str
    algorithm: str
    rows: int
    files: int
    bytes: int
    seconds: float

    def line(self) -> str:
        """One line for the command line."""
        rate = self.bytes / self.seconds / 1e6 if self.seconds > 0 else float("inf")
        return (f"{self.root}: intact: {self.rows} rows, {self.files} files, "
                f"{human_bytes(self.bytes)} checked against {self.algorithm} checksums in "
                f"{self.seconds:.2f} s ({rate:.0f} MB/s)")


def human_bytes(n: float) -> str:
    """``"512 B"``, ``"3.4 MB"``, ``"1.2 GB"`` (powers of 1000)."""
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover - the loop returns


def read_sidecar(root: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """``checksums.json`` of an export, checked against the sha256 in ``export.json``.

    Raises:
        UnverifiableExportError: ``export.json`` records no checksums.
        CorruptExportError: The file is missing, unreadable or does not match.
    """
    entry = manifest.get("checksums")
    if not entry:
        raise UnverifiableExportError(
            f"{root} records no full-data checksums (written by an earlier guideloom that did not "
            "take them, or with checksums turned off): only the open-time checks (files, "
            "dtypes, shapes, sizes, sim_ids) could be made; export it again to make it verifiable")
    name = entry.get("file", CHECKSUMS_FILE)
    if entry.get("algorithm") != ALGORITHM:
        fail(root, name, f"algorithm {entry.get('algorithm')!r}; this guideloom checks {ALGORITHM}")
    try:
        with fsspec.open(f"{root}/{name}", "rb") as fh:
            doc = json.loads(fh.read())
    except FileNotFoundError:
        fail(root, name, "missing")
    except json.JSONDecodeError as exc:
        fail(root, name, f"not valid JSON ({exc})")
    groups = doc.get("groups") if isinstance(doc, dict) else None
    if not isinstance(groups, dict) or groups_sha256(groups) != entry.get("sha256"):
        fail(root, name, "does not match the sha256 recorded in export.json")
    checked: dict[str, Any] = doc  # a dict: checked above
    return checked


DESCRIPTION_KEY: Final = "description"  # export.json: {"file": "croissant.json", "sha256": ...}


def description_entry(path: str) -> DescriptionEntry:
    """The ``export.json`` entry that pins the Croissant description written at ``path``."""
    with open(path, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    return {"file": os.path.basename(path), "sha256": digest}


def check_description(root: str, manifest: Mapping[str, Any]) -> None:
    """The export's ``croissant.json`` is the one written with it (sha256 in ``export.json``).

    Exports written before guideloom recorded it (or to a URL, where none is written) carry no
    entry and are not checked.

    Raises:
        CorruptExportError: The file is missing or was changed.
    """
    entry = manifest.get(DESCRIPTION_KEY)
    if not isinstance(entry, Mapping):
        return
    name = str(entry.get("file"))
    if os.path.basename(name) != name or name in ("", ".", ".."):
        fail(root, EXPORT_MANIFEST_NAME, f"names the description file {name!r}, not a file name")
    try:
        with fsspec.open(f"{root}/{name}", "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
    except FileNotFoundError:
        fail(root, name, "missing")
    if digest != entry.get("sha256"):
        fail(root, name, "does not match the sha256 recorded in export.json (edited or replaced)")


def verify_export(root: str, manifest: Mapping[str, Any], fmt: Any,
                  sim_ids: np.ndarray) -> VerifyReport:
    """Recompute every recorded checksum of a published export and compare.

    ``fmt`` is the export's format class; its ``unit_digests`` recomputes a group.

    Raises:
        UnverifiableExportError: No checksums were recorded.
        CorruptExportError: Naming the file, the first differing row (and its sim id) and the
            two checksums.
    """
    t0 = time.perf_counter()
    doc = read_sidecar(root, manifest)
    count = int(manifest["count"])
    n_bytes = 0
    files: set[str] = set()
    for group, entry in sorted(doc["groups"].items()):
        text = entry["digests"]
        digests = [text[i:i + DIGEST_CHARS] for i in range(0, len(text), DIGEST_CHARS)]
        rows = entry.get("rows") or [1] * len(digests)
        first_row = 0
        k = -1
        for k, (name, got, size) in enumerate(fmt.unit_digests(root, manifest, group,
                                                              len(digests))):
            files.add(name)
            n_bytes += size
            if k >= len(digests):
                fail(root, name, f"holds more than the {len(digests)} units checksummed")
            if got != digests[k]:
                fail(root, name, f"{rows_text(first_row, rows[k], sim_ids)}: the data does not "
                                 f"match the checksum recorded at write time ({ALGORITHM} "
                                 f"{got}, recorded {digests[k]})")
            first_row += rows[k]
        if k + 1 != len(digests):
            fail(root, group, f"{k + 1} units read but {len(digests)} were checksummed")
    return VerifyReport(root, str(manifest["kind"]), ALGORITHM, count, len(files), n_bytes,
                        time.perf_counter() - t0)


def rows_text(first: int, n: int, sim_ids: np.ndarray) -> str:
    """``"row 3 (sim id 7)"``, ``"rows 3-5 (sim ids 7, 9, 11)"`` or ``"the file"``."""
    if n == 0:
        return "the file"
    if n == 1:
        return f"row {first} (sim id {sim_ids[first]})"
    ids = [str(i) for i in sim_ids[first:first + min(n, 5)]]
    more = ", ..." if n > 5 else ""
    return f"rows {first}-{first + n - 1} (sim ids {', '.join(ids)}{more})"
