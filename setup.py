"""Which core a build gets: compiled by mypyc where it can be, else pure Python (the rest: pyproject.toml).

A wheel (`pip install .`, `pip wheel .`) compiles gputwin.core, the runtime's loop, heap and clocks,
the simulator's engine, metrics and finished-job columns and the twin's forecast draws, adoption and summary
with mypyc to C extensions: the same typed source, faster (README, Performance). If mypyc or the C compiler fails, the build goes on pure Python and says so in one line.
The editable development install (PEP 660 `build_editable`, which setuptools.build_meta runs as the
`editable_wheel` command) stays pure Python, so an edited file takes effect at once. GPUTWIN_COMPILE=1
forces compiling (a failure fails the build; an editable build refuses it), GPUTWIN_COMPILE=0 forces
pure Python. pip shows the build's output only with -v: `gputwin --version` says which core is installed.
"""

from __future__ import annotations

import os
import sys
from glob import glob
from importlib.machinery import EXTENSION_SUFFIXES
from typing import Any

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext

COMPILED = sorted(glob("src/gputwin/core/*.py")) + [
    "src/gputwin/runtime/loop.py", "src/gputwin/runtime/virtual.py", "src/gputwin/runtime/clock.py",
    "src/gputwin/runtime/watch.py",
    "src/gputwin/sim/engine.py", "src/gputwin/sim/metrics.py",
    # The finished-job log: compiled, it reads a compiled JobState's fields directly (issue 13).
    "src/gputwin/sim/finished.py", "src/gputwin/sim/columns.py",
    # A forecast's per-sample draws (one loop over floats) and adoption of the running jobs (issue 15).
    "src/gputwin/twin/draws.py", "src/gputwin/twin/adoption.py",
    # A forecast's summary: its per-job quantiles over the samples, run after every replay (issue 15).
    "src/gputwin/twin/quantiles.py",
]  # fmt: skip
NOTICE = "gputwin: building the pure Python core (slower, same results): the mypyc build failed: {}"


class CoreDistribution(Distribution):
    """Has extension modules until build_ext falls back to pure Python (then the wheel is py3-none-any)."""

    compiled_core: bool | None = None  # None: not decided yet

    def editable(self) -> bool:
        """PEP 660's build_editable runs setup.py as `editable_wheel` (setuptools.build_meta)."""
        return "editable_wheel" in self.commands

    def has_ext_modules(self) -> bool:
        return not self.editable() and self.compiled_core is not False

    def run_commands(self) -> None:
        if self.editable() and os.environ.get("GPUTWIN_COMPILE") == "1":
            # Compiled modules in an editable install land in src/ and would shadow every later edit.
            sys.exit("error: GPUTWIN_COMPILE=1: an editable install stays pure Python; build a wheel instead")
        super().run_commands()


class build_core(build_ext):
    """Compiles the core with mypyc, or decides on pure Python: once per build, whoever asks first."""

    distribution: CoreDistribution

    def finalize_options(self) -> None:
        dist = self.distribution
        if dist.compiled_core is None:  # bdist_wheel and install_lib finalize this command again
            dist.compiled_core = self._generate()
        super().finalize_options()

    def run(self) -> None:
        if self.distribution.compiled_core:
            try:
                super().run()  # a second run (install_lib's) finds every extension up to date
                return
            except Exception as exc:  # no compiler, no Python headers, a compiler error
                self._fall_back(exc)
        self._discard_outputs()

    def _generate(self) -> bool:
        """mypyc: the typed modules of COMPILED to C, as the extensions this command builds."""
        forced = os.environ.get("GPUTWIN_COMPILE", "")
        if forced == "0" or self.distribution.editable():
            return False
        try:
            from mypyc.build import mypycify

            modules = [p for p in COMPILED if not p.endswith("__init__.py")]
            self.distribution.ext_modules = mypycify(modules, opt_level="3")
        except (Exception, SystemExit) as exc:  # mypyc reports type errors by exiting
            self._fall_back(exc)
        return bool(self.distribution.ext_modules)

    def _fall_back(self, exc: BaseException) -> None:
        if os.environ.get("GPUTWIN_COMPILE") == "1":
            raise exc
        self.distribution.compiled_core = False
        self.distribution.ext_modules = []
        print(NOTICE.format(_one_line(exc)), file=sys.stderr, flush=True)

    def _discard_outputs(self) -> None:
        """Extensions left in build/ by this build or an earlier one would shadow the pure modules."""
        for path in glob(os.path.join(self.build_lib, "**", "*"), recursive=True):
            if path.endswith(tuple(EXTENSION_SUFFIXES)):
                os.remove(path)


class bdist_core_wheel(bdist_wheel):
    """Builds first, so a pure Python fallback is tagged and laid out as a pure wheel."""

    distribution: CoreDistribution

    def run(self) -> None:
        if not self.skip_build:
            self.run_command("build")
        self.root_is_pure = not self.distribution.has_ext_modules()
        super().run()


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, SystemExit) and not isinstance(exc.code, str):
        return f"mypyc stopped with status {exc.code} (its messages are above)"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


setup_args: dict[str, Any] = {"distclass": CoreDistribution,
                              "cmdclass": {"build_ext": build_core, "bdist_wheel": bdist_core_wheel}}
setup(**setup_args)
