"""``FormatTests``: the conformance tests every export format passes (built-in or plugin).

A format author subclasses it in a pytest module and names the format::

    from guideloom.testing import FormatTests

    class TestJsonl(FormatTests):
        format_cls = JsonlFormat
        format_options = {"compact": False}

pytest then runs, on demo data the kit writes (:func:`guideloom.demo.make_demo_data`), in this
process (``client="sync"``):

- a round trip: every row read back equals the record a plain serial loop over
  :func:`guideloom.iter_view` gives after the same transform;
- skips: an experiment whose transform fails is left out, the others are published in order;
- resume: a run crashed after its first partition is resumed (that partition is not redone)
  and gives the same files as a clean run;
- every fault point (:meth:`~guideloom.formats.base.ExportFormat.every_fault_point`): a run
  crashed there (:func:`guideloom.runtime.faults.crash_at`) leaves the old export or none, never a
  half one, and the next run publishes the files of a clean run; and a run passes every point
  the format declares;
- ``verify``: a clean export verifies, one with a flipped byte does not;
- open-time checks: an export with a data file removed is refused when opened.

Hooks (class attributes and methods) adapt it to a format whose records are not arrays (the
``storage`` kind's are streams): :attr:`record_transform`, :attr:`skipping_transform`,
:meth:`options_for`, :meth:`expected_rows`, :meth:`tamper_file`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import guideloom
from guideloom.demo import make_demo_data
from guideloom.errors import CorruptExportError, IncompleteExportError, InjectedFault
from guideloom.formats import ExportFormat, format_kinds, register_format, unregister_format
from guideloom.runtime.faults import crash_at, reached_points
from guideloom.testing.transforms import SKIPPED_ID, first_rows, first_rows_skipping

VOLATILE = frozenset({"export.json", "croissant.json"})  # timings and dates differ between runs
STABLE_MANIFEST_KEYS = ("kind", "count", "fields", "sim_ids_sha256", "identity", "skipped",
                        "checksums")
IDS = (0, 3, 5, 7, 9, 11, 13)
OLD_IDS = (1, 2)  # an earlier export at the target, replaced by the run under test


def files_of(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes), ``export.json`` and
    ``croissant.json`` left out (they hold timings and dates)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in VOLATILE}


def stable_manifest(root: Path) -> dict[str, Any]:
    """The entries of ``export.json`` two runs of one job agree on."""
    doc = json.loads((root / "export.json").read_text())
    return {k: doc.get(k) for k in STABLE_MANIFEST_KEYS}


def fault_cases(fmt: type[ExportFormat]) -> list[tuple[str, bool]]:
    """``(point, with_skips)`` for every fault point of ``fmt``: the executor's and its own on
    a job without skipped experiments, its own and its skip-only ones with one skipped."""
    plain = [(p, False) for p in fmt.every_fault_point() if p not in fmt.skip_fault_points]
    skipping = [(p, True) for p in (*fmt.fault_points, *fmt.skip_fault_points)]
    return plain + skipping


def case_id(case: tuple[str, bool]) -> str:
    """A test id for a :func:`fault_cases` entry."""
    point, skips = case
    return f"{point}-with-skips" if skips else point


class FormatTests:
    """Conformance tests of one export format; subclass it and set :attr:`format_cls`.

    Attributes:
        format_cls: The format under test (registered for the class's tests if it is not).
        format_options: Its writer options (``format_options=`` of
            :func:`guideloom.export.export`); see :meth:`options_for`.
        view: The demo dataset's view that is exported.
        record_transform: The transform of every export (module-level, picklable).
        skipping_transform: The same, failing on experiment ``SKIPPED_ID`` (7).
        ids: The experiments exported, in output order.
        partition_size: Experiments per task (several partitions per job).
    """

    format_cls: ClassVar[type[ExportFormat]]
    format_options: ClassVar[Mapping[str, Any]] = {}
    view: ClassVar[str] = "force-curve"
    record_transform: ClassVar[Callable[..., Any]] = staticmethod(first_rows)
    skipping_transform: ClassVar[Callable[..., Any]] = staticmethod(first_rows_skipping)
    ids: ClassVar[tuple[Any, ...]] = IDS
    partition_size: ClassVar[int] = 3

    # --- hooks ---------------------------------------------------------------------------
    def options_for(self, target: Path) -> dict[str, Any]:
        """The writer options of an export to ``target`` (default :attr:`format_options`)."""
        return dict(self.format_options)

    def expected_rows(self, data: Path, ids: Sequence[Any], skips: bool
                      ) -> list[dict[str, np.ndarray]]:
        """The serial reference: each record of ``ids`` that the transform does not fail on,
        read with :func:`guideloom.iter_view` and transformed, ``_sim_id`` dropped."""
        transform = self.skipping_transform if skips else self.record_transform
        rows = []
        for record in guideloom.iter_view(self.view, data_dir=data, sim_ids=list(ids),
                                          sim_ids_order="sim_ids"):
            try:
                out = transform(record)
            except RuntimeError:
                continue
            rows.append({k: np.asarray(v) for k, v in out.items() if k != "_sim_id"})
        return rows

    def tamper_file(self, root: Path) -> Path:
        """A data file of the export at ``root`` to damage: the largest that is not one of
        the small shared files."""
        shared = {"export.json", "croissant.json", "checksums.json", "sim_ids.npy"}
        files = [p for p in root.rglob("*") if p.is_file() and p.name not in shared]
        return max(files, key=lambda p: (p.stat().st_size, str(p)))

    # --- running exports -----------------------------------------------------------------
    def run_export(self, data: Path, target: Path, ids: Sequence[Any] | None = None, *,
                   skips: bool = False) -> Any:
        """Export :attr:`view` to ``target`` in this process (replacing what is there)."""
        transform = self.skipping_transform if skips else self.record_transform
        return guideloom.export.export(
            self.view, target, kind=self.format_cls.kind,
            format_options=self.options_for(target), record_transform=transform,
            data_dir=data, sim_ids=list(self.ids if ids is None else ids),
            sim_ids_order="sim_ids", client="sync", partition_size=self.partition_size,
            overwrite=True, on_error="skip")

    # --- fixtures ------------------------------------------------------------------------
    @pytest.fixture(scope="class")
    def format_kind(self):
        """The format's kind, registered for the class's tests unless it already is."""
        cls = self.format_cls
        ours = cls.kind not in format_kinds()
        if ours:
            register_format(cls)
        yield cls.kind
        if ours:
            unregister_format(cls.kind)

    @pytest.fixture(scope="class")
    def format_data(self, tmp_path_factory) -> Path:
        """Demo data: 14 experiments (ids 0-13)."""
        root = tmp_path_factory.mktemp("format-data") / "data"
        make_demo_data(root, n=14)
        return root

    @pytest.fixture(scope="class")
    def clean_export(self, format_kind, format_data, tmp_path_factory) -> Path:
        """An uninterrupted export of :attr:`ids`."""
        target = tmp_path_factory.mktemp("clean") / "out"
        self.run_export(format_data, target)
        return target

    @pytest.fixture(scope="class")
    def skipped_export(self, format_kind, format_data, tmp_path_factory) -> Path:
        """An uninterrupted export of :attr:`ids` with experiment 7 failing (skipped)."""
        target = tmp_path_factory.mktemp("skipped") / "out"
        with pytest.warns(guideloom.SkippedDataWarning):
            self.run_export(format_data, target, skips=True)
        return target

    def pytest_generate_tests(self, metafunc) -> None:
        """Parametrize the fault test with this format's points."""
        if "fault_case" in metafunc.fixturenames:
            cases = fault_cases(self.format_cls)
            metafunc.parametrize("fault_case", cases, ids=[case_id(c) for c in cases])

    # --- the tests -----------------------------------------------------------------------
    def check_rows(self, root: Path, data: Path, skips: bool) -> None:
        """The export at ``root`` holds the serial reference's rows, in order."""
        export = guideloom.load_export(root)
        expected = self.expected_rows(data, self.ids, skips)
        kept = [i for i in self.ids if not (skips and i == SKIPPED_ID)]
        assert export.sim_ids.tolist() == kept
        assert len(export) == len(expected)
        for i, want in enumerate(expected):
            got = export[i]
            assert set(got) == set(want), f"row {i}: fields {sorted(got)} != {sorted(want)}"
            for name, value in want.items():
                np.testing.assert_array_equal(np.asarray(got[name]), value,
                                              err_msg=f"row {i}, field {name!r}")
                assert np.asarray(got[name]).dtype == value.dtype, f"row {i}, {name!r}"

    def test_round_trip_matches_a_serial_reference(self, clean_export, format_data):
        manifest = json.loads((clean_export / "export.json").read_text())
        assert manifest["kind"] == self.format_cls.kind
        self.check_rows(clean_export, format_data, skips=False)

    def test_a_skipped_experiment_is_left_out(self, skipped_export, format_data):
        manifest = json.loads((skipped_export / "export.json").read_text())
        assert [s["sim_id"] for s in manifest["skipped"]] == [SKIPPED_ID]
        self.check_rows(skipped_export, format_data, skips=True)

    def test_a_crashed_run_resumes_its_finished_partitions(self, format_data, clean_export,
                                                           tmp_path):
        target = tmp_path / "out"
        with pytest.raises(InjectedFault), crash_at("partition-marked"):
            self.run_export(format_data, target)
        assert not target.exists()  # nothing published
        result = self.run_export(format_data, target)
        assert result.resumed_partitions == 1  # the first partition is not written again
        assert files_of(target) == files_of(clean_export)
        assert stable_manifest(target) == stable_manifest(clean_export)

    def test_a_run_passes_every_fault_point_it_declares(self, format_data, format_kind,
                                                        tmp_path):
        fmt = self.format_cls
        target = tmp_path / "out"
        self.run_export(format_data, target, OLD_IDS)
        with reached_points() as plain:
            self.run_export(format_data, target)
        with reached_points() as skipping, pytest.warns(guideloom.SkippedDataWarning):
            self.run_export(format_data, target, skips=True)
        missing = [p for p, skips in fault_cases(fmt) if p not in (skipping if skips else plain)]
        assert missing == [], f"{fmt.kind}: declared fault points never reached: {missing}"

    def test_a_crash_at_any_fault_point_is_completed_exactly_by_the_next_run(
            self, fault_case, format_data, clean_export, skipped_export, tmp_path):
        point, skips = fault_case
        reference = skipped_export if skips else clean_export
        target = tmp_path / "out"
        self.run_export(format_data, target, OLD_IDS)  # something to replace
        with pytest.raises(InjectedFault) as crashed, crash_at(point):
            if skips:
                with pytest.warns(guideloom.SkippedDataWarning):
                    self.run_export(format_data, target, skips=True)
            else:
                self.run_export(format_data, target)
        assert crashed.value.point == point
        check_complete_or_absent(target, point, [list(OLD_IDS), self.published_ids(skips)])
        if skips:
            with pytest.warns(guideloom.SkippedDataWarning):
                self.run_export(format_data, target, skips=True)
        else:
            self.run_export(format_data, target)
        assert files_of(target) == files_of(reference)
        assert stable_manifest(target) == stable_manifest(reference)
        assert not list(tmp_path.glob(".out.guideloom-*"))  # staging and lock are gone
        assert guideloom.load_export(target).verify().rows == len(self.published_ids(skips))

    def published_ids(self, skips: bool) -> list[Any]:
        """The ids an export of :attr:`ids` publishes."""
        return [i for i in self.ids if not (skips and i == SKIPPED_ID)]

    def test_verify_passes_and_finds_a_flipped_byte(self, clean_export, tmp_path):
        assert guideloom.load_export(clean_export).verify().rows == len(self.ids)
        copy = tmp_path / "copy"
        shutil.copytree(clean_export, copy)
        victim = self.tamper_file(copy)
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 0xFF
        victim.write_bytes(bytes(data))
        with pytest.raises(CorruptExportError):
            guideloom.load_export(copy).verify()

    def test_opening_refuses_an_export_with_a_data_file_removed(self, clean_export, tmp_path):
        copy = tmp_path / "copy"
        shutil.copytree(clean_export, copy)
        victim = self.tamper_file(copy)
        os.unlink(victim)
        with pytest.raises(CorruptExportError) as refused:
            guideloom.load_export(copy)
        assert str(copy) in str(refused.value)


def check_complete_or_absent(target: Path, point: str, allowed: list[list[Any]]) -> None:
    """After a crash: the target holds one of the ``allowed`` exports complete, or (while the
    old one is moved aside) nothing a reader would open."""
    try:
        export = guideloom.load_export(target)
    except IncompleteExportError:
        assert point == "target-moved-aside", f"a crash at {point!r} left a half export"
        assert not target.exists(), f"a crash at {point!r} left a half export"
    else:
        assert export.sim_ids.tolist() in allowed
