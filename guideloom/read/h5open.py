"""Opening one location's HDF5 file as an ``h5py.File``, wherever its bytes are: the one
dispatch from a location to its opener (:func:`guideloom.sources.open_location` for a local
file or member, :func:`guideloom.remote.records.open_remote` for one read by byte ranges),
until the HDF5 layer of the read package opens every location itself."""

from __future__ import annotations

import h5py

from guideloom.read.locations import Location, RemoteLocation


def open_location_file(loc: Location) -> h5py.File:
    """The HDF5 file at ``loc``, read-only (closing it closes what this opened).

    Raises:
        CorruptDataError: The file or member is damaged or not HDF5 (naming the id and file).
        ExperimentReadError: The file vanished or cannot be read.
    """
    if isinstance(loc, RemoteLocation):
        from guideloom.remote.records import open_remote

        return open_remote(loc)
    from guideloom.sources import open_location

    return open_location(loc)
