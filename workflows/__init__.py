"""Runnable workflow files for the demo dataset, and the transforms they reference.

``workflows.demo_transforms`` is imported by ``module:function`` references; run ``guideloom``
from the repository root (or put it on ``PYTHONPATH``) so the driver and every Dask worker can
import it. The workflow files add the repository root with ``python_path = [".."]``.
"""
