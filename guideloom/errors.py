"""Every exception and warning class of guideloom, in one place, and :func:`warn`."""

from __future__ import annotations

import errno
import os
import signal
import stat
import sys
import warnings
from collections.abc import Sequence
from types import FrameType
from typing import Any

_PACKAGE_DIR = os.path.dirname(__file__) + os.sep


class GuideloomError(Exception):
    """Base class of every error guideloom raises to users (each also derives from the builtin
    it stands for, e.g. ``ValueError``, so ``except ValueError`` keeps working)."""


class GuideloomWarning(UserWarning):
    """Base class of every warning guideloom emits (a ``UserWarning``)."""


class ConfigWarning(GuideloomWarning, RuntimeWarning):
    """A configured value cannot be used; the default is used instead."""


class ManifestError(GuideloomError, ValueError):
    """The Croissant manifest or the dataset spec cannot be used."""


class ZipFormatError(GuideloomError, ValueError):
    """Bytes that are not a readable zip archive (:mod:`guideloom.read.zipdir`; callers
    turn it into a :class:`GuideloomError` naming the archive)."""


class MissingDataWarning(GuideloomWarning):
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


class UnknownColumnError(GuideloomError, KeyError):
    """A ``where=`` row filter looked up a column the index table does not have (a
    ``KeyError``, as a dict lookup raises)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ExperimentNotFoundError(GuideloomError, KeyError, FileNotFoundError):
    """No local file holds the requested experiment (a ``KeyError`` and, as in rddac, a
    ``FileNotFoundError``)."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0])


class CorruptDataError(ExperimentReadError):
    """An archive member or HDF5 file is damaged and cannot be read."""


def _import_machinery(filename: str) -> bool:
    """Frames that ``warnings.warn`` skips without counting them (``importlib._bootstrap``)."""
    return "importlib" in filename and "_bootstrap" in filename


def warn(message: str, category: type[Warning] = GuideloomWarning) -> None:
    """Issue a warning attributed to the first caller outside the guideloom package.

    The stack level is counted at each call, so the warning names the user's line however
    deep inside guideloom it is raised (``warnings.warn``'s ``skip_file_prefixes`` does this
    from Python 3.12 on; guideloom supports 3.11).
    """
    level = 1  # this function's frame
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _import_machinery(filename):
            level += 1
            if not filename.startswith(_PACKAGE_DIR):
                break
        frame = frame.f_back
    warnings.warn(message, category, stacklevel=level)


def summarize_ids(ids: Sequence[object], first: int = 10) -> str:
    """Return ``"N ids: a, b, c, …"`` for messages that must not flood."""
    shown = ", ".join(str(i) for i in list(ids)[:first])
    more = f", … ({len(ids) - first} more)" if len(ids) > first else ""
    return f"{len(ids)} experiment(s): {shown}{more}"


class WorkerImportError(GuideloomError):
    """A Dask worker cannot import a module the job's code needs."""


class LoaderArgumentError(GuideloomError, TypeError, ValueError):
    """An argument a loader constructor takes, given where it does not apply (e.g.
    ``sequence_length`` for a document storage); GuideLoom 1.1 raised ``TypeError`` there and
    earlier guideloom ``ValueError``, so it is both."""


class GenerationChangedError(GuideloomError, ValueError):
    """A loader state taken on another generation of the export is not resumed: the loader
    was told to refuse (``on_generation_change="refuse"``), or the state holds no ``sim_ids``
    to continue by (see :mod:`guideloom.loader.generations`)."""


class StorageError(GuideloomError, ValueError):
    """A storage directory or shard cannot be read safely (gap, truncation, dtype mismatch...)."""


class FormatContractError(GuideloomError, ValueError):
    """A storage format broke its protocol (wrong dtype, length, key order...)."""


class ForkedWorkerError(GuideloomError):
    """A worker process forked from the driver (placement ``forked``) died while running a
    partition of an export; the partitions finished before it are kept for a rerun."""


class ConfigError(GuideloomError, ValueError):
    """A configuration key or value (``guideloom.config``, a ``GUIDELOOM_*`` variable) is bad."""


class FormatPluginWarning(GuideloomWarning):
    """An export-format plugin (entry point ``guideloom.export_formats``) could not be used:
    it failed to import, is no ``ExportFormat``, or would shadow a built-in kind. It is
    skipped; the message names the plugin and its distribution."""


class InjectedFault(BaseException):
    """Raised at the point :func:`crash_at` names (a ``BaseException``: like SIGKILL, no
    ``except Exception`` handler of the run stops it).

    Attributes:
        point: The fault point reached.
    """

    def __init__(self, point: str):
        super().__init__(f"injected fault at {point!r}")
        self.point = point


class UsageError(GuideloomError):
    """A problem with what the user asked for: exit code 2."""


class NotDemoDataError(GuideloomError, FileExistsError):
    """``make_demo_data`` was pointed at a non-empty directory it did not make.

    Attributes:
        path: The directory.
    """

    def __init__(self, message: str, *, path: str):
        super().__init__(message)
        self.path = path

    def __reduce__(self):
        return (_rebuild_not_demo_data, (self.args[0], self.path))


