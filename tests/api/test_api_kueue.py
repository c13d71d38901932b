"""A cluster's tenancy as Kueue objects (gputwin.api.kueue, docs/tenancy.md "Exported to Kueue"):
the bundled shared-lab example object by object, GPU models as flavors with the quotas split over
them, `--namespace`, fairness weights, what does not map as notes, and every refusal located."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gputwin.api.kueue import API_VERSION, KueueExport, KueueExportError, export_kueue, render_yaml, split
from gputwin.api.loader import load_cluster, read_documents

ROOT = Path(__file__).resolve().parents[2]
SHARED_LAB = ROOT / "manifests" / "examples" / "shared-lab.yaml"
LIVE_LAB = ROOT / "tests" / "slurm" / "data" / "shared-lab-live.yaml"
DOCS = ROOT / "docs" / "tenancy.md"

# One partition of two GPU models (a100: 2 nodes x 8, v100: 6 nodes x 8 = 16 + 48 GPUs).
TWO_MODELS = """\
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: t}
spec:
  switches: [{name: leaf0}]
  nodeGroups:
    - {switch: leaf0, nodes: "a[1-2]", gpusPerNode: 8, model: MODEL}
    - {switch: leaf0, nodes: "v[1-6]", gpusPerNode: 8, model: v100}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: PART}
spec:
  topology: t
  taskTypes: ["*"]
  nodes: "a[1-2],v[1-6]"
  policy: p
  quotas: QUOTAS
---
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: p}
spec:
  queue: {policy: QUEUE}
  fairness: {policy: FAIRNESS}
