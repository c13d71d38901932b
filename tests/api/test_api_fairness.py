"""Fairness in the API (docs/tenancy.md): SchedulingPolicy.spec.fairness loads into the core's
PolicySpec, round-trips through `cluster_documents`, and every mistake is one located line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gputwin.api.convert import cluster_documents
from gputwin.api.loader import load_cluster
from gputwin.api.problems import ClusterError

SAMPLE = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "shared-lab.yaml"
CLUSTER = """\
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: t}
spec:
  switches: [{name: leaf0}]
  nodeGroups: [{switch: leaf0, nodes: "n[1-2]", gpusPerNode: 4}]
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: a}
spec: {topology: t, taskTypes: ["*"], nodes: "n[1-2]", policy: p}
---
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: p}
spec:
  fairness: FAIRNESS
"""


def test_the_sample_loads_as_fairness_values() -> None:
    policy = load_cluster(SAMPLE).partitions[0].policy
    assert (policy.fairness, policy.half_life, dict(policy.weights)) == ("fairshare", 86400.0, {"vision": 2.0})


def test_unset_fairness_is_none(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CLUSTER.replace("  fairness: FAIRNESS\n", "  queue: {policy: fifo}\n"))
    policy = load_cluster(path).partitions[0].policy
    assert (policy.fairness, policy.half_life, dict(policy.weights)) == ("none", 7 * 86400.0, {})
    assert "fairness" not in cluster_documents(load_cluster(path))[1]["spec"]


def test_cluster_documents_round_trip_fairness(tmp_path: Path) -> None:
    cluster = load_cluster(SAMPLE)
    path = tmp_path / "again.yaml"
    path.write_text(yaml.safe_dump_all(cluster_documents(cluster)))
    assert load_cluster(path).partitions[0].policy == cluster.partitions[0].policy


CASES = {
    "unknown-policy": ("{policy: fair}",
                       "{f}:doc3: spec.fairness.policy: Input should be 'none', 'drf' or 'fairshare'"),
    "zero-half-life": ("{policy: fairshare, halfLifeSeconds: 0}",
                       "{f}:doc3: spec.fairness.halfLifeSeconds: Input should be greater than 0"),
    "long-half-life": ("{policy: fairshare, halfLifeSeconds: 1000000000}",
                       "{f}:doc3: spec.fairness.halfLifeSeconds: Input should be less than or equal to 31622400"),
    "zero-weight": ("{policy: drf, weights: {a: 0}}",
                    "{f}:doc3: spec.fairness.weights.a: Input should be greater than 0"),
    "text-weight": ("{policy: drf, weights: {a: lots}}",
                    "{f}:doc3: spec.fairness.weights.a: Input should be a valid number"),
    "unknown-field": ("{policy: drf, halflife: 3}", "{f}:doc3: spec.fairness.halflife: Extra inputs are not permitted"),
}  # fmt: skip


@pytest.mark.parametrize("fairness,expected", CASES.values(), ids=CASES.keys())
def test_fairness_mistakes_are_one_located_line(tmp_path: Path, fairness: str, expected: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CLUSTER.replace("FAIRNESS", fairness))
    with pytest.raises(ClusterError) as caught:
        load_cluster(path)
    assert str(caught.value) == expected.format(f=path)
