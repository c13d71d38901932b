"""Builders for the simulator tests, exposed as fixtures `sim_cluster` and `sim_jobs`.

Layout notation as in tests/core/conftest.py: nested dicts of switches under "root", lists of
per-node GPU counts on leaves; nodes are n0, n1, ... in declaration order."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest

from gputwin.core.model import (
    ClusterSpec,
    JobSpec,
    NodeSpec,
    OverheadModel,
    PartitionSpec,
    PolicySpec,
    SwitchSpec,
    TopologySpec,
)

Layout = Mapping[str, Any]
NO_OVERHEAD = OverheadModel()
DEFAULT_POLICY = PolicySpec()


def build_topology_spec(layout: Layout, overhead: OverheadModel = NO_OVERHEAD) -> TopologySpec:
    switches = [SwitchSpec("root")]
    nodes: list[NodeSpec] = []

    def walk(parent: str, sub: Layout) -> None:
        for name, child in sub.items():
            switches.append(SwitchSpec(name, parent))
            if isinstance(child, Mapping):
                walk(name, child)
            else:
                for gpus in child:
                    nodes.append(NodeSpec(f"n{len(nodes)}", gpus, name))

    walk("root", layout)
    return TopologySpec("t", tuple(switches), tuple(nodes), overhead)


def build_cluster(
    layout: Layout,
    policy: PolicySpec = DEFAULT_POLICY,
    *,
    overhead: OverheadModel = NO_OVERHEAD,
    partitions: Iterable[tuple[str, Iterable[int], Iterable[str]]] | None = None,
) -> ClusterSpec:
    topo = build_topology_spec(layout, overhead)
    names = [n.name for n in topo.nodes]
    if partitions is None:
        partitions = [("p", range(len(names)), ("*",))]
    parts = tuple(
        PartitionSpec(name, tuple(names[i] for i in idx), tuple(types), policy)
        for name, idx, types in partitions
    )
    return ClusterSpec(topo, parts)


def build_jobs(rows: Iterable[tuple]) -> list[JobSpec]:
    """Jobs from (id, submit, duration, gpus[, extra fields dict]) rows, `seq` in row order."""
    out = []
    for seq, row in enumerate(rows):
        job_id, submit, duration, gpus, *rest = row
        extra = dict(rest[0]) if rest else {}
        out.append(JobSpec(job_id, submit, duration, gpus, extra.pop("task_type", "x"), seq=seq, **extra))
    return sorted(out, key=lambda j: (j.submit, j.seq))


@pytest.fixture(scope="session")
def sim_cluster() -> Callable[..., ClusterSpec]:
    return build_cluster


@pytest.fixture(scope="session")
def sim_jobs() -> Callable[..., list[JobSpec]]:
    return build_jobs
