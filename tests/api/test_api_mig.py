"""MIG profiles in the API (docs/tenancy.md): SwitchTopology `migProfiles` loads into the core's
TopologySpec.profiles and round-trips through `cluster_documents`; GPUJob's `gpuProfile` reaches
JobSpec.gpu_profile with its slices' milli; a profile the job's model does not declare, and the
other mistakes, are one located line each."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

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
    - {switch: leaf0, nodes: "n[1-2]", gpusPerNode: 8, model: a100-40gb}
    - {switch: leaf0, nodes: "n3", gpusPerNode: 4, model: v100}
  migProfiles: PROFILES
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: a}
spec: {topology: t, taskTypes: ["*"], nodes: "n[1-3]"}
"""
A100 = "{a100-40gb: [1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb]}"


def _gpujob(spec: dict) -> dict:
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob", "metadata": {"name": "j", "namespace": "default"},
            "spec": {"taskType": "train", "gpus": 1, **spec}}  # fmt: skip


def _load(tmp_path: Path, profiles: str, job: dict | None = None) -> object:
    path = tmp_path / "c.yaml"
    text = CLUSTER.replace("PROFILES", profiles)
    path.write_text(text + ("---\n" + yaml.safe_dump(job) if job else ""))
    return load_cluster(path)


def test_profiles_load_and_round_trip(tmp_path: Path) -> None:
    cluster = _load(tmp_path, A100)
    topology = cluster.topology  # type: ignore[attr-defined]
    assert topology.profiles == {"a100-40gb": ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")}
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump_all(cluster_documents(cluster)))  # type: ignore[arg-type]
    assert load_cluster(again).topology == topology


def test_a_declared_profile_passes_with_the_cluster(tmp_path: Path) -> None:
    _load(tmp_path, A100, _gpujob({"gpuModel": "a100-40gb", "gpuProfile": "3g.20gb"}))


CASES = {
    "profile-of-no-group": ("{h100-80gb: [1g.10gb]}", None,
                            "{f}:doc1: spec: migProfiles names h100-80gb, which no node group has"),
    "not-an-nvidia-name": ("{a100-40gb: [half]}", None,
                           "{f}:doc1: spec.migProfiles[\"a100-40gb\"][0]: String should match pattern "
                           "'^[1-7]g\\.[1-9][0-9]{{0,3}}gb(\\+me)?$'"),
    "no-profiles-listed": ("{a100-40gb: []}", None,
                           "{f}:doc1: spec.migProfiles[\"a100-40gb\"]: List should have at least 1 item after validation, not 0"),
    "profile-not-of-the-model": (A100, {"gpuModel": "a100-40gb", "gpuProfile": "1g.10gb"},
                                 "{f}:doc3: spec.gpuProfile: 1g.10gb is not a MIG profile of GPU model 'a100-40gb'; "
                                 "declared: 1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb"),
    "model-without-profiles": (A100, {"gpuModel": "v100", "gpuProfile": "1g.5gb"},
                               "{f}:doc3: spec.gpuProfile: 1g.5gb is not a MIG profile of GPU model 'v100'; "
                               "declared: none (SwitchTopology spec.migProfiles)"),
}  # fmt: skip


@pytest.mark.parametrize("profiles,job,expected", CASES.values(), ids=CASES.keys())
def test_profile_mistakes_are_one_located_line(tmp_path: Path, profiles: str, job: dict | None,
                                               expected: str) -> None:  # fmt: skip
    with pytest.raises(ClusterError) as caught:
        _load(tmp_path, profiles, _gpujob(job) if job else None)
    assert str(caught.value) == expected.format(f=tmp_path / "c.yaml")


# (id, GPUJob spec fields, the refusal)
REFUSED = {
    "with-a-fraction": ({"gpuModel": "a", "gpuProfile": "1g.5gb", "gpuFraction": 0.5},
                        "gpuProfile and gpuFraction exclude each other: set one"),
    "of-two-gpus": ({"gpus": 2, "gpuModel": "a", "gpuProfile": "1g.5gb"},
                    "gpuProfile is a MIG slice of one GPU: set gpus to 1 and gpuModel"),
    "without-a-model": ({"gpuProfile": "1g.5gb"}, "gpuProfile is a MIG slice of one GPU: set gpus to 1 and gpuModel"),
    "eight-slices": ({"gpuModel": "a", "gpuProfile": "8g.80gb"}, "String should match pattern"),
}  # fmt: skip


@pytest.mark.parametrize("spec,reason", REFUSED.values(), ids=REFUSED.keys())
def test_a_gpujob_profile_is_refused_when_it_cannot_be_one(spec: dict, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason.replace("(", r"\(")):
        GPUJob.model_validate(_gpujob(spec))


@pytest.mark.parametrize("profile,milli", [("1g.5gb", 143), ("3g.20gb", 429), ("7g.40gb", 1000)],
                         ids=["one-seventh", "three-sevenths", "whole-gpu"])  # fmt: skip
def test_a_gpujob_profile_reaches_the_core(profile: str, milli: int) -> None:
    job = GPUJob.model_validate(_gpujob({"gpuModel": "a100-40gb", "gpuProfile": profile}))
    spec = job_spec("default/j", job, 0.0)
    assert (spec.gpu_profile, spec.gpu_milli, spec.model) == (profile, milli, "a100-40gb")
