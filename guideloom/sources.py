# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: where each experiment's HDF5 file lives
(:mod:`guideloom.read.scan`) and opening it (the zip-member and HDF5 layers,
:mod:`guideloom.read.zipmember` and :mod:`guideloom.read.hdf5`; the old signatures in
:mod:`guideloom.read.legacy`)."""

from guideloom.h5_tools import open_h5
from guideloom.read.fileobj import ByteRangeFile, MemoryFile, SeekableReader
from guideloom.read.handles import ArchiveHandles, ArchiveLease
from guideloom.read.hdf5 import MemberFile, file_access
from guideloom.read.legacy import (
    DescriptorSource,
    inflate_member,
    open_location,
    open_location_bytes,
    open_location_raw,
)
from guideloom.read.locations import Location
from guideloom.read.scan import (
    LOOSE_SUBDIR,
    add_member_locations,
    archive_members,
    archive_paths,
    id_parser,
    scan_locations,
)
from guideloom.read.zipdir import (
    LOCAL_HEADER,
    Member,
    ZipFormatError,
    parse_local_header,
    read_members,
)
from guideloom.read.zipmember import (
    DEFLATE_MAX_RATIO,
    DEFLATE_SLACK,
    INFLATE_BLOCK,
    INFLATE_MEMORY_SHARE,
    checked_data_offset,
    corrupt,
    inflate_budget,
    member_data_offset,
)

raise_corrupt = corrupt

__all__ = [
    "ArchiveHandles",
    "ArchiveLease",
    "ByteRangeFile",
    "DEFLATE_MAX_RATIO",
    "DEFLATE_SLACK",
    "DescriptorSource",
    "INFLATE_BLOCK",
    "INFLATE_MEMORY_SHARE",
    "LOCAL_HEADER",
    "LOOSE_SUBDIR",
    "Location",
    "Member",
    "MemberFile",
    "MemoryFile",
    "SeekableReader",
    "ZipFormatError",
    "add_member_locations",
    "archive_members",
    "archive_paths",
    "checked_data_offset",
    "corrupt",
    "file_access",
    "id_parser",
    "inflate_budget",
    "inflate_member",
    "member_data_offset",
    "open_h5",
    "open_location",
    "open_location_bytes",
    "open_location_raw",
    "parse_local_header",
    "raise_corrupt",
    "read_members",
    "scan_locations",
]
