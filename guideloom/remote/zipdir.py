"""Compatibility stub: the zip directory parser now lives in guideloom.read.zipdir."""

from __future__ import annotations

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

__all__ = ["LOCAL_HEADER", "LOCAL_SIG", "MAX_COMMENT", "MAX_DIRECTORY", "MAX_OFFSET", "TAIL_READ",
           "UTF8_NAME", "ZIP_STORED", "Directory", "Member", "ZipFormatError", "find_directory",
           "overlapping_members", "parse_directory", "parse_local_header", "read_members"]