def _rebuild_not_demo_data(message: str, path: str) -> NotDemoDataError:
    return NotDemoDataError(message, path=path)


class SchedulerUnreachableError(UsageError, OSError):
    """No Dask scheduler answered at a ``tcp://`` address in time (an ``OSError``, as
    ``distributed`` raises)."""


class SchedulerCredentialsError(UsageError):
    """A ``tls://`` scheduler's credentials (CA, certificate, key) cannot be found or used."""


class NoWorkersError(UsageError, TimeoutError):
    """The Dask scheduler at a ``tcp://`` address had no worker within Dask's connect
    timeout."""


class JobFailedError(GuideloomError):
    """The job started and failed: exit code 1."""


class ExtractError(GuideloomError):
    """Some members could not be extracted; everything else was.

    Attributes:
        errors: One :class:`~guideloom.errors.ExperimentReadError` per failed experiment (a
            :class:`~guideloom.errors.CorruptDataError` for a damaged member), naming the id
            and ``archive::member``.
        report: The :class:`ExtractReport` of the run.
    """

    def __init__(self, message: str, *, errors: Sequence[ExperimentReadError],
                 report: Any):
        super().__init__(message)
        self.errors = list(errors)
        self.report = report


class DownloadError(GuideloomError):
    """A file of the published release could not be fetched or failed its checksum.

    The message names the file and the URL; nothing unverified is left under the file's name.
    """


class TransientDownloadError(GuideloomError):
    """A fetch failed in a way worth retrying (429/5xx, reset, timeout, short body).

    Used inside :mod:`guideloom.net.fetch`; the user sees a :class:`DownloadError` once the
    retries run out. ``wait`` overrides the backoff (a ``Retry-After``).
    """

    def __init__(self, reason: str, wait: float | None = None):
        super().__init__(reason)
        self.wait = wait


class RestartDownloadError(TransientDownloadError):
    """The partial file cannot be continued (wrong ``Content-Range``, bad checksum): the next
    attempt starts again from byte 0 without ``Range``."""


class RangeIgnoredError(TransientDownloadError):
    """A server answered a ``Range`` request with ``200`` and the whole file (used inside
    :mod:`guideloom.read.http`: asked once more, then a :class:`RemoteReadError`)."""


class DeadlineError(TimeoutError):
    """A deadline of :func:`guideloom.net.deadline.within` passed (not a socket timeout of the
    client); callers word it naming the URL."""


class TooSlowError(OSError):
    """An HTTP answer missed a deadline of :mod:`guideloom.net.deadline` (inside
    :mod:`guideloom.storage.http`: an ``OSError`` that fsspec's ``sync`` passes unchanged; the
    caller sees the ``TimeoutError`` it is)."""


class RemoteReadError(GuideloomError, OSError):
    """Byte ranges of a remote file could not be read (after the retries, or at once for a
    permanent answer such as 404): an ``OSError``, as a failed local read is.

    Attributes:
        url: The file's URL (as given, never a redirect target that may carry a signature).
        ranges: The ``(offset, size)`` ranges that failed (offset None: the file's last
            ``size`` bytes).
        sim_id: The experiment being read, when the caller said.
    """

    def __init__(self, message: str, *, url: str,
                 ranges: Sequence[tuple[int | None, int]] = (), sim_id: object = None):
        super().__init__(message)
        self.url = url
        self.ranges = [tuple(r) for r in ranges]
        self.sim_id = sim_id

    def __str__(self) -> str:  # OSError would otherwise format (errno, strerror)
        return str(self.args[0])

    def __reduce__(self):  # keep the attributes when Dask ships the error between processes
        return (_rebuild_remote_error, (type(self), self.args[0], self.url, self.ranges,
                                        self.sim_id))


def _rebuild_remote_error(cls, message, url, ranges, sim_id):
    return cls(message, url=url, ranges=ranges, sim_id=sim_id)


class RemoteChangedError(RemoteReadError):
    """The remote file's size changed between two reads: what was read before may not belong
    with what is read now."""


class UnverifiedExportWarning(GuideloomWarning):
    """An export without ``export.json`` (written by rddac 2.0 / ddacs 3.2) was opened: its
    files are read as they are, with nothing recorded to check them against."""


class SkippedDataWarning(GuideloomWarning):
    """Experiments failed and were left out because the export asked for ``on_error="skip"``."""


class NothingToExportError(GuideloomError, ValueError):
    """The filters left no experiment with local data."""


class TransformError(ExperimentReadError):
    """A user transform raised for one experiment."""


class RecordValueError(ExperimentReadError, ValueError):
    """A record's output does not fit the export: shape, dtype, alias set or value type."""


class UnsafeNameError(GuideloomError, ValueError):
    """An output name (alias or record key) is not a plain file name: it holds ``/``, ``\\``,
    ``..`` or NUL, starts with ``.``, or is one of an export's own files. Never skipped by
    ``on_error="skip"``: it is a mistake in the transform or view, not in one experiment."""


