"""The tests of the contributors' scripts share the suite's helpers and
fixtures: the repository root goes on the path so that ``tests`` imports."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.conftest import *  # noqa: E402, F403
