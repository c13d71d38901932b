"""Optional compiled build of the scheduling core (everything else lives in pyproject.toml).

With GPUTWIN_COMPILE=1, mypyc compiles gputwin.core and the simulator's engine and metrics to C
extensions: the same typed source, about three times faster (see README, Performance). Without it
the package is pure Python, which is what development and the test suite use, so an edited source
file takes effect at once.
"""

import os
from glob import glob

from setuptools import setup

COMPILED = sorted(glob("src/gputwin/core/*.py")) + [
    "src/gputwin/runtime/loop.py", "src/gputwin/runtime/virtual.py", "src/gputwin/runtime/clock.py",
    "src/gputwin/sim/engine.py", "src/gputwin/sim/metrics.py",
]

ext_modules = []
if os.environ.get("GPUTWIN_COMPILE") == "1":
    from mypyc.build import mypycify

    ext_modules = mypycify([p for p in COMPILED if not p.endswith("__init__.py")], opt_level="3")

setup(ext_modules=ext_modules)
