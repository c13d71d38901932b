"""Per-model quotas in the API (docs/tenancy.md "GPU models"): `gpus` as a mapping of GPU model to
GPUs loads into QuotaSpec.models (its "*" entry the plain guarantee), round-trips through
`cluster_documents`, and every mistake (a model no node has, a model's guarantees over its GPUs, a
malformed mapping) is one located line. A plain number keeps its meaning (test_api_tenancy)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gputwin.api.convert import cluster_documents
from gputwin.api.loader import load_cluster
from gputwin.api.problems import ClusterError
from gputwin.core.bounds import MAX_QUOTA_GPUS
from gputwin.core.model import QuotaSpec

CLUSTER = """\
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: t}
spec:
  switches: [{name: leaf0}]
  nodeGroups:
  - {switch: leaf0, nodes: "a[1-2]", gpusPerNode: 4, model: a100}
  - {switch: leaf0, nodes: "h1", gpusPerNode: 4, model: h100}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: a}
spec:
  topology: t
  taskTypes: ["*"]
  nodes: "a[1-2],h1"
  quotas: QUOTAS
"""


def _load(tmp_path: Path, quotas: str):
    path = tmp_path / "c.yaml"
    path.write_text(CLUSTER.replace("QUOTAS", quotas))
    return load_cluster(path), path


LOADS = [
    ("per-model", "[{tenant: x, gpus: {a100: 4, h100: 2}}]", QuotaSpec("x", 0, models={"a100": 4, "h100": 2})),
    ("star-is-the-plain-guarantee", "[{tenant: x, gpus: {a100: 4, '*': 2}}]", QuotaSpec("x", 2, models={"a100": 4})),
    ("limits-stay-numbers", "[{tenant: x, gpus: {a100: 4}, cohort: c, borrowingLimit: 2, lendingLimit: 3}]",
     QuotaSpec("x", 0, (), "c", 2, 3, {"a100": 4})),
    ("a-number-is-any-model", "[{tenant: x, gpus: 5}]", QuotaSpec("x", 5)),
]  # fmt: skip


@pytest.mark.parametrize("quotas,expected", [c[1:] for c in LOADS], ids=[c[0] for c in LOADS])
def test_per_model_gpus_load_and_round_trip(tmp_path: Path, quotas: str, expected: QuotaSpec) -> None:
    cluster, _ = _load(tmp_path, quotas)
    assert cluster.partitions[0].quotas == (expected,)
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump_all(cluster_documents(cluster)))
    assert load_cluster(again).partitions[0].quotas == (expected,)


CASES = {
    "unknown-model": ("[{tenant: x, gpus: {v100: 1}}]",
                      "{f}:doc2: spec.quotas[0].gpus.v100: no node group of the SwitchTopology has GPU model "
                      "'v100'; declared: a100, h100"),
    "model-over-its-gpus": ("[{tenant: x, gpus: {h100: 3}}, {tenant: y, gpus: {h100: 2}}]",
                            "{f}:doc2: spec.quotas: guarantees of model 'h100' add up to 5 GPUs; the partition "
                            "has 4"),
    "all-over-gpus": ("[{tenant: x, gpus: {a100: 8, '*': 4}}, {tenant: y, gpus: 1}]",
                      "{f}:doc2: spec.quotas: guarantees add up to 13 GPUs; the partition has 12"),
    "empty-mapping": ("[{tenant: x, gpus: {}}]", "{f}:doc2: spec.quotas[0].gpus: gpus names 1 to 64 GPU models"),
    "negative-model": ("[{tenant: x, gpus: {a100: -1}}]",
                       "{f}:doc2: spec.quotas[0].gpus: a100: Input should be greater than or equal to 0"),
    "huge-model": (f"[{{tenant: x, gpus: {{a100: {MAX_QUOTA_GPUS + 1}}}}}]",
                   f"{{f}}:doc2: spec.quotas[0].gpus: a100: Input should be less than or equal to {MAX_QUOTA_GPUS}"),
    "text-count": ("[{tenant: x, gpus: {a100: '4'}}]",
                   "{f}:doc2: spec.quotas[0].gpus: a100: Input should be a valid integer"),
    "not-a-count": ("[{tenant: x, gpus: [4]}]",
                    "{f}:doc2: spec.quotas[0].gpus: a number of GPUs, or GPUs per GPU model (a100: 16)"),
    "lending-over-largest": ("[{tenant: x, gpus: {a100: 2, h100: 3}, cohort: c, lendingLimit: 4}]",
                             "{f}:doc2: spec.quotas[0]: lendingLimit may not exceed gpus (3)"),
}  # fmt: skip


@pytest.mark.parametrize("quotas,expected", CASES.values(), ids=CASES.keys())
def test_per_model_quota_mistakes_are_one_located_line(tmp_path: Path, quotas: str, expected: str) -> None:
    with pytest.raises(ClusterError) as caught:
        _load(tmp_path, quotas)
    text = str(caught.value)
    path = tmp_path / "c.yaml"
    assert text == expected.format(f=path)
