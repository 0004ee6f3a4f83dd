"""Compatibility stub: the CRC-32 checks of zip members now live in
:mod:`guideloom.read.zipmember` (one check and one verdict cache for local and remote members).

This name is that module itself (not a copy of its names), so that replacing one of its
functions here (``monkeypatch.setattr(zipcrc, "member_crc", ...)``) replaces the one the
checks call.
"""

from __future__ import annotations

import sys

from guideloom.read import zipmember

sys.modules[__name__] = zipmember