"""
TWO_QUOTAS = ("[{tenant: vision, gpus: 32, cohort: lab, borrowingLimit: 10, lendingLimit: 5},"
              " {tenant: speech, gpus: 16, cohort: lab}]")  # fmt: skip


def write(tmp_path: Path, quotas: str = TWO_QUOTAS, *, model: str = "a100", part: str = "train",
          queue: str = "fifo", fairness: str = "none") -> Path:  # fmt: skip
    text = TWO_MODELS.replace("QUOTAS", quotas).replace("MODEL", model).replace("PART", part)
    path = tmp_path / "cluster.yaml"
    path.write_text(text.replace("QUEUE", queue).replace("FAIRNESS", fairness))
    return path


def export(path: Path, namespace: str | None = None) -> KueueExport:
    where = {f"{d.resource.kind}/{d.resource.metadata.name}": d.where for d in read_documents(path)}
    return export_kueue(load_cluster(path), namespace=namespace, where=where, source=str(path))


def named(result: KueueExport, kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in result.objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def gpu_quotas(queue: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """flavor -> its nvidia.com/gpu resource entry."""
    (group,) = queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["nvidia.com/gpu"]
    return {f["name"]: {k: v for k, v in f["resources"][0].items() if k != "name"} for f in group["flavors"]}


def test_shared_lab_example_object_by_object() -> None:
    result = export(SHARED_LAB)
    kinds = [(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in result.objects]
    assert kinds == [
        ("ResourceFlavor", "shared", None), ("Cohort", "lab.shared", None),
        ("ClusterQueue", "vision.shared", None), ("ClusterQueue", "speech.shared", None),
        ("ClusterQueue", "others.shared", None),
        ("LocalQueue", "shared", "vision"), ("LocalQueue", "shared", "speech"), ("LocalQueue", "shared", "others"),
    ]  # fmt: skip
    assert {o["apiVersion"] for o in result.objects} == {API_VERSION}
    assert named(result, "ResourceFlavor", "shared")["spec"] == {
        "nodeLabels": {"gputwin.io/partition": "shared"}
    }
    vision = named(result, "ClusterQueue", "vision.shared")["spec"]
    assert gpu_quotas(named(result, "ClusterQueue", "vision.shared")) == {
        "shared": {"nominalQuota": 32, "borrowingLimit": 16}
    }
    assert vision["cohortName"] == "lab.shared"
    assert vision["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "vision"}}
    assert vision["queueingStrategy"] == "BestEffortFIFO"  # fifo with backfill: later jobs may pass
    assert vision["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"}
    assert vision["fairSharing"] == {"weight": 2}
    assert gpu_quotas(named(result, "ClusterQueue", "speech.shared")) == {
        "shared": {"nominalQuota": 24, "lendingLimit": 16}
    }
    others = named(result, "ClusterQueue", "others.shared")["spec"]
    assert "cohortName" not in others and "preemption" not in others  # no cohort: nothing to reclaim
    assert gpu_quotas(named(result, "ClusterQueue", "others.shared")) == {"shared": {"nominalQuota": 8}}
    local = [
        (o["metadata"]["namespace"], o["spec"]["clusterQueue"])
        for o in result.objects
        if o["kind"] == "LocalQueue"
    ]
    assert local == [("vision", "vision.shared"), ("speech", "speech.shared"), ("others", "others.shared")]
    assert result.namespaces == ("vision", "speech", "others")


@pytest.mark.parametrize(
    ("needle", "present"),
    [
        ("fairshare's halfLifeSeconds does not map", True),
        ("checkpointSeconds does not map", True),
        ("placement consolidate does not map", True),
        ("quotas[].users do not map", True),
        ("gpuFraction does not map", True),
        ("queue policy", False),  # fifo maps
        ("migProfiles", False),  # none declared
        ("split over GPU models", False),  # one partition without models
    ],
    ids=lambda v: str(v)[:24],
)
def test_shared_lab_notes_say_what_does_not_map(needle: str, present: bool) -> None:
    assert any(needle in note for note in export(SHARED_LAB).notes) is present


def test_two_models_make_two_flavors_and_split_the_quotas(tmp_path: Path) -> None:
    result = export(write(tmp_path))
    assert named(result, "ResourceFlavor", "a100.train")["spec"]["nodeLabels"] == {
        "gputwin.io/partition": "train",
        "gputwin.io/gpu-model": "a100",
    }
    # 32 over 16:48 GPUs = 8 + 24; borrowing 10 = 2.5 + 7.5 -> 3 + 7 (tie to the first); lending 5 -> 1 + 4.
    assert gpu_quotas(named(result, "ClusterQueue", "vision.train")) == {
        "a100.train": {"nominalQuota": 8, "borrowingLimit": 3, "lendingLimit": 1},
        "v100.train": {"nominalQuota": 24, "borrowingLimit": 7, "lendingLimit": 4},
    }
    assert gpu_quotas(named(result, "ClusterQueue", "speech.train")) == {
        "a100.train": {"nominalQuota": 4},
        "v100.train": {"nominalQuota": 12},
    }
    assert any("split over GPU models a100, v100" in n for n in result.notes)


def test_model_names_become_lower_case_flavor_names_and_keep_their_label(tmp_path: Path) -> None:
    result = export(write(tmp_path, model="V100M32_x"))
    flavor = named(result, "ResourceFlavor", "v100m32-x.train")
    assert flavor["spec"]["nodeLabels"]["gputwin.io/gpu-model"] == "V100M32_x"


@pytest.mark.parametrize(
    ("fairness", "weight_key", "note"),
    [
        ("none", False, None),
        ("drf", True, "drf -> Kueue's fair sharing"),
        ("fairshare", True, "halfLifeSeconds"),
    ],
    ids=["none", "drf", "fairshare"],
)
def test_fairness_becomes_fair_sharing_weights(tmp_path: Path, fairness: str, weight_key: bool,
                                              note: str | None) -> None:  # fmt: skip
    result = export(write(tmp_path, fairness=fairness))
    assert ("fairSharing" in named(result, "ClusterQueue", "vision.train")["spec"]) is weight_key
    assert (
        any(note in n for n in result.notes) if note else not any("fair sharing" in n for n in result.notes)
    )


def test_fractional_weights_are_quantity_strings(tmp_path: Path) -> None:
    path = write(tmp_path, fairness="fairshare")
    path.write_text(path.read_text().replace("fairness: {policy: fairshare}",
                                             "fairness: {policy: fairshare, weights: {vision: 1.5}}"))  # fmt: skip
    assert named(export(path), "ClusterQueue", "vision.train")["spec"]["fairSharing"] == {"weight": "1.5"}


def test_a_queue_policy_other_than_fifo_is_noted(tmp_path: Path) -> None:
    result = export(write(tmp_path, queue="sjf"))
    assert named(result, "ClusterQueue", "vision.train")["spec"]["queueingStrategy"] == "StrictFIFO"
    assert any("queue policy sjf does not map" in n for n in result.notes)


def test_one_namespace_holds_every_local_queue(tmp_path: Path) -> None:
    result = export(write(tmp_path), namespace="ml")
    queues = [(o["metadata"]["namespace"], o["metadata"]["name"], o["spec"]["clusterQueue"])
              for o in result.objects if o["kind"] == "LocalQueue"]  # fmt: skip
    assert queues == [("ml", "vision.train", "vision.train"), ("ml", "speech.train", "speech.train")]
    selector = named(result, "ClusterQueue", "speech.train")["spec"]["namespaceSelector"]
    assert selector == {"matchLabels": {"kubernetes.io/metadata.name": "ml"}}
    assert result.namespaces == ("ml",)


def test_the_live_slurm_lab_exports_too() -> None:
    """The second bundled tenancy (tests/slurm/data): one h100 model, fairshare."""
    result = export(LIVE_LAB)
    assert gpu_quotas(named(result, "ClusterQueue", "vision.shared")) == {
        "h100.shared": {"nominalQuota": 16, "borrowingLimit": 8}
    }


def test_render_yaml_is_the_objects_with_the_notes_as_comments() -> None:
    result = export(SHARED_LAB)
    text = render_yaml(result, "shared-lab.yaml")
    assert list(yaml.safe_load_all(text)) == list(result.objects)
    notes = [line.removeprefix("# note: ") for line in text.splitlines() if line.startswith("# note: ")]
    assert notes == list(result.notes)


def test_the_docs_show_what_the_export_writes() -> None:
    """docs/tenancy.md's ClusterQueue (the block after `<!-- kueue-export -->`) is the real output."""
    match = re.search(r"<!-- kueue-export -->\n```yaml\n(.*?)```", DOCS.read_text(), re.S)
    assert match, "docs/tenancy.md lost its kueue-export example"
    shown = yaml.safe_load(match.group(1))
    assert shown == named(export(SHARED_LAB), "ClusterQueue", "vision.shared")


