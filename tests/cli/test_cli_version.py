"""`gputwin --version` names the installed core, and the name matches the module Python really loads.

The same test runs on the editable install (pure Python) and, in .ci/run, on the compiled wheel.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import subprocess
import sys

import pytest

from gputwin import __version__
from gputwin.cli.version import PROBE, core_flavour


def test_version_names_the_core_that_is_imported() -> None:
    proc = subprocess.run([sys.executable, "-m", "gputwin", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = importlib.import_module(PROBE).__file__ or ""
    expected = "pure Python core" if loaded.endswith(".py") else "compiled core"
    assert proc.stdout == f"gputwin, version {__version__} ({expected})\n"


@pytest.mark.parametrize(
    "origin, flavour",
    [("/site/gputwin/core/scheduler.py", "pure Python core"),
     ("/site/gputwin/core/scheduler.cpython-311-x86_64-linux-gnu.so", "compiled core"),
     (None, "pure Python core")],
    ids=["source", "extension", "no-origin"],
)  # fmt: skip
def test_flavour_follows_the_origin_of_the_scheduler_mock_spec(
    origin: str | None, flavour: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = importlib.machinery.ModuleSpec(PROBE, None, origin=origin)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: spec if name == PROBE else None)
    assert core_flavour() == flavour
