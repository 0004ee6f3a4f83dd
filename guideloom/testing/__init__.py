"""Tools for people who extend guideloom: :class:`FormatTests`, the conformance tests of an
export format (``docs/formats.md``). Importing this needs pytest."""

from guideloom.testing.formats import FormatTests

__all__ = ["FormatTests"]