@pytest.mark.parametrize(
    ("quotas", "namespace", "part", "message"),
    [
        (
            "[{tenant: team.a, gpus: 8}]",
            None,
            "train",
            r"cluster.yaml:doc2: spec.quotas\[0\].tenant: 'team.a' is "
            r"not a DNS-1123 label",
        ),
        ("[{tenant: a, gpus: 8}]", "No_Such", "train", r"--namespace: 'No_Such' is not a DNS-1123 label"),
        ("[]", None, "train", r"cluster.yaml: spec.quotas: no GPUPartition declares quotas"),
        ("[{tenant: a.b, gpus: 8}, {tenant: a, gpus: 8}]", "ml", "b", None),  # a.b.b and a.b: distinct
    ],
    ids=["tenant-not-a-namespace", "bad-namespace", "no-quotas", "dotted-names-distinct"],
)
def test_refusals_are_located(tmp_path: Path, quotas: str, namespace: str | None, part: str,
                              message: str | None) -> None:  # fmt: skip
    path = write(tmp_path, quotas, part=part)
    if message is None:
        export(path, namespace)
        return
    with pytest.raises(KueueExportError, match=message):
        export(path, namespace)


def test_a_model_that_is_no_label_value_is_refused(tmp_path: Path) -> None:
    with pytest.raises(KueueExportError, match=r"cluster.yaml:doc1: spec.nodeGroups\[\].model: 'a100_'"):
        export(write(tmp_path, model="a100_"))


def test_names_that_collide_are_refused(tmp_path: Path) -> None:
    """Tenant `x` of partition `y.train` and tenant `x.y` of `train` would both be ClusterQueue x.y.train."""
    path = write(tmp_path, "[{tenant: x.y, gpus: 8}]")
    topology, first, policy = path.read_text().split("---\n")
    train = first.replace('"a[1-2],v[1-6]"', '"a[1-2]"').replace('["*"]', "[train]")
    other = (
        first.replace('"a[1-2],v[1-6]"', '"v[1-6]"')
        .replace("name: train", "name: y.train")
        .replace("tenant: x.y", "tenant: x")
        .replace('["*"]', "[infer]")
        .replace("  policy: p\n", "")
    )
    path.write_text("---\n".join([topology, train, other, policy]))
    with pytest.raises(KueueExportError, match=r"two ClusterQueues would be named 'x.y.train'"):
        export(path, "ml")


@given(st.integers(0, 10_000), st.lists(st.integers(0, 512), min_size=1, max_size=8))
def test_split_adds_up_and_stays_within_one_of_proportional(total: int, weights: list[int]) -> None:
    parts = split(total, weights)
    assert sum(parts) == total and len(parts) == len(weights)
    if sum(weights):
        for part, weight in zip(parts, weights, strict=True):
            assert abs(part - total * weight / sum(weights)) < 1
