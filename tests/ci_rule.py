"""The one rule for tests that need something outside Python (a control plane, SLURM, Chromium):
where it is missing they skip with the reason shown, except under CI (`CI` set, e.g. `CI=true`),
where `.ci/run` installs and starts everything, so a missing piece is a broken build, not a skip."""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def skip_or_fail(reason: str) -> None:
    if in_ci():
        pytest.fail(f"{reason} (CI is set, so this is an error, not a skip)", pytrace=False)
    pytest.skip(reason)
