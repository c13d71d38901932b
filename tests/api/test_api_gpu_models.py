"""GPU models in the API (docs/tenancy.md): SwitchTopology node groups' `model` and `modelSpeeds`
load into the core's NodeSpec.model and TopologySpec.speeds, round-trip through
`cluster_documents`, GPUJob's `gpuModel` reaches JobSpec.model, and mistakes are located lines."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gputwin.api.convert import cluster_documents
from gputwin.api.loader import load_cluster
from gputwin.api.problems import ClusterError
from gputwin.api.workloads import GPUJob
from gputwin.operator.jobs import job_spec

CLUSTER = """\
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: t}
spec:
  switches: [{name: leaf0}]
  nodeGroups:
    - {switch: leaf0, nodes: "n[1-2]", gpusPerNode: 8, model: A100}
    - {switch: leaf0, nodes: "n3", gpusPerNode: 4, model: V100M32}
  modelSpeeds: SPEEDS
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: a}
spec: {topology: t, taskTypes: ["*"], nodes: "n[1-3]"}
"""


def _load(tmp_path: Path, speeds: str, group: str = "") -> object:
    path = tmp_path / "c.yaml"
    text = CLUSTER.replace("SPEEDS", speeds)
    path.write_text(text.replace("model: A100}", f"model: {group}}}") if group else text)
    return load_cluster(path)


def test_models_and_speeds_load_and_round_trip(tmp_path: Path) -> None:
    cluster = _load(tmp_path, "{A100: 2.5}")
    assert [n.model for n in cluster.topology.nodes] == ["A100", "A100", "V100M32"]  # type: ignore[attr-defined]
    assert cluster.topology.speeds == {"A100": 2.5}  # type: ignore[attr-defined]
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump_all(cluster_documents(cluster)))  # type: ignore[arg-type]
    assert load_cluster(again).topology == cluster.topology  # type: ignore[attr-defined]


CASES = {
    "speed-of-no-group": ("{H100: 3}", "", "{f}:doc1: spec: modelSpeeds names H100, which no node group has"),
    "zero-speed": ("{A100: 0}", "", "{f}:doc1: spec.modelSpeeds.A100: Input should be greater than 0"),
    "fast-speed": ("{A100: 101}", "", "{f}:doc1: spec.modelSpeeds.A100: Input should be less than or equal to 100"),
    "model-with-colon": ("{}", "gpu:a100",
                         "{f}:doc1: spec.nodeGroups[0].model: String should match pattern '^[A-Za-z0-9][A-Za-z0-9._-]*$'"),
}  # fmt: skip


@pytest.mark.parametrize("speeds,group,expected", CASES.values(), ids=CASES.keys())
def test_model_mistakes_are_one_located_line(tmp_path: Path, speeds: str, group: str, expected: str) -> None:
    with pytest.raises(ClusterError) as caught:
        _load(tmp_path, speeds, group)
    assert str(caught.value) == expected.format(f=tmp_path / "c.yaml")


def test_a_gpujob_asks_for_its_model() -> None:
    job = GPUJob.model_validate({"apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob", "metadata": {"name": "j"},
                                 "spec": {"taskType": "train", "gpus": 2, "gpuModel": "A100"}})  # fmt: skip
    assert job_spec("default/j", job, 0.0).model == "A100"