class UnsafeFileError(GuideloomError, ValueError):
    """A file or folder guideloom creates in a shared place is not ours: a symlink, a hard link,
    another user's, or writable by others (see :mod:`guideloom.runtime.private_files`)."""


class LocalClusterError(GuideloomError, RuntimeError):
    """A local scheduler or worker process failed to start, or a state file is in the way."""


class IncompleteExportError(GuideloomError, ValueError):
    """The directory is not a finished guideloom export."""


class UpdateRefusedError(GuideloomError, ValueError):
    """The export at the target cannot be updated by this job (another view, transform,
    options or format, or not a complete export recording its inputs): a full export
    (``overwrite=True``) is needed."""


class WorkflowError(GuideloomError, ValueError):
    """A workflow file is invalid: the message names the file, the key and what was expected."""

    def __init__(self, file: str, key: str | None, message: str):
        self.file, self.key = file, key
        where = f"{file}: key {key!r}: " if key else f"{file}: "
        super().__init__(where + message)


class InflateError(GuideloomError, ValueError):
    """A chunk is not a valid zlib stream of the expected decoded size."""


class FastReadError(GuideloomError, ValueError):
    """The fast path could not decode a chunk; read the dataset through h5py instead."""


class NativeError(Exception):
    """:mod:`guideloom.h5native` cannot read this file or dataset; read it with h5py instead."""


class NativeUnsupported(NativeError):
    """The file uses an HDF5 feature the native reader does not handle (h5py does)."""


class NativeFormatError(NativeError):
    """The file's bytes are not valid HDF5 as far as the native reader can tell (truncated,
    out-of-range addresses, bad signatures or checksums, cycles); h5py then words the error."""


class NativeDamageError(NativeFormatError):
    """Damage HDF5 itself reads without error but as made-up values (a chunk key moved past
    the dataset's maximum shape reads as fill): the record is refused, not read by h5py."""


class JobqueueError(GuideloomError):
    """Worker jobs could not be submitted, started or configured (one-line message)."""


class JobqueueUnavailableError(JobqueueError):
    """The batch system's commands (``sbatch``, ``qsub``, ...) are not on ``PATH``."""


class JobqueueConfigError(JobqueueError, ValueError):
    """No usable jobqueue settings were found for the batch system."""


class WorkerTimeoutError(JobqueueError, TimeoutError):
    """No worker connected in time; the message names the jobs' states and pending reasons."""


class JobqueueTerminated(SystemExit):
    """SIGTERM arrived while :func:`jobqueue_client` was active (exit code 143)."""

    def __init__(self) -> None:
        super().__init__(128 + signal.SIGTERM)


class ClusterStartError(GuideloomError):
    """The embedded cluster's workers did not start; the message quotes their log."""


class NoJobError(GuideloomError, ValueError):
    """Neither a published export nor a staged job is at a path."""


class UnsafeTargetError(GuideloomError, ValueError):
    """An export target is protected (data directory, a parent of it, /, home) or holds
    something guideloom did not write."""


class TargetBusyError(GuideloomError):
    """Another run holds the lock of an export target (the message names its pid and host)."""


class NotAnExportError(IncompleteExportError, FileNotFoundError):
    """The directory holds no export at all (neither ``export.json`` nor an rddac export's
    ``sim_ids.npy``); a ``FileNotFoundError`` too, as rddac raises."""

    def __str__(self) -> str:
        return str(self.args[0])


class CorruptExportError(IncompleteExportError):
    """A published export does not match its ``export.json`` (a file missing, truncated, of
    another dtype or shape, ids that do not match their checksum, or replaced since opened)."""


class UntrustedExportError(GuideloomError, ValueError):
    """An export stores its rows in a form whose reading runs code chosen by its author
    (pickle) and the caller did not opt in with ``trust=True``."""


class UnverifiableExportError(GuideloomError):
    """``Export.verify`` was asked for, but the export records no full-data checksums (written
    before guideloom took them, or with them turned off): only the open-time checks ran."""


class NamedPermissionError(GuideloomError, PermissionError):
    """A file we may not read or write, named with its owner and mode (its text is just that
    message, without ``[Errno 13]``)."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


def permission_denied(exc: PermissionError, doing: str = "read") -> PermissionError:
    """A :class:`PermissionError` whose message names the file, its owner and mode, and who we
    are: a file we may not read is not a damaged one."""
    path = exc.filename
    if path is None or isinstance(exc, NamedPermissionError):
        return exc
    detail = ""
    try:
        st = os.stat(path)
        detail = (f" (owner {user_text(st.st_uid)}, mode {stat.S_IMODE(st.st_mode):04o}; this "
                  f"process runs as {user_text(os.geteuid())})")
    except OSError:
        pass
    return NamedPermissionError(exc.errno or errno.EACCES,
                                f"cannot {doing} {path}: permission denied{detail}; ask its "
                                "owner for access")


def user_text(uid: int) -> str:
    """``name (uid N)``, or ``uid N`` for a uid without an account."""
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"
