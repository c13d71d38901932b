"""The watched copy of the gputwin objects (`ObjectWatches`) under `KubeStore`: a pass reads the copy,
not the API server; it reads its own writes at once and never an older version afterwards; and
spec changes, creations and deletions wake the loop, status writes (ours, every pass) do not.

The ordering rules run on hand-made watch events (no server needed: `Watched._apply` is fed what a
stream would carry); the rest on the REAL API server of `tests/k8s_control_plane.py` with the CRDs.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from gputwin.adapters.kube import KubeStore
from gputwin.adapters.kube.cluster_watch import ObjectWatches
from gputwin.adapters.kube.watch import Watched, object_matters
from gputwin.api.meta import GROUP
from polling import wait_for

ROOT = Path(__file__).resolve().parents[3]
Obj = dict[str, Any]


def obj(rv: str, generation: int = 1, status: str = "") -> Obj:
    meta = {"name": "t", "resourceVersion": rv, "generation": generation}
    return {"metadata": meta, "spec": {}, "status": {"note": status} if status else {}}


# steps: ("written" | "ADDED" | "MODIFIED" | "DELETED", resourceVersion); expected rv in the copy (None: absent)
CASES: dict[str, tuple[list[tuple[str, str]], str | None]] = {
    "our write, then a late event of before it": ([("ADDED", "5"), ("written", "10"), ("MODIFIED", "9")], "10"),
    "our write, then a later change": ([("ADDED", "5"), ("written", "10"), ("MODIFIED", "11")], "11"),
    "an older write's answer after a newer event": ([("MODIFIED", "12"), ("written", "10")], "12"),
    "deleted after our write": ([("written", "10"), ("DELETED", "13")], None),
    "an old incarnation's deletion after the new one's write": ([("written", "10"), ("DELETED", "8")], "10"),
    "numbers, not strings: 9 < 10": ([("ADDED", "9"), ("MODIFIED", "10")], "10"),
    "versions that are no numbers: the event wins": ([("written", "b"), ("MODIFIED", "a")], "a"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_copy_never_goes_back_in_time(name: str) -> None:
    steps, expected = CASES[name]
    watched = Watched(lambda **_: None, name="switchtopologies")
    for kind, rv in steps:
        if kind == "written":
            watched.written(obj(rv))
        else:
            watched._apply({"type": kind, "object": obj(rv)})
    found = watched.find("", "t")
    assert (found["metadata"]["resourceVersion"] if found else None) == expected


@pytest.mark.parametrize(
    ("old", "new", "matters"),
    [
        pytest.param(obj("1"), obj("2", status="ours"), False, id="status-write"),
        pytest.param(obj("1"), obj("2", generation=2), True, id="spec-edited"),
        pytest.param(None, obj("1"), True, id="created"),
        pytest.param(obj("1"), None, True, id="deleted"),
        pytest.param(obj("1"), {**obj("2"), "metadata": {**obj("2")["metadata"],
                                                         "deletionTimestamp": "2026-01-01T00:00:00Z"}}, True,
                     id="being-deleted"),  # fmt: skip
    ],
)
def test_which_object_changes_wake_the_loop(old: Obj | None, new: Obj | None, matters: bool) -> None:
    assert object_matters(old, new) is matters


def test_a_store_reads_the_copy_and_its_own_writes(
    kube: Path, kubectl: Any, crds: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kube))
    name = f"watch-{uuid.uuid4().hex[:6]}"
    wakes: list[float] = []
    watches = ObjectWatches.connect(changed=lambda: wakes.append(time.monotonic()))
    store = KubeStore.connect(cache=watches)
    lists = []
    real_list = store._objects.list_cluster_custom_object
    monkeypatch.setattr(store._objects, "list_cluster_custom_object",
                        lambda *a, **k: lists.append(a) or real_list(*a, **k))  # fmt: skip
    topology = {"apiVersion": f"{GROUP}/v1alpha1", "kind": "SwitchTopology", "metadata": {"name": name},
                "spec": {"switches": [{"name": "spine"}, {"name": "leaf0", "parent": "spine"}],
                         "nodeGroups": [{"switch": "leaf0", "nodes": "n-[0-1]", "gpusPerNode": 8}]}}  # fmt: skip
    try:
        assert watches.objects("SwitchTopology") is not None  # listed once, then watched
        kubectl.run("apply", "-f", "-", input=json.dumps(topology))
        wait_for("the new topology", lambda: any(o["metadata"]["name"] == name
                                                 for o in store.list("SwitchTopology")))  # fmt: skip
        assert lists == []  # every list came from the copy
        woken = len(wakes)
        store.patch_status("SwitchTopology", None, name, {"nodes": 7})
        mine = next(o for o in store.list("SwitchTopology") if o["metadata"]["name"] == name)
        assert mine["status"]["nodes"] == 7  # our own write, read back at once
        time.sleep(0.5)
        assert len(wakes) == woken  # a status write does not wake the loop
        groups = [{"switch": "leaf0", "nodes": "n-[0-1]", "gpusPerNode": 4}]
        store.patch_spec("SwitchTopology", None, name, {"nodeGroups": groups})
        assert next(o for o in store.list("SwitchTopology")
                    if o["metadata"]["name"] == name)["spec"]["nodeGroups"] == groups  # fmt: skip
        time.sleep(0.5)  # our spec write may wake the loop once (its event can beat the answer): harmless
        woken = len(wakes)
        groups[0]["gpusPerNode"] = 2  # someone else's edit: wakes the loop
        kubectl.run("patch", "switchtopology", name, "--type=merge", "-p", json.dumps({"spec": {"nodeGroups": groups}}))
        wait_for("a wake-up for the spec change", lambda: len(wakes) > woken)
        kubectl.run("delete", "switchtopology", name)
        wait_for("the deletion", lambda: all(o["metadata"]["name"] != name for o in store.list("SwitchTopology")))
        assert lists == []
    finally:
        kubectl.run("delete", "switchtopology", name, "--ignore-not-found", check=False)
        watches.stop()
