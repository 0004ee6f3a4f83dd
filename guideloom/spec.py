# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""Dataset specifications under rddac 2.0's / ddacs 3.2's module name (``rddac.spec``,
``ddacs.spec``), defined in :mod:`guideloom.select.manifest`."""

from guideloom.select.manifest import DDACS_SAMPLE_SIM_ID, DDACS_SPEC, RDDAC_SPEC, DatasetSpec

__all__ = ["DDACS_SAMPLE_SIM_ID", "DDACS_SPEC", "RDDAC_SPEC", "DatasetSpec"]
