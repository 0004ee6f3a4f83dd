# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier path of the ``mlcroissant.Dataset`` face, defined in
:mod:`guideloom.compat.mlc`."""

from guideloom.compat.mlc import LOOSE_SUBDIR, local_mapping, mlcroissant_dataset

__all__ = ["LOOSE_SUBDIR", "local_mapping", "mlcroissant_dataset"]
