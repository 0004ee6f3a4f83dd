#!/usr/bin/env python3
"""Screenshots of the guideloom dashboard page mid-run and of the saved run report.

Runs the demo data (two experiments damaged, so they are skipped) through an export on the
embedded local cluster, holds the export halfway with a ``distributed.Event``, captures the
``/guideloom`` page in headless Chromium, lets the export finish and captures its
``--report`` HTML file:

    python3 cluster/export_screenshots.py docs/guideloom-page.png docs/run-report.png

Needs the Debian package ``chromium`` (or ``GUIDELOOM_CHROMIUM``); see dashboard_screenshot.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import threading
import uuid
import warnings
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
DAMAGED = ("0007.h5", "0031.h5")


def _screenshot_module() -> Any:
    spec = importlib.util.spec_from_file_location("dashboard_screenshot",
                                                  HERE / "dashboard_screenshot.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class HeldFirstRows:
    """The first 100 force rows; experiments from ``held_from`` on wait for the Event ``name``
    (runs on the workers: this script's code travels to them by value)."""

    def __init__(self, held_from: int, name: str) -> None:
        self.held_from, self.name = held_from, name

    def __call__(self, rec: dict[str, Any]) -> dict[str, Any]:
        if rec["_sim_id"] >= self.held_from:
            from distributed import Event

            Event(self.name).wait()
        return {"force": np.asarray(rec["force_data"])[:100]}


def capture(page_png: Path, report_png: Path, n: int = 96, held_from: int = 56) -> str:
    """Write both screenshots; returns the page text read when the first was taken."""
    from distributed import Event

    import guideloom
    from guideloom.cluster import embedded
    from guideloom.cluster.dashboard import page_link
    from guideloom.demo import make_demo_data

    shot = _screenshot_module()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        make_demo_data(data, n=n, layout="loose")
        for name in DAMAGED:  # a damaged HDF5 signature: skipped with on_error="skip"
            (path,) = data.rglob(name)
            with open(path, "r+b") as fh:
                fh.write(b"\xff" * 64)
        running, _ = embedded.embedded_cluster(2)
        gate_name = f"guideloom-screenshot-{uuid.uuid4().hex}"
        gate = Event(gate_name, client=running.client)
        errors: list[BaseException] = []
        report = Path(tmp) / "report.html"

        def export() -> None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    guideloom.export("force-curve", Path(tmp) / "out", kind="zarr",
                                     data_dir=data, client="local:2", partition_size=8,
                                     on_error="skip", report=report,
                                     record_transform=HeldFirstRows(held_from, gate_name))
            except BaseException as exc:
                errors.append(exc)

        job = threading.Thread(target=export, name="screenshot-export")
        job.start()
        try:
            with shot.chromium_page(1300, 1000, timeout=60) as page:
                text = shot.open_and_read(page, page_link(running.dashboard_link),
                                          lambda t: f"{held_from} / {n}" in t, timeout=120)
                shot.screenshot(page, page_png)
        finally:
            gate.set()
            job.join(300)
        if errors:
            raise errors[0]
        with shot.chromium_page(1300, 1000, timeout=60) as page:
            shot.open_and_read(page, report.as_uri(), lambda t: "Placement" in t)
            shot.screenshot(page, report_png, full_page=True)
        embedded.close_cluster()
    return text


def main(argv: list[str] | None = None) -> int:
    """Command line: the two PNG paths."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path, help="PNG of the /guideloom page, mid-run")
    parser.add_argument("report", type=Path, help="PNG of the run report")
    args = parser.parse_args(argv)
    capture(args.page, args.report)
    print(f"wrote {args.page} and {args.report}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
