"""Make plain ``pytest`` see the project's ``platform`` package.

pytest imports the stdlib ``platform`` module before the project root is on ``sys.path``; drop
it so the next ``import platform`` finds the package (which re-exports every stdlib name).
``python -m pytest`` works without this.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if not hasattr(sys.modules.get("platform"), "__path__"):
    sys.modules.pop("platform", None)
    importlib.import_module("platform")
