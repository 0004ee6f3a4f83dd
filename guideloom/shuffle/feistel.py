# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.shuffle.FeistelShuffler`."""

from guideloom.shuffle import FeistelShuffler

__all__ = ["FeistelShuffler"]
