# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: the zip directory parser, defined in
:mod:`guideloom.read.zipdir`."""

from guideloom.read.zipdir import (
    LOCAL_HEADER,
    LOCAL_SIG,
    MAX_COMMENT,
    MAX_DIRECTORY,
    MAX_OFFSET,
    TAIL_READ,
    UTF8_NAME,
    ZIP_STORED,
    Directory,
    Member,
    ZipFormatError,
    find_directory,
    overlapping_members,
    parse_directory,
    parse_local_header,
    read_members,
)

__all__ = [
    "Directory",
    "LOCAL_HEADER",
    "LOCAL_SIG",
    "MAX_COMMENT",
    "MAX_DIRECTORY",
    "MAX_OFFSET",
    "Member",
    "TAIL_READ",
    "UTF8_NAME",
    "ZIP_STORED",
    "ZipFormatError",
    "find_directory",
    "overlapping_members",
    "parse_directory",
    "parse_local_header",
    "read_members",
]
