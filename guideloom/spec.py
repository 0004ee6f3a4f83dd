"""Dataset specifications under rddac 2.0's / ddacs 3.2's module name (``rddac.spec``,
``ddacs.spec``): :class:`DatasetSpec`, :data:`RDDAC_SPEC` and :data:`DDACS_SPEC`, defined in
:mod:`guideloom.croissant`."""

from guideloom.croissant import DDACS_SPEC, RDDAC_SPEC, DatasetSpec

__all__ = ["DDACS_SPEC", "RDDAC_SPEC", "DatasetSpec"]
