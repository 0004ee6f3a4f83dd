"""The package version, in one place: ``guideloom.__version__`` imports it and
``pyproject.toml`` reads it (``[tool.setuptools.dynamic]``) when the wheel is built."""

__version__ = "0.1.0"
