"""The kernel-library tests: `refs` (independent float64 references) is importable from here."""
import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
