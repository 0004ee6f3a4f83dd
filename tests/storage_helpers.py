"""Record transforms for storage exports (importable on Dask workers)."""

from __future__ import annotations

import numpy as np

import guideloom


def total_force_tokens(rec):
    """One stream element per force sample: total force and the experiment id."""
    force = np.asarray(rec["force_data"])[:, 7]
    return {"force": force.astype("<f4"),
            "document_ids": np.full(len(force), rec["_sim_id"], dtype="<u4")}


def doc_dataset(data_dir):
    ds = guideloom.load(data_dir=data_dir)
    return guideloom.add_view(ds, "force-signals-doc", fields={
        "force": "force_data", "geometry": "process-parameters/geometry"})


def document_or_fail(rec):
    """A whole document per experiment; ids 2, 3 and 6 fail."""
    if rec["_sim_id"] in (2, 3, 6):
        raise ValueError("rejected")
    return {"sim": rec["_sim_id"], "geometry": rec["geometry"], "n": len(rec["force"])}
