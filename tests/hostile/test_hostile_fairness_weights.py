"""Fairness weights naming a tenant no partition's quotas declare (gputwin.api.validate): a typo
would silently weigh 1, so it is refused as one located line (exit 2 through `gputwin simulate`);
where the policy orders a partition without quotas, its users are its tenants and any name goes."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gputwin.api.loader import load_cluster
from gputwin.api.problems import ClusterError
from gputwin.api.resources import demo_trace_path
from gputwin.cli.main import cli

CLUSTER = """\
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: t}
spec:
  switches: [{name: leaf0}]
  nodeGroups: [{switch: leaf0, nodes: "n[1-4]", gpusPerNode: 4}]
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: a}
spec:
  topology: t
  taskTypes: ["*"]
  nodes: "n[1-2]"
  policy: p
  quotas: [{tenant: vision, users: ["*"], gpus: 4}, {tenant: speech, users: [carol], gpus: 4}]
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: b}
spec: {topology: t, taskTypes: [extra], nodes: "n[3-4]", policy: OTHER}
---
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: p}
spec:
  fairness: {policy: fairshare, weights: WEIGHTS}
---
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: q}
spec: {queue: {policy: fifo}}
"""
NO_SUCH = "no such tenant: no partition's spec.quotas declares it; declared: speech, vision"

# id -> (weights of policy p, the policy of the quota-less partition b, the error or None)
CASES = {
    "known-tenants": ("{vision: 2, speech: 1}", "q", None),
    "typo": ("{vison: 2}", "q", "{f}:doc4: spec.fairness.weights.vison: " + NO_SUCH),
    "two-unknown-one-line-each": ("{x: 1, vision: 2, a: 3}", "q",
                                  "{f}:doc4: spec.fairness.weights.a: " + NO_SUCH + "\n"
                                  "{f}:doc4: spec.fairness.weights.x: " + NO_SUCH),
    "a-user-name-where-users-are-tenants": ("{carol: 2}", "p", None),  # b has no quotas and uses p
}  # fmt: skip


def write(tmp_path: Path, weights: str, other: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(CLUSTER.replace("WEIGHTS", weights).replace("OTHER", other))
    return path


@pytest.mark.parametrize("weights,other,expected", CASES.values(), ids=CASES.keys())
def test_weights_must_name_a_tenant(tmp_path: Path, weights: str, other: str, expected: str | None) -> None:
    path = write(tmp_path, weights, other)
    if expected is None:
        load_cluster(path)
        return
    with pytest.raises(ClusterError) as caught:
        load_cluster(path)
    assert str(caught.value) == expected.format(f=path)


def test_simulate_refuses_an_unknown_tenant_in_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "{vison: 2}", "q")
    result = CliRunner().invoke(cli, ["simulate", "--trace", str(demo_trace_path()), "--cluster", str(path)])
    assert result.exit_code == 2
    assert result.stderr == f"error: {path}:doc4: spec.fairness.weights.vison: {NO_SUCH}\n"
