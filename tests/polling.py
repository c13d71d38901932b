"""Polling for tests that wait on a real cluster: ask until the answer is there, never sleep blindly."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    timeout: float = 15,
    interval: float = 0.1,
    on_timeout: Callable[[], str] = lambda: "",
) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}; last seen: {last!r}\n{on_timeout()}")
