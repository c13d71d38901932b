"""Let `python -m pytest` at the repo root work from an uninstalled checkout.

Installed (wheel or strict editable), setuptools maps the top-level operator/ and adapters/
folders into the gputwin package. From a bare checkout we do the same mapping by hand: src/ goes
on sys.path and the repo root joins gputwin's package path, so `gputwin.operator` is the
operator/ folder. Nothing here makes `import operator` find our folder: it has no __init__.py.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent

try:
    import gputwin.adapters  # noqa: F401
    import gputwin.operator  # noqa: F401
except ModuleNotFoundError:
    sys.path.insert(0, str(ROOT / "src"))
    import gputwin

    gputwin.__path__.append(str(ROOT))
