"""The index table (``process_parameters.csv``), typed from the manifest's ``dataType``."""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guideloom.errors import ManifestError
from guideloom.read.files import short_type

DUPLICATES_SHOWN = 10
_TRUE = {"true", "1"}
_FALSE = {"false", "0"}


def parse_bool(text: str) -> bool:
    """Parse ``True/False/true/false/1/0`` (surrounding blanks ignored)."""
    low = text.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"not a boolean: {text!r} (expected True/False/true/false/1/0)")


def _parse_float(text: str) -> float:
    return float(text) if text.strip() else math.nan


_PARSERS: dict[str, Callable[[str], Any]] = {
    "sc:Integer": int,
    "sc:Float": _parse_float,
    "sc:Boolean": parse_bool,
    "sc:Text": str,
}


def parser_for(data_type: str | None) -> Callable[[str], Any]:
    """Return the text-to-value parser for a Croissant ``dataType`` (``str`` if unknown)."""
    return _PARSERS.get(short_type(data_type), str)


@dataclass
class IndexTable:
    """The typed index: one row mapping per experiment, in file order.

    Attributes:
        path: The CSV file.
        id_column: The column holding experiment ids.
        rows: Typed rows, in file order.
    """

    path: Path
    id_column: str
    rows: list[dict[str, Any]]

    def __post_init__(self) -> None:
        self._by_id = {row[self.id_column]: row for row in self.rows}
        if len(self._by_id) != len(self.rows):
            counts = Counter(row[self.id_column] for row in self.rows)
            repeated = [i for i, n in counts.items() if n > 1]
            shown = ", ".join(repr(i) for i in repeated[:DUPLICATES_SHOWN])
            more = f" and {len(repeated) - DUPLICATES_SHOWN} more" \
                if len(repeated) > DUPLICATES_SHOWN else ""
            raise ManifestError(f"{self.path}: ids repeated in column {self.id_column!r}: "
                                f"{shown}{more}")

    @property
    def ids(self) -> list[Any]:
        """Experiment ids in file order."""
        return [row[self.id_column] for row in self.rows]

    def row(self, sim_id: Any) -> Mapping[str, Any]:
        """The row of one experiment."""
        return self._by_id[sim_id]

    def __contains__(self, sim_id: object) -> bool:
        return sim_id in self._by_id

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)


def read_index(path: Path, id_column: str, data_types: Mapping[str, str | None]) -> IndexTable:
    """Read and type an index table.

    Args:
        path: The CSV file.
        id_column: The column holding experiment ids.
        data_types: Croissant ``dataType`` per column (others are read as text).

    Raises:
        FileNotFoundError: The CSV is missing.
        ManifestError: The id column is missing, a cell does not match its dataType, or the
            file is not UTF-8 (the message names the line); a byte-order mark is allowed.
    """
    if not path.is_file():
        raise FileNotFoundError(f"index table not found: {path} (named by the manifest)")
    from guideloom.read.access import read_bytes  # the permission error naming owner and mode

    return read_index_bytes(read_bytes(path), path, id_column, data_types)


def read_index_bytes(data: bytes, path: Any, id_column: str,
                     data_types: Mapping[str, str | None]) -> IndexTable:
    """:func:`read_index` of the table's bytes (fetched from a remote release); ``path`` (a
    path or :class:`~guideloom.read.files.RemotePath`) names it in messages."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ManifestError(_not_utf8(path, data, exc)) from None
    return _read_rows(io.StringIO(text, newline=""), path, id_column, data_types)


def _not_utf8(path: Any, data: bytes, exc: UnicodeDecodeError) -> str:
    """Where the first byte that is not UTF-8 is: ``path:line: ...`` and what to do."""
    for line_no, line in enumerate(data.splitlines(), start=1):
        try:
            line.decode("utf-8-sig" if line_no == 1 else "utf-8")
        except UnicodeDecodeError as bad:
            return (f"{path}:{line_no}: not UTF-8 text (byte 0x{line[bad.start]:02x} at column "
                    f"{bad.start + 1}; {exc.reason}): save the index table as UTF-8")
    return f"{path}: not UTF-8 text ({exc.reason}): save the index table as UTF-8"


def _read_rows(fh: io.StringIO, path: Any, id_column: str,
               data_types: Mapping[str, str | None]) -> IndexTable:
    # utf-8-sig: a byte-order mark (Excel's "CSV UTF-8") is not part of the first column name
    with fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        if id_column not in header:
            raise ManifestError(
                f"{path}: id column {id_column!r} is missing; columns: {', '.join(header)}"
            )
        parsers = {
            name: parser_for(data_types[name]) if name in data_types else str
            for name in header
        }
        rows = []
        for line_no, raw in enumerate(reader, start=2):
            row: dict[str, Any] = {}
            for name, text in raw.items():
                if name is None:
                    raise ManifestError(f"{path}:{line_no}: more cells than header columns")
                if text is None:
                    raise ManifestError(f"{path}:{line_no}: missing cell for {name!r}")
                try:
                    row[name] = parsers[name](text)
                except ValueError as exc:
                    raise ManifestError(
                        f"{path}:{line_no}: column {name!r}: {text!r} does not parse as "
                        f"{data_types.get(name) or 'text'} ({exc})"
                    ) from exc
            rows.append(row)
    return IndexTable(path=path, id_column=id_column, rows=rows)
