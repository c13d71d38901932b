"""The Kubernetes backend's view kept up to date change by change (`gputwin.adapters.kube.view`):
which declared nodes are out of service and why, judged again only for the nodes that changed."""

from __future__ import annotations

from typing import Any

from cluster_builders import build_cluster

from gputwin.adapters.kube.view import NodeView, Run, Runs

CLUSTER = build_cluster({"l0": [8, 8, 8]})  # nodes n0, n1, n2 under leaf l0


def node(name: str, *, ready: str = "True", unschedulable: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"gputwin.io/switch": "l0"}},
        "spec": {"unschedulable": unschedulable},
        "status": {"conditions": [{"type": "Ready", "status": ready}], "allocatable": {"nvidia.com/gpu": "8"}},
    }


def test_out_of_service_names_only_declared_nodes_with_a_problem() -> None:
    view = NodeView(())
    listed = [node("n0"), node("n1", unschedulable=True), node("undeclared", ready="False")]
    view.update(CLUSTER, {("", n["metadata"]["name"]): n for n in listed}, full=True)
    assert view.problems == {"n1": "cordoned (spec.unschedulable)", "n2": "no such Node in the cluster"}
    assert view.allocatable == {"n0": 8, "n1": 8, "undeclared": 8}


def test_only_the_changed_nodes_are_judged_again() -> None:
    view = NodeView(())
    view.update(CLUSTER, {("", n): node(n) for n in ("n0", "n1", "n2")}, full=True)
    assert view.problems == {}
    view.update(CLUSTER, {("", "n1"): node("n1", ready="False"), ("", "n2"): None}, full=False)
    assert view.problems == {"n1": "NotReady", "n2": "no such Node in the cluster"}
    view.update(CLUSTER, {("", "n1"): node("n1")}, full=False)  # back in service; n2 still gone
    assert view.problems == {"n2": "no such Node in the cluster"} and "n2" not in view.allocatable


def test_runs_index_their_pods_and_keep_the_order_they_began() -> None:
    runs = Runs()
    runs.add("b", Run("ns", ("b-0", "b-1"), "p"))
    runs.add("a", Run("ns", ("a-0",), "p"))
    assert runs.job_of == {("ns", "b-0"): "b", ("ns", "b-1"): "b", ("ns", "a-0"): "a"}
    assert runs.recheck == {"a", "b"} and runs.in_order({"a", "b", "gone"}) == ["b", "a"]
    assert runs.remove("b") == Run("ns", ("b-0", "b-1"), "p") and runs.remove("b") is None
    assert runs.job_of == {("ns", "a-0"): "a"} and runs.recheck == {"a"} and list(runs) == ["a"]
