# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: remote locations (:mod:`guideloom.read.locations`), the remote
archive scan (:mod:`guideloom.read.remote_scan`) and the input fingerprint
(:mod:`guideloom.read.fingerprint`)."""

from guideloom.read.fingerprint import remote_fingerprint
from guideloom.read.locations import RemoteLocation, archive_key
from guideloom.read.remote_scan import (
    ARCHIVE_LANES,
    DIRECTORY_KIND,
    info_validator,
    location_source,
    loose_location,
    remote_locations,
    stat_file,
)

__all__ = [
    "ARCHIVE_LANES",
    "DIRECTORY_KIND",
    "RemoteLocation",
    "archive_key",
    "info_validator",
    "location_source",
    "loose_location",
    "remote_fingerprint",
    "remote_locations",
    "stat_file",
]
