"""Puts tests/ on sys.path, so that the helpers shared by tests of several directories import by name
(`browser`: headless Chromium over the DevTools protocol)."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
