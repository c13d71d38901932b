"""The control plane started by scripts/k8s/start.sh is a real Kubernetes API server.

Each test creates uniquely named objects and deletes them again. Waits are bounded `kubectl wait`s
(watch-based), never bare sleeps.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "k8s"
GPU = "nvidia.com/gpu"
Kubectl = Any  # conftest.Kubectl: run(*args, input=, check=) and json(*args); conftests are not importable


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def pinned_version() -> str:
    out = subprocess.run(
        ["bash", "-c", 'source "$1" && printf %s "$K8S_VERSION"', "_", str(SCRIPTS / "lib.sh")],
        check=True, capture_output=True, text=True,
    )
    return out.stdout


def fake_nodes(kubectl: Kubectl, n: int, gpus: int, prefix: str, per_leaf: int = 2) -> list[str]:
    subprocess.run(
        ["bash", str(SCRIPTS / "fake-nodes.sh"), str(n), str(gpus), "--prefix", prefix,
         "--nodes-per-leaf", str(per_leaf)],
        check=True, env=kubectl.env(), capture_output=True, text=True, timeout=120,
    )
    return [f"{prefix}-{i}" for i in range(n)]


def delete_nodes(kubectl: Kubectl, names: list[str]) -> None:
    if names:
        kubectl.run("delete", "node", *names, "--ignore-not-found", "--wait=true", "--timeout=60s")


@pytest.fixture
def namespace(kubectl: Kubectl) -> Iterator[str]:
    name = unique("t")
    kubectl.run("create", "namespace", name)
    try:
        yield name
    finally:
        # Not waited for: kube-controller-manager's namespace controller holds every deletion 5 s
        # (namespaceDeletionGracePeriod) before emptying it. The round-trip test waits for one.
        kubectl.run("delete", "namespace", name, "--ignore-not-found", "--wait=false")


def parse_stream(text: str) -> list[Any]:
    """Watch output: JSON objects one after another."""
    decoder, events, pos = json.JSONDecoder(), [], 0
    text = text.strip()
    while pos < len(text):
        obj, end = decoder.raw_decode(text, pos)
        events.append(obj)
        pos = end
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return events


def test_server_is_the_pinned_kubernetes(kubectl: Kubectl) -> None:
    version = kubectl.json("version")["serverVersion"]
    assert version["major"] == "1"
    if not os.environ.get("GPUTWIN_KUBECONFIG"):
        assert version["gitVersion"] == pinned_version()
    assert kubectl.run("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").stdout == "admin"


def test_namespace_and_configmap_round_trip(kubectl: Kubectl) -> None:
    ns = unique("crud")
    kubectl.run("create", "namespace", ns)
    try:
        assert kubectl.json("get", "namespace", ns)["status"]["phase"] == "Active"
        kubectl.run("create", "configmap", "cfg", "-n", ns, "--from-literal=policy=sjf", "--from-literal=gpus=8")
        cm = kubectl.json("get", "configmap", "cfg", "-n", ns)
        assert cm["data"] == {"policy": "sjf", "gpus": "8"}
        first_rv = cm["metadata"]["resourceVersion"]
        kubectl.run("patch", "configmap", "cfg", "-n", ns, "--type=merge", "-p", '{"data":{"policy":"fifo"}}')
        cm = kubectl.json("get", "configmap", "cfg", "-n", ns)
        assert cm["data"]["policy"] == "fifo"
        assert int(cm["metadata"]["resourceVersion"]) > int(first_rv)
        # Optimistic concurrency is real: a replace carrying the old resourceVersion conflicts.
        cm["metadata"]["resourceVersion"] = first_rv
        stale = kubectl.run("replace", "-f", "-", input=json.dumps(cm), check=False)
        assert stale.returncode != 0 and "modified" in stale.stderr
        kubectl.run("delete", "configmap", "cfg", "-n", ns)
        gone = kubectl.run("get", "configmap", "cfg", "-n", ns, check=False)
        assert gone.returncode != 0 and "NotFound" in gone.stderr
    finally:
        # Completes only because kube-controller-manager runs (after its fixed 5 s grace period).
        kubectl.run("delete", "namespace", ns, "--ignore-not-found", "--wait=true", "--timeout=90s")
    gone = kubectl.run("get", "namespace", ns, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_watch_sends_initial_events_and_bookmark(kubectl: Kubectl, namespace: str) -> None:
    # Needs etcd >= 3.5.13 (RequestWatchProgress); Debian bookworm's etcd 3.4.23 fails this.
    kubectl.run("create", "configmap", "watched", "-n", namespace, "--from-literal=a=1")
    out = kubectl.run(
        "get", "--raw",
        f"/api/v1/namespaces/{namespace}/configmaps?watch=1&sendInitialEvents=true"
        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=2",
    ).stdout
    events = parse_stream(out)
    added = [e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"]
    assert "watched" in added
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert any(
        b["object"]["metadata"].get("annotations", {}).get("k8s.io/initial-events-end") == "true"
        for b in bookmarks
    ), events


def test_fake_gpu_nodes_advertise_gpus(kubectl: Kubectl) -> None:
    prefix = unique("gpu")
    names = fake_nodes(kubectl, 4, 8, prefix, per_leaf=2)
    try:
        nodes = {
            n["metadata"]["name"]: n
            for n in kubectl.json("get", "nodes", "-l", "gputwin.io/fake-node=true")["items"]
            if n["metadata"]["name"] in names
        }
        assert sorted(nodes) == sorted(names)
        for i, name in enumerate(names):
            node = nodes[name]
            assert node["status"]["capacity"][GPU] == "8"
            assert node["status"]["allocatable"][GPU] == "8"
            assert node["metadata"]["labels"]["gputwin.io/switch"] == f"leaf{i // 2}"
            assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
            assert {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"} in node["spec"]["taints"]
            ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
            assert ready and ready[0]["status"] == "True"  # KWOK keeps it Ready
            assert node["status"]["nodeInfo"]["kubeletVersion"].startswith("kwok-")
    finally:
        delete_nodes(kubectl, names)


def pod_manifest(name: str, namespace: str, *, gpus: int, node: str | None = None,
                 run_duration: str | None = None) -> str:
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": {}},
        "spec": {
            # No scheduler claims this name: the pod waits for our Binding.
            "schedulerName": "gputwin-test-none",
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"limits": {GPU: str(gpus)}}}],
        },
    }
    if node:
        pod["spec"]["nodeName"] = node
    if run_duration:
        pod["metadata"]["annotations"]["gputwin.io/run-duration"] = run_duration
    return json.dumps(pod)


def test_bound_pod_runs_under_kwok(kubectl: Kubectl, namespace: str) -> None:
    prefix = unique("run")
    [node] = fake_nodes(kubectl, 1, 8, prefix)
    try:
        kubectl.run("create", "-f", "-", input=pod_manifest("job-a", namespace, gpus=2))
        assert kubectl.json("get", "pod", "job-a", "-n", namespace)["status"]["phase"] == "Pending"
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "job-a"},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        kubectl.run("create", "--raw", f"/api/v1/namespaces/{namespace}/pods/job-a/binding", "-f", "-",
                    input=json.dumps(binding))
        # A second Binding is refused: the pod is already assigned.
        again = kubectl.run("create", "--raw", f"/api/v1/namespaces/{namespace}/pods/job-a/binding",
                            "-f", "-", input=json.dumps(binding), check=False)
        assert again.returncode != 0 and "already assigned" in again.stderr
        kubectl.run("wait", "pod/job-a", "-n", namespace, "--for=jsonpath={.status.phase}=Running",
                    "--timeout=60s")
        pod = kubectl.json("get", "pod", "job-a", "-n", namespace)
        assert pod["spec"]["nodeName"] == node
        conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert conditions["PodScheduled"] == "True" and conditions["Ready"] == "True"
        assert pod["status"]["containerStatuses"][0]["state"]["running"]

        # gputwin's KWOK stage: a pod annotated with a run duration completes on its own.
        kubectl.run("create", "-f", "-",
                    input=pod_manifest("job-b", namespace, gpus=1, node=node, run_duration="2s"))
        kubectl.run("wait", "pod/job-b", "-n", namespace, "--for=jsonpath={.status.phase}=Succeeded",
                    "--timeout=60s")
        done = kubectl.json("get", "pod", "job-b", "-n", namespace)
        assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0

        # KWOK's pod-delete stage finishes a deletion that would otherwise wait for a kubelet.
        kubectl.run("delete", "pod", "job-a", "job-b", "-n", namespace, "--wait=true", "--timeout=60s")
    finally:
        kubectl.run("delete", "pods", "--all", "-n", namespace, "--wait=true", "--timeout=60s", check=False)
        delete_nodes(kubectl, [node])


CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.smoketest.gputwin.io}
spec:
  group: smoketest.gputwin.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              gpus: {type: integer, minimum: 1, maximum: 8}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"""


