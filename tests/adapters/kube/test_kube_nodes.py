"""Which declared nodes the live cluster lets the Kubernetes backend use (pure: Node dicts in, reasons out)."""

from __future__ import annotations

from typing import Any

import pytest

from gputwin.adapters.kube.nodes import Expected, held_by_others, node_problem

KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}


def node(name: str = "n0", *, ready: str = "True", gpus: str = "8", unschedulable: bool = False,
         taints: list[dict[str, str]] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    return {
        "metadata": {"name": name, "labels": labels or {"gputwin.io/switch": "leaf0"}},
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": ready}], "allocatable": {"nvidia.com/gpu": gpus}},
    }


WANT = Expected("leaf0", 8, "train")


@pytest.mark.parametrize(
    ("given", "tolerated", "problem"),
    [
        pytest.param(node(), (), None, id="ready-untainted"),
        pytest.param(None, (), "no such Node in the cluster", id="missing"),
        pytest.param(node(ready="False"), (), "NotReady", id="not-ready"),
        pytest.param(node(ready="Unknown"), (), "NotReady", id="unknown"),
        pytest.param({**node(), "status": {"allocatable": {"nvidia.com/gpu": "8"}}}, (), "NotReady", id="no-condition"),
        pytest.param(node(unschedulable=True), (), "cordoned (spec.unschedulable)", id="cordoned"),
        pytest.param(node(taints=[KWOK_TAINT]), (), "tainted kwok.x-k8s.io/node:NoSchedule", id="untolerated"),
        pytest.param(node(taints=[KWOK_TAINT]), ("kwok.x-k8s.io/node",), None, id="tolerated"),
        pytest.param(node(taints=[{"key": "x", "effect": "PreferNoSchedule"}]), (), None, id="prefer-is-fine"),
        pytest.param(node(taints=[{"key": "x", "effect": "NoExecute"}]), (), "tainted x:NoExecute", id="noexecute"),
        pytest.param(node(gpus="4"), (), "allocatable nvidia.com/gpu is 4, the topology declares 8", id="few-gpus"),
        pytest.param(node(gpus="lots"), (), "allocatable nvidia.com/gpu is 0, the topology declares 8", id="bad-qty"),
        pytest.param(node(labels={"gputwin.io/switch": "leaf1"}), (),
                     "label gputwin.io/switch=leaf1, the topology puts it under leaf0", id="other-leaf"),  # fmt: skip
        pytest.param(node(labels={"gputwin.io/switch": "leaf0", "gputwin.io/partition": "infer"}), (),
                     "label gputwin.io/partition=infer, it is declared in partition train", id="other-partition"),  # fmt: skip
        pytest.param(node(labels={}), (), None, id="no-labels-no-cross-check"),
    ],
)
def test_node_problem(given: dict[str, Any] | None, tolerated: tuple[str, ...], problem: str | None) -> None:
    assert node_problem(given, WANT, tolerated) == problem


@pytest.mark.parametrize(
    ("allocatable", "declared", "foreign", "held"),
    [
        pytest.param("8", 8, 6, 6, id="6-of-8-held"),
        pytest.param("8", 8, 0, None, id="none-held"),
        pytest.param("8", 4, 3, None, id="the-surplus-over-what-is-declared-is-used-first"),
        pytest.param("8", 4, 6, 2, id="beyond-the-surplus-it-eats-into-ours"),
        pytest.param("8", 8, 11, 11, id="more-than-the-node-has"),
    ],
)
def test_gpus_held_by_other_schedulers_pods(
    allocatable: str, declared: int, foreign: int, held: int | None
) -> None:
    expected = {"n0": Expected("leaf0", declared)}
    got = held_by_others({"n0": int(allocatable)}, expected, {"n0": foreign, "undeclared": 4})
    assert got == ({} if held is None else {"n0": held})
