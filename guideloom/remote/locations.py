"""Compatibility stub: remote locations now live in guideloom.read.locations, the remote
archive scan in guideloom.read.remote_scan and the input fingerprint in
guideloom.read.fingerprint."""

from __future__ import annotations

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

__all__ = ["ARCHIVE_LANES", "DIRECTORY_KIND", "RemoteLocation", "archive_key", "info_validator",
           "location_source", "loose_location", "remote_fingerprint", "remote_locations",
           "stat_file"]
