"""Fairshare usage kept in growing units (gputwin.core.fairness): across thousands of half-lives
(the epoch rebased many times over) it still follows the exponential decay, and never overflows."""

from __future__ import annotations

import math

import pytest

from cluster_builders import job_state

from gputwin.core.fairness import Fairness


def test_usage_follows_the_decay_across_many_rebases() -> None:
    fair, job = Fairness("fairshare", 8, half_life=10.0), job_state("a")
    rate = math.log(2.0) / 10.0
    expected, now = 0.0, 0.0
    for step in range(400):  # 400 changes 50 s apart: 2,000 half-lives, G would reach 2**2000
        held = fair.held.get("a", 0)
        keep = math.exp(-rate * 50.0)
        expected = expected * keep + held * (1.0 - keep) / rate
        now += 50.0
        fair.at(now)
        fair.change(now, job, 1 if step % 3 else -1 if held else 2)
        assert fair.usage("a", now) == pytest.approx(expected, rel=1e-9)
    assert fair._epoch > 0.0  # rebased on the way
    assert math.isfinite(fair.key("a"))
    # asked far ahead of the epoch (a read: nothing rebased), usage has decayed to GPUs held / rate
    assert fair.usage("a", now + 1e6) == pytest.approx(fair.held["a"] / rate)
