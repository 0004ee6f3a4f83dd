"""``guideloom preprocess``: rddac 2.0's reference cleaning of the raw measurements, on Dask.

The stages (``force``, ``sheet``, ``oil`` here; ``pointcloud`` in its own package) turn one raw
experiment into rddac's processed layout; :mod:`guideloom.preprocess.job` runs them over a
selection, one ``<out>/<id>.h5`` each, published complete or absent.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)
