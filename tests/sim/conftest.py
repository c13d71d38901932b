"""Builders for the simulator tests, exposed as fixtures `sim_cluster` and `sim_jobs`.

They are the core tests' builders (tests/cluster_builders.py, which describes the layout notation:
nested dicts of switches under "root", lists of per-node GPU counts on leaves; nodes are n0, n1,
... in declaration order)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cluster_builders import build_cluster, build_jobs

from gputwin.core.model import ClusterSpec, JobSpec


@pytest.fixture(scope="session")
def sim_cluster() -> Callable[..., ClusterSpec]:
    return build_cluster


@pytest.fixture(scope="session")
def sim_jobs() -> Callable[..., list[JobSpec]]:
    return build_jobs