def widget(name: str, namespace: str, gpus: int) -> str:
    return json.dumps({"apiVersion": "smoketest.gputwin.io/v1", "kind": "Widget",
                       "metadata": {"name": name, "namespace": namespace}, "spec": {"gpus": gpus}})


def test_crd_is_served_and_validated(kubectl: Kubectl, namespace: str) -> None:
    kubectl.run("apply", "-f", "-", input=CRD)
    try:
        kubectl.run("wait", "crd/widgets.smoketest.gputwin.io", "--for=condition=Established", "--timeout=60s")
        resources = kubectl.run("api-resources", "--api-group=smoketest.gputwin.io", "-o", "name").stdout
        assert "widgets.smoketest.gputwin.io" in resources.split()
        kubectl.run("apply", "-f", "-", input=widget("w1", namespace, 4))
        got = kubectl.json("get", "widgets.smoketest.gputwin.io", "w1", "-n", namespace)
        assert got["spec"] == {"gpus": 4} and got["metadata"]["generation"] == 1
        # The schema is enforced by the server (422), not by kubectl.
        bad = kubectl.run("apply", "--validate=false", "-f", "-", input=widget("w2", namespace, 99),
                          check=False)
        assert bad.returncode != 0 and "less than or equal to 8" in bad.stderr
        kubectl.run("delete", "widgets.smoketest.gputwin.io", "w1", "-n", namespace)
    finally:
        kubectl.run("delete", "crd", "widgets.smoketest.gputwin.io", "--ignore-not-found",
                    "--wait=true", "--timeout=60s")


