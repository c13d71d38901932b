"""The watched copy of pods and nodes (`gputwin.adapters.kube.watch`) on a REAL API server: it
follows creations, bindings, endings and deletions without listing again, reports each ended pod
once (deleted before it ended: `gone`), and wakes its reader only for changes that matter."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from gputwin.adapters.kube.watch import Watched, node_matters, pod_matters
from polling import wait_for

Obj = dict[str, Any]


@pytest.fixture
def core(kube: Path) -> client.CoreV1Api:
    api = config.new_client_from_config(config_file=str(kube))  # type: ignore[no-untyped-call]
    return client.CoreV1Api(api)


def pod(name: str, node: str | None = None) -> Obj:
    spec: Obj = {"containers": [{"name": "c", "image": "pause"}], "schedulerName": "nobody"}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_the_copy_follows_pods_and_reports_each_ended_one_once(core: Any, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod("before"))  # in the first list
    wakes: list[float] = []
    watched = Watched(core.list_pod_for_all_namespaces, pods=True, matters=pod_matters,
                      changed=lambda: wakes.append(time.monotonic()))  # fmt: skip
    try:
        assert watched.wait_synced(15)
        live, _ = watched.changes(full=True)
        assert (namespace, "before") in live and watched.lists == 1
        core.create_namespaced_pod(namespace, pod("after"))
        wait_for("the new pod", lambda: (namespace, "after") in watched.changes(full=True)[0])
        binding = {"target": {"apiVersion": "v1", "kind": "Node", "name": "node-x"},
                   "metadata": {"name": "after"}}  # fmt: skip
        core.create_namespaced_pod_binding("after", namespace, binding, _preload_content=False)
        wait_for("the binding",
                 lambda: watched.changes(full=True)[0][(namespace, "after")]["spec"].get("nodeName") == "node-x")  # fmt: skip
        woken = len(wakes)
        done = {"status": {"phase": "Succeeded"}}
        core.patch_namespaced_pod_status("after", namespace, done)
        ended: dict[tuple[str, str], Any] = {}

        def ended_seen() -> bool:
            live, more = watched.changes(full=True)
            ended.update(more)
            return (namespace, "after") in ended and (namespace, "after") not in live

        wait_for("the ended pod", ended_seen)
        assert ended[(namespace, "after")].gone is False
        assert ended[(namespace, "after")].pod["status"]["phase"] == "Succeeded"
        assert len(wakes) > woken
        core.delete_namespaced_pod("after", namespace, grace_period_seconds=0)  # ended already: not again
        core.delete_namespaced_pod("before", namespace, grace_period_seconds=0)
        ended.clear()

        def deleted_seen() -> bool:
            ended.update(watched.changes(full=True)[1])
            return (namespace, "before") in ended

        wait_for("the deleted pod", deleted_seen)  # the watch is ordered: the first deletion came before
        assert ended[(namespace, "before")].gone is True
        assert (namespace, "after") not in ended
        assert watched.lists == 1 and watched.events >= 4  # followed, never listed again
    finally:
        watched.stop()


@pytest.mark.parametrize(
    ("change", "matters"),
    [
        pytest.param({}, False, id="nothing"),
        pytest.param({"status": {"conditions": [{"type": "Ready", "status": "True"},
                                                {"type": "PodScheduled", "status": "True"}]}}, False, id="conditions"),  # fmt: skip
        pytest.param({"spec": {"nodeName": "n1"}}, True, id="bound"),
        pytest.param({"status": {"phase": "Succeeded"}}, True, id="ended"),
        pytest.param({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}, True, id="being-deleted"),
    ],
)
def test_which_pod_changes_wake_the_loop(change: Obj, matters: bool) -> None:
    old: Obj = {"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Pending"}}
    new = json.loads(json.dumps(old))
    for part, values in change.items():
        new[part].update(values)
    assert pod_matters(old, new) is matters
    assert pod_matters(None, new) and pod_matters(old, None)


@pytest.mark.parametrize(
    ("change", "matters"),
    [
        pytest.param({"status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "later"}],
                                 "allocatable": {"nvidia.com/gpu": "8"}}}, False, id="heartbeat"),  # fmt: skip
        pytest.param({"status": {"conditions": [{"type": "Ready", "status": "False"}],
                                 "allocatable": {"nvidia.com/gpu": "8"}}}, True, id="not-ready"),  # fmt: skip
        pytest.param({"spec": {"unschedulable": True}}, True, id="cordoned"),
        pytest.param({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}, True, id="tainted"),
        pytest.param({"metadata": {"labels": {"gputwin.io/switch": "leaf9"}}}, True, id="relabelled"),
        pytest.param({"status": {"conditions": [{"type": "Ready", "status": "True"}],
                                 "allocatable": {"nvidia.com/gpu": "4"}}}, True, id="fewer-gpus"),  # fmt: skip
    ],
)
def test_which_node_changes_wake_the_loop(change: Obj, matters: bool) -> None:
    old: Obj = {"metadata": {"name": "n", "labels": {"gputwin.io/switch": "leaf0"}}, "spec": {},
                "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "now"}],
                           "allocatable": {"nvidia.com/gpu": "8"}}}  # fmt: skip
    new = json.loads(json.dumps(old))
    for part, values in change.items():
        new[part].update(values)
    assert node_matters(old, new) is matters


def test_changes_name_what_changed_since_the_last_call_and_a_full_call_everything(
    core: Any, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, pod("first"))
    watched = Watched(core.list_pod_for_all_namespaces, pods=True)
    try:
        assert watched.wait_synced(15)
        changed, _ = watched.changes()  # the first call: everything (changes are recorded from now on)
        assert (namespace, "first") in changed and watched.taken.isdigit()
        core.create_namespaced_pod(namespace, pod("second"))
        seen: dict[tuple[str, str], Any] = {}
        wait_for("the new pod", lambda: (namespace, "second") in seen or bool(seen.update(watched.changes()[0])))
        assert (namespace, "first") not in seen  # unchanged since the last call
        core.delete_namespaced_pod("first", namespace, grace_period_seconds=0)
        gone: dict[tuple[str, str], Any] = {}
        wait_for("the deletion",
                 lambda: bool(gone.update(watched.changes()[0])) or gone.get((namespace, "first"), 0) is None)  # fmt: skip
        everything, _ = watched.changes(full=True)
        assert (namespace, "second") in everything and (namespace, "first") not in everything
        assert int(watched.taken) >= int(everything[(namespace, "second")]["metadata"]["resourceVersion"])
    finally:
        watched.stop()
