# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""Dataset specifications under rddac 2.0's / ddacs 3.2's module name (``rddac.spec``,
``ddacs.spec``), defined in :mod:`guideloom.select.presets`."""

from guideloom.select.presets import DDACS_SAMPLE_SIM_ID, DDACS_SPEC, RDDAC_SPEC, DatasetSpec

__all__ = ["DDACS_SAMPLE_SIM_ID", "DDACS_SPEC", "RDDAC_SPEC", "DatasetSpec"]