def script(name: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPTS / name), *map(str, args)],
                          capture_output=True, text=True, timeout=120, check=False)


def runs_exe(pid: str, exe: str) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/exe") == exe
    except OSError:
        return False


def test_start_and_stop_manage_exactly_their_processes(k8s_bin: Path, tmp_path: Path) -> None:
    """start.sh records what it started; stop.sh stops exactly that and keeps logs and data."""
    state = tmp_path / "state"
    started = script("start.sh", "--state", state, "--no-kwok")
    try:
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip() == f"export KUBECONFIG={state.resolve()}/kubeconfig"
        records = [line.split() for line in (state / "pids").read_text().splitlines()]
        assert [name for name, _, _ in records] == ["etcd", "kube-apiserver"]
        assert all(runs_exe(pid, exe) and exe.startswith(str(k8s_bin)) for _, pid, exe in records)

        again = script("start.sh", "--state", state, "--no-kwok")
        assert again.returncode != 0 and "still running" in again.stderr
    finally:
        stopped = script("stop.sh", "--state", state)
    assert stopped.returncode == 0, stopped.stderr
    for name, pid, exe in records:
        assert not runs_exe(pid, exe), f"{name} (pid {pid}) survived stop.sh"
    assert not (state / "pids").exists()
    assert (state / "logs" / "kube-apiserver.log").exists() and (state / "etcd").is_dir()

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("not ours")
    refused = script("start.sh", "--state", foreign, "--no-kwok")
    assert refused.returncode != 0 and "not made by start.sh" in refused.stderr
    assert (foreign / "keep.txt").read_text() == "not ours"
