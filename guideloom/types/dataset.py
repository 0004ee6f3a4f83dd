# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for the dataset bases."""

from guideloom.storage.abstract import (
    DatasetAbstract,
    DatasetAsyncReaderAbstract,
    DatasetSyncReaderAbstract,
)

__all__ = ["DatasetAbstract", "DatasetAsyncReaderAbstract", "DatasetSyncReaderAbstract"]
