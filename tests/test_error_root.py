"""Every exception guideloom raises to users derives from ``GuideloomError``, every warning it
emits from ``GuideloomWarning``; each keeps the builtin it stood for, so ``except ValueError``
(or a filter on ``UserWarning``) in user code keeps working.

The classes are walked, not listed: every subclass of ``BaseException`` defined by a guideloom
module (``tests/test_architecture.py`` holds them all in ``guideloom/errors.py``).
"""

from __future__ import annotations

import sys
import warnings

import pytest

import guideloom
from guideloom import errors
from guideloom.errors import GuideloomError, GuideloomWarning

#: Exception classes that never reach a user, each with the reason: the package catches them
#: and raises a ``GuideloomError`` naming the file or URL instead. Each stays out of the public
#: surface (``guideloom.__all__``).
NOT_RAISED_TO_USERS: dict[str, str] = {
    "DeadlineError": "the HTTP deadline's signal inside guideloom.net.deadline.within; callers "
                     "word it naming the URL (a TimeoutError, so the download retries it)",
    "TooSlowError": "guideloom.storage.http's signal that fsspec passes unchanged (an OSError); "
                    "it becomes the TimeoutError the caller sees",
    "NativeError": "the native HDF5 reader's signal to read the file with h5py instead",
    "NativeUnsupported": "a feature the native HDF5 reader leaves to h5py",
    "NativeFormatError": "bytes the native HDF5 reader leaves to h5py to word",
    "NativeDamageError": "damage the native HDF5 reader found; the record reader raises a "
                         "CorruptDataError naming the experiment and file",
}

#: Classes that end the run, not errors to handle: ``BaseException``s by design, so that no
#: ``except Exception`` (nor ``except GuideloomError``) stops them.
ENDING_THE_RUN: dict[str, str] = {
    "InjectedFault": "a test fault point's crash, like SIGKILL there",
    "JobqueueTerminated": "SIGTERM during a batch job: a SystemExit with code 143",
}

#: The builtin each class stood for before it joined the roots (it keeps deriving from it).
BUILTINS: dict[str, type[BaseException]] = {
    "ZipFormatError": ValueError, "FastReadError": ValueError, "InflateError": ValueError,
    "LocalClusterError": RuntimeError, "NamedPermissionError": PermissionError,
    "MissingDataWarning": UserWarning, "SkippedDataWarning": UserWarning,
    "UnverifiedExportWarning": UserWarning, "FormatPluginWarning": UserWarning,
    "ConfigWarning": RuntimeWarning,
}


def package_classes() -> dict[str, type[BaseException]]:
    """Every exception and warning class a guideloom module defines (of the modules imported;
    each is its module's attribute)."""
    found: dict[str, type[BaseException]] = {}
    todo: list[type[BaseException]] = [BaseException]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            module = sys.modules.get(sub.__module__)
            if sub.__module__.split(".")[0] == "guideloom" and \
                    getattr(module, sub.__name__, None) is sub:
                found[sub.__name__] = sub
    return found


def outside_the_roots(classes: dict[str, type[BaseException]]) -> list[str]:
    """The classes that derive from neither root and are not listed as never raised."""
    return sorted(name for name, cls in classes.items()
                  if not issubclass(cls, GuideloomError | GuideloomWarning)
                  and name not in NOT_RAISED_TO_USERS and name not in ENDING_THE_RUN)


def test_the_walk_finds_the_package_classes_and_a_stray_one():
    classes = package_classes()
    assert {"GuideloomError", "CorruptDataError", "MissingDataWarning", "InjectedFault"} <= set(
        classes)
    stray = type("StrayError", (ValueError,), {"__module__": "guideloom.errors"})
    stray_warning = type("StrayWarning", (UserWarning,), {"__module__": "guideloom.errors"})
    assert outside_the_roots({**classes, "StrayError": stray,
                              "StrayWarning": stray_warning}) == ["StrayError", "StrayWarning"]


def test_every_exception_derives_from_guideloom_error_and_every_warning_from_the_warning_root():
    classes = package_classes()
    assert outside_the_roots(classes) == []
    warnings_outside = sorted(n for n, c in classes.items()
                              if issubclass(c, Warning) and not issubclass(c, GuideloomWarning))
    assert warnings_outside == []
    assert issubclass(GuideloomWarning, UserWarning)  # a filter on UserWarning still sees them


def test_the_listed_exceptions_exist_and_stay_out_of_the_public_surface():
    classes = package_classes()
    assert sorted(n for n in [*NOT_RAISED_TO_USERS, *ENDING_THE_RUN] if n not in classes) == []
    assert sorted(set(NOT_RAISED_TO_USERS) & set(guideloom.__all__)) == []
    assert all(not issubclass(classes[n], Exception) for n in ENDING_THE_RUN)
    assert all(reason.strip() for reason in [*NOT_RAISED_TO_USERS.values(),
                                             *ENDING_THE_RUN.values()])


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_a_class_keeps_the_builtin_it_stood_for(name):
    cls = getattr(errors, name)
    assert issubclass(cls, BUILTINS[name])
    root = GuideloomWarning if issubclass(cls, Warning) else GuideloomError
    assert issubclass(cls, root)


def test_user_code_catching_the_builtin_or_the_root_catches_the_same_error():
    for cls in (errors.FastReadError, errors.InflateError, errors.ZipFormatError):
        with pytest.raises(ValueError):
            raise cls("bad chunk")
        with pytest.raises(GuideloomError):
            raise cls("bad chunk")
    with pytest.raises(RuntimeError, match="scheduler"):
        raise errors.LocalClusterError("the scheduler did not start")


def test_warn_emits_the_warning_root_by_default():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        errors.warn("something to know")
    assert [w.category for w in caught] == [GuideloomWarning]


def test_an_unknown_sim_id_warns_with_a_guideloom_warning(demo_zip):
    with pytest.warns(GuideloomWarning, match="999999"):
        got = [r["_sim_id"] for r in guideloom.iter_view("force-curve", data_dir=demo_zip,
                                                          sim_ids=[0, 999999])]
    assert got == [0]
