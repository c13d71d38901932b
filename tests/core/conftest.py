"""The core's unit-test builders (tests/cluster_builders.py, where the layout notation is
described), exposed as fixtures `topology_spec`, `ledger`, `cluster` and `jobs`."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cluster_builders import build_cluster, build_jobs, build_ledger, build_topology_spec

from gputwin.core.ledger import Ledger
from gputwin.core.model import ClusterSpec, JobSpec, TopologySpec


@pytest.fixture(scope="session")
def topology_spec() -> Callable[..., TopologySpec]:
    return build_topology_spec


@pytest.fixture(scope="session")
def ledger() -> Callable[..., Ledger]:
    return build_ledger


@pytest.fixture(scope="session")
def cluster() -> Callable[..., ClusterSpec]:
    return build_cluster


@pytest.fixture(scope="session")
def jobs() -> Callable[..., list[JobSpec]]:
    return build_jobs
