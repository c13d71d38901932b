"""`gputwin.api.convert` for policy params: a SchedulingPolicy's params reach the core plugin that
reads them (here QSSF's prior), through the same loader every driver uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputwin.api.convert import policy_spec
from gputwin.api.loader import load_cluster
from gputwin.api.v1alpha1 import SchedulingPolicy
from gputwin.core.model import JobSpec
from gputwin.core.scheduler import Scheduler

CLUSTER = """\
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: t}
spec:
  switches: [{name: spine}, {name: leaf0, parent: spine}, {name: leaf1, parent: spine}]
  nodeGroups: [{switch: leaf0, nodes: "n1", gpusPerNode: 8}, {switch: leaf1, nodes: "n2", gpusPerNode: 8}]
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: learnt}
spec: {topology: t, taskTypes: [a], nodes: "n1", policy: qssf-short}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: plain}
spec: {topology: t, taskTypes: [b], nodes: "n2", policy: qssf-default}
---
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: qssf-short}
spec: {queue: {policy: qssf}, params: {qssf_prior: PRIOR}}
---
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: qssf-default}
spec: {queue: {policy: qssf}}
"""


def _policy(params: dict[str, object]) -> SchedulingPolicy:
    return SchedulingPolicy.model_validate({"apiVersion": "gputwin.io/v1alpha1", "kind": "SchedulingPolicy",
                                            "metadata": {"name": "p"}, "spec": {"params": params}})  # fmt: skip


@pytest.mark.parametrize(
    ("params", "converted"),
    [
        pytest.param({"qssf_prior": 900}, 900.0, id="int"),
        pytest.param({"qssf_prior": "1.5e3"}, 1500.0, id="string"),
        pytest.param({"qssf_prior": 0}, 0.0, id="zero"),
        pytest.param({}, None, id="unset-stays-unset"),
    ],
)
def test_qssf_prior_reaches_the_core_params_as_seconds(
    params: dict[str, object], converted: float | None
) -> None:
    core = policy_spec(_policy(params)).params
    assert core.get("qssf_prior") == converted
    assert type(core.get("qssf_prior")) is type(converted)


@pytest.mark.parametrize(("prior", "key"), [("60", 60.0 * 4), ("36000", 36000.0 * 4)])
def test_each_partition_ranks_an_unknown_job_by_its_own_prior(tmp_path: Path, prior: str, key: float) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER.replace("PRIOR", prior))
    sched = Scheduler(load_cluster(path))
    for task in ("a", "b"):
        sched.submit(JobSpec(f"j-{task}", 0, 10, 4, task), 0)
    keys = {
        name: [part.policy.key(j, 0) for j in part.queued_jobs()] for name, part in sched.partitions.items()
    }
    assert keys == {"learnt": [(key,)], "plain": [(3600.0 * 4,)]}
