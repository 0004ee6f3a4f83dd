"""The run summary's byte rates say what they measure (issue 41): "MB/s decoded" is the records as
read and decoded, before transforms; "MB/s produced" the transforms' output handed to the
writer; "MB/s written" what the format wrote. Real exports of the demo data, the expected byte
counts taken from the records themselves (``iter_view``)."""

from __future__ import annotations

import numpy as np

import guideloom
from guideloom.cluster.progress import MB, apply_event, rates
from guideloom.cluster.progress_html import export_html
from guideloom.export.api import export

IDS = [0, 1, 2, 3, 4]


def first_ten_rows(record):
    return {"force": np.asarray(record["force_data"])[:10]}


def test_a_partition_counts_its_decoded_input_and_its_transform_output_apart(small_loose,
                                                                              tmp_path):
    as_read = sum(int(np.asarray(v).nbytes) for r in guideloom.iter_view(
        "force-curve", data_dir=small_loose, sim_ids=IDS)
        for k, v in r.items() if k != "_sim_id")
    produced = sum(first_ten_rows(r)["force"].nbytes for r in guideloom.iter_view(
        "force-curve", data_dir=small_loose, sim_ids=IDS))
    result = export("force-curve", tmp_path / "out", kind="npy", data_dir=small_loose,
                    client="sync", sim_ids=IDS, record_transform=first_ten_rows,
                    partition_size=2)
    summaries = result.summaries
    assert len(summaries) == 3
    assert sum(s["bytes_decoded_input"] for s in summaries) == as_read
    assert sum(s["bytes_decoded"] for s in summaries) == produced
    assert as_read > 10 * produced  # the transform keeps 10 rows: the two rates differ


def test_the_rates_and_the_page_name_each_byte_count_for_what_it_is():
    """Fed one task's event, the rates divide each count by the phase's time: a decoded rate
    from the input bytes, a produced rate from the transform output, never swapped."""
    exports: dict = {}
    apply_event(exports, {"action": "start", "export": "e", "view": "v", "target": "t",
                          "output": "npy", "total": 4, "time": 100.0})
    apply_event(exports, {"action": "phase", "export": "e", "name": "read-transform-write",
                          "time": 100.0})
    apply_event(exports, {"action": "tasks", "export": "e", "experiments": 4, "written": 4,
                          "skipped": 0, "bytes_decoded": 2 * MB, "bytes_decoded_input": 30 * MB,
                          "bytes_written": 1 * MB, "seconds": 10.0, "started": 100.0,
                          "worker": "w", "index": 0, "time": 110.0})
    state = exports["e"]
    r = rates(state, now=110.0)
    assert (r["mb_per_s_decoded"], r["mb_per_s_produced"], r["mb_per_s_written"]) == \
        (3.0, 0.2, 0.1)
    assert (r["workers"]["w"]["mb_per_s_decoded"], r["workers"]["w"]["mb_per_s_produced"]) == \
        (3.0, 0.2)
    page = export_html(state, now=110.0)
    assert "MB/s decoded (input, before transforms)</th><td>3.0<" in page
    assert "MB/s produced (transform output)</th><td>0.2<" in page
