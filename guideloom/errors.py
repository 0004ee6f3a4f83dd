"""Exceptions and warnings shared across guideloom."""

from __future__ import annotations

from collections.abc import Sequence


class GuideloomError(Exception):
    """Base class of guideloom's own errors."""


class ManifestError(GuideloomError, ValueError):
    """The Croissant manifest or the dataset spec cannot be used."""


class MissingDataWarning(UserWarning):
    """Experiments listed in the index have no local HDF5 file and were skipped."""


class ExperimentReadError(GuideloomError):
    """Reading one experiment failed.

    Attributes:
        sim_id: The experiment id.
        file: The HDF5 file or the archive (with member) that was read.
        h5_path: The HDF5 path involved, when one is.
    """

    def __init__(self, message: str, *, sim_id: object, file: str, h5_path: str | None = None):
        super().__init__(message)
        self.sim_id = sim_id
        self.file = file
        self.h5_path = h5_path

    def __reduce__(self):  # keep the attributes when Dask ships the error between processes
        return (
            _rebuild_experiment_error,
            (type(self), self.args[0], self.sim_id, self.file, self.h5_path),
        )


def _rebuild_experiment_error(cls, message, sim_id, file, h5_path):
    return cls(message, sim_id=sim_id, file=file, h5_path=h5_path)


class MissingFieldError(ExperimentReadError, KeyError):
    """An experiment's file lacks an HDF5 path that the view needs."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0])


class CorruptDataError(ExperimentReadError):
    """An archive member or HDF5 file is damaged and cannot be read."""


def summarize_ids(ids: Sequence[object], first: int = 10) -> str:
    """Return ``"N ids: a, b, c, …"`` for messages that must not flood."""
    shown = ", ".join(str(i) for i in list(ids)[:first])
    more = f", … ({len(ids) - first} more)" if len(ids) > first else ""
    return f"{len(ids)} experiment(s): {shown}{more}"


class WorkerImportError(GuideloomError):
    """A Dask worker cannot import a module the job's code needs."""
