"""The pods of a GPUJob as the Kubernetes backend builds them (pure: no API server needed)."""

from __future__ import annotations

from typing import Any

import pytest

from gputwin.adapters.kube.manifests import PodPlan, bound_gpus, gpus_of, job_pod, label_value, pod_name

PLAN = PodPlan("team-a", "train-1", 2, 1, "kb-4", 8, "train", "leaf0,leaf1", 0.15, 12.5)
OWNER = {"apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob", "metadata": {"name": "train-1", "uid": "u-1"}}


def test_a_job_without_template_gets_a_pause_pod_with_its_gpus_labels_and_annotations() -> None:
    pod = job_pod(PLAN, None, OWNER, ["kwok.x-k8s.io/node"])
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["name"] == "train-1-2-1" and meta["namespace"] == "team-a"
    assert meta["labels"] == {"gputwin.io/job": "train-1", "gputwin.io/attempt": "2", "gputwin.io/partition": "train"}
    assert meta["annotations"] == {"gputwin.io/job-id": "team-a/train-1", "gputwin.io/switches": "leaf0,leaf1",
                                   "gputwin.io/comm-overhead": "0.15", "gputwin.io/run-duration": "12.500s"}  # fmt: skip
    assert meta["ownerReferences"][0]["uid"] == "u-1"
    assert spec["schedulerName"] == "gputwin" and "nodeName" not in spec and spec["restartPolicy"] == "Never"
    assert spec["tolerations"] == [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}]
    assert spec["containers"][0]["resources"] == {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}
    assert gpus_of(pod) == 8


def test_the_template_is_kept_but_placement_and_gpus_are_ours() -> None:
    template: dict[str, Any] = {
        "metadata": {"name": "ignored", "labels": {"app": "x", "gputwin.io/job": "spoofed"}},
        "spec": {
            "nodeName": "elsewhere", "schedulerName": "default-scheduler", "restartPolicy": "OnFailure",
            "tolerations": [{"key": "t", "operator": "Exists"}],
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "2"}}},
                {"name": "side", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "3"}}},
            ],
        },
    }  # fmt: skip
    pod = job_pod(PodPlan("ns", "j", 0, 0, "n", 4, "p", "leaf0", 0.0, None), template, None, [])
    assert pod["metadata"]["name"] == "j-0-0" and pod["metadata"]["labels"]["gputwin.io/job"] == "j"
    assert pod["metadata"]["labels"]["app"] == "x" and "ownerReferences" not in pod["metadata"]
    assert "gputwin.io/run-duration" not in pod["metadata"]["annotations"]  # a real run: no simulated end
    spec = pod["spec"]
    assert "nodeName" not in spec and spec["schedulerName"] == "gputwin" and spec["restartPolicy"] == "OnFailure"
    assert spec["containers"][0]["resources"]["limits"] == {"cpu": "2", "nvidia.com/gpu": "4"}
    assert spec["containers"][1]["resources"]["limits"] == {}
    assert template["spec"]["nodeName"] == "elsewhere"  # the GPUJob's own template is not modified


@pytest.mark.parametrize(
    ("text", "valid"),
    [("train-1", True), ("a" * 63, True), ("a" * 64, False), ("x/y", False), ("-x", False)],
)
def test_label_values_are_always_valid_and_stable(text: str, valid: bool) -> None:
    value = label_value(text)
    assert (value == text) is valid
    assert len(value) <= 63 and value == label_value(text)


def test_pod_names_stay_within_253_characters_and_distinct() -> None:
    long = "j" * 253
    assert len(pod_name(long, 10, 99)) <= 253 and pod_name(long, 0, 0) != pod_name(long + "x", 0, 0)


def test_bound_gpus_counts_only_pods_still_holding_their_node() -> None:
    def pod(node: str | None, phase: str, gpus: int, deleting: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": "p", "deletionTimestamp": "now"} if deleting else {"name": "p"}
        containers = [{"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]
        return {"metadata": meta, "spec": {"nodeName": node, "containers": containers}, "status": {"phase": phase}}

    pods = [pod("a", "Running", 4), pod("a", "Pending", 2), pod("a", "Succeeded", 8), pod("b", "Failed", 8),
            pod(None, "Pending", 8), pod("b", "Running", 8, deleting=True)]  # fmt: skip
    assert bound_gpus(pods) == {"a": 6}
