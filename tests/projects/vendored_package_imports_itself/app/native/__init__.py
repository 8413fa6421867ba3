import sys
from pathlib import Path


def ensure_native_path():
    root = str(Path(__file__).resolve().parent)
    if root not in sys.path:
        sys.path.insert(0, root)
