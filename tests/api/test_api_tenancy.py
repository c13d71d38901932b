"""Tenants' quotas in the API (docs/tenancy.md): GPUPartition.spec.quotas loads into the core's
QuotaSpec values, round-trips through `cluster_documents`, and every mistake is one located line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gputwin.api.convert import cluster_documents
from gputwin.api.loader import load_cluster
from gputwin.api.problems import ClusterError
from gputwin.core.bounds import MAX_QUOTA_GPUS, MAX_TENANTS
from gputwin.core.model import QuotaSpec

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
spec:
  topology: t
  taskTypes: ["*"]
  nodes: "n[1-2]"
  quotas: QUOTAS
"""


def test_the_sample_loads_as_quota_values() -> None:
    quotas = load_cluster(SAMPLE).partitions[0].quotas
    assert quotas == (
        QuotaSpec("vision", 32, ("alice", "bob"), "lab", 16, None),
        QuotaSpec("speech", 24, ("carol",), "lab", None, 16),
        QuotaSpec("others", 8, ("*",)),
    )


def test_cluster_documents_round_trip_the_quotas(tmp_path: Path) -> None:
    cluster = load_cluster(SAMPLE)
    path = tmp_path / "again.yaml"
    path.write_text(yaml.safe_dump_all(cluster_documents(cluster)))
    assert load_cluster(path).partitions[0].quotas == cluster.partitions[0].quotas


def test_a_partition_without_quotas_writes_none(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CLUSTER.replace("  quotas: QUOTAS\n", ""))
    cluster = load_cluster(path)
    assert cluster.partitions[0].quotas == ()
    assert "quotas" not in cluster_documents(cluster)[2]["spec"]


CASES = {
    "sum-over-gpus": ("[{tenant: x, gpus: 6}, {tenant: y, gpus: 3}]",
                      "{f}:doc2: spec.quotas: guarantees add up to 9 GPUs; the partition has 8"),
    "lending-over-gpus": ("[{tenant: x, gpus: 2, cohort: c, lendingLimit: 3}]",
                          "{f}:doc2: spec.quotas[0]: lendingLimit may not exceed gpus (2)"),
    "limit-without-cohort": ("[{tenant: x, gpus: 2, borrowingLimit: 3}]",
                             "{f}:doc2: spec.quotas[0]: borrowingLimit and lendingLimit need a cohort"),
    "two-quotas-one-tenant": ("[{tenant: x, gpus: 2}, {tenant: x, gpus: 1}]",
                              "{f}:doc2: spec.quotas: tenant 'x' has two quotas"),
    "user-in-two": ("[{tenant: x, gpus: 2, users: [u]}, {tenant: y, gpus: 1, users: [u]}]",
                    "{f}:doc2: spec.quotas: user 'u' is in the quotas of 'x' and 'y'"),
    "negative": ("[{tenant: x, gpus: -1}]",
                 "{f}:doc2: spec.quotas[0].gpus: Input should be greater than or equal to 0"),
    "huge": (f"[{{tenant: x, gpus: {MAX_QUOTA_GPUS + 1}}}]",
             f"{{f}}:doc2: spec.quotas[0].gpus: Input should be less than or equal to {MAX_QUOTA_GPUS}"),
    "bad-tenant-name": ("[{tenant: X_Y, gpus: 1}]", None),
    "too-many": ("[" + ", ".join(f"{{tenant: t{i}, gpus: 0}}" for i in range(MAX_TENANTS + 1)) + "]",
                 f"{{f}}:doc2: spec.quotas: List should have at most {MAX_TENANTS} items after validation, not "
                 f"{MAX_TENANTS + 1}"),
}  # fmt: skip


@pytest.mark.parametrize("quotas,expected", CASES.values(), ids=CASES.keys())
def test_quota_mistakes_are_one_located_line(tmp_path: Path, quotas: str, expected: str | None) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CLUSTER.replace("QUOTAS", quotas))
    with pytest.raises(ClusterError) as caught:
        load_cluster(path)
    text = str(caught.value)
    assert "\n" not in text
    if expected is None:
        assert text.startswith(f"{path}:doc2: spec.quotas[0].tenant: ")
    else:
        assert text == expected.format(f=path)
