"""The experiments of a remote release: zip members, else loose ``.h5`` files."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from guideloom.remote.locations import remote_locations
from guideloom.remote.loose import loose_locations
from guideloom.remote.root import RemoteRoot

if TYPE_CHECKING:
    from guideloom.croissant import Dataset
    from guideloom.sources import Location


def release_locations(ds: Dataset, root: RemoteRoot, ids: Iterable[Any] | None = None
                      ) -> dict[Any, Location]:
    """Map the experiment ids of the remote release ``root`` to their locations: the members
    of its archives (:func:`~guideloom.remote.locations.remote_locations`) or, when they hold
    none, its loose files (:func:`~guideloom.remote.loose.loose_locations`; ``ids``, default
    the index table's, are the experiments looked for on a server that cannot list).

    Raises:
        GuideloomError: An archive or folder cannot be read (naming its URL).
        ManifestError: Two members or loose files hold one experiment.
    """
    found = remote_locations(ds, root)
    if not found:  # no zip member: a loose release (h5/<id>.h5), read by ranges the same way
        found.update(loose_locations(ds, root, ds.index().ids if ids is None else ids))
    return found
