"""What can be tested of the kind setup without Docker: kind-config.yaml, manifests/kind/, scripts/kind/.

- kind-config.yaml's worker labels (switch, partition, GPU count) agree with the sample
  SwitchTopology and GPUPartitions of manifests/kind/cluster.yaml, and every sample job routes to a
  partition that can hold it (pure checks, through gputwin's own models);
- the sample manifests pass the CRDs' validation on the REAL API server (server-side dry run), and
  a job's pod built from its podTemplate is a valid Pod there (downward API included);
- the GPU patch scripts/kind/up.sh sends (lib.sh's `patch_node_gpus`, through a real `kubectl
  proxy`) works on a real Node's status subresource, and refuses unchecked input;
- the scripts are `bash -n` clean, and shellcheck clean when shellcheck is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gputwin.api.convert import cluster_spec
from gputwin.api.v1alpha1 import KINDS, GPUPartition, SchedulingPolicy, SwitchTopology
from ci_rule import skip_or_fail  # tests/ci_rule.py
from k8s_control_plane import CRD_NAMES

ROOT = Path(__file__).resolve().parents[2]
KIND_CONFIG = ROOT / "kind-config.yaml"
SAMPLE = ROOT / "manifests" / "kind"
SCRIPTS = ROOT / "scripts" / "kind"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def kind_workers() -> dict[str, dict[str, str]]:
    """Worker node name -> labels, named as kind names them (<name>-worker, <name>-worker2, ...)."""
    config = yaml.safe_load(KIND_CONFIG.read_text())
    assert (config["kind"], config["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    workers = [n for n in config["nodes"] if n["role"] == "worker"]
    return {
        f"{config['name']}-worker{i + 1 if i else ''}": n.get("labels", {}) for i, n in enumerate(workers)
    }


def sample_spec() -> Any:
    models = [KINDS[d["kind"]].model_validate(d) for d in docs(SAMPLE / "cluster.yaml")]
    topology = next(m for m in models if isinstance(m, SwitchTopology))
    partitions = [m for m in models if isinstance(m, GPUPartition)]
    policies = [m for m in models if isinstance(m, SchedulingPolicy)]
    return cluster_spec(topology, partitions, policies), partitions


def test_kind_workers_carry_the_labels_the_sample_declares() -> None:
    workers = kind_workers()
    spec, _ = sample_spec()
    nodes = {n.name: n for n in spec.topology.nodes}
    partition_of = {node: p.name for p in spec.partitions for node in p.nodes}
    assert set(workers) == set(nodes), "the SwitchTopology must name exactly kind's workers"
    for name, labels in workers.items():
        assert labels.get("gputwin.io/switch") == nodes[name].switch, name
        assert labels.get("gputwin.io/partition") == partition_of.get(name), name
        assert labels.get("gputwin.io/gpus") == str(nodes[name].gpus), name


def test_kind_up_script_defaults_to_the_cluster_name_the_sample_uses() -> None:
    config_name = yaml.safe_load(KIND_CONFIG.read_text())["name"]
    assert f"NAME={config_name}\n" in (SCRIPTS / "up.sh").read_text()
    assert all(n.startswith(f"{config_name}-worker") for n in kind_workers())


def test_every_sample_job_routes_to_a_partition_that_can_hold_it() -> None:
    _, partitions = sample_spec()
    spec, _ = sample_spec()
    gpus = {p.name: sum(n.gpus for n in spec.topology.nodes if n.name in p.nodes) for p in spec.partitions}
    for doc in docs(SAMPLE / "jobs.yaml"):
        if doc["kind"] == "GPUJob":
            task, wanted = doc["spec"]["taskType"], doc["spec"]["gpus"]
        else:  # a plain Pod scheduled by gputwin
            assert doc["spec"]["schedulerName"] == "gputwin"
            task = doc["metadata"]["labels"]["gputwin.io/task-type"]
            wanted = int(doc["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
        serving = [p for p in partitions if task in p.spec.task_types]
        assert len(serving) == 1, f"{doc['metadata']['name']}: task type {task} served by {len(serving)}"
        part = serving[0]
        assert wanted <= min(gpus[part.metadata.name], part.spec.max_gpus_per_job or wanted), doc["metadata"]


# --- on the real API server --------------------------------------------------------------------------


def test_kind_sample_passes_the_crds_validation_server_side(kubectl: Any, crds: None) -> None:
    done = kubectl.run("apply", "--dry-run=server", "-f", str(SAMPLE / "cluster.yaml"),
                       "-f", str(SAMPLE / "jobs.yaml"))  # fmt: skip
    applied = [ln for ln in done.stdout.splitlines() if "(server dry run)" in ln]
    assert len(applied) == len(docs(SAMPLE / "cluster.yaml")) + len(docs(SAMPLE / "jobs.yaml")), done.stdout
    # The dry run really validates: the same job with a wrong type is refused.
    broken = docs(SAMPLE / "jobs.yaml")[0]
    broken["spec"]["gpus"] = "four"
    refused = kubectl.run("apply", "--dry-run=server", "-f", "-", input=json.dumps(broken), check=False)
    assert refused.returncode != 0 and "gpus" in refused.stderr


def test_kind_job_pod_template_makes_a_valid_pod(kubectl: Any) -> None:
    for job in (d for d in docs(SAMPLE / "jobs.yaml") if d["kind"] == "GPUJob"):
        spec = job["spec"]["podTemplate"]["spec"]
        spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"  # as the operator sets it
        spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "4"
        pod = {"apiVersion": "v1", "kind": "Pod", "spec": spec, "metadata": {
            "name": f"{job['metadata']['name']}-0-0", "namespace": "default",
            "annotations": {"gputwin.io/run-duration": "30.000s"}}}  # fmt: skip
        done = kubectl.run("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(pod))
        env = json.loads(done.stdout)["spec"]["containers"][0]["env"]
        assert (
            env[0]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.annotations['gputwin.io/run-duration']"
        )


def test_the_sleep_command_reads_the_run_duration() -> None:
    """The container's shell line, run by the local sh: "30.000s" -> sleep 30 (here: echo only)."""
    job = next(d for d in docs(SAMPLE / "jobs.yaml") if d["kind"] == "GPUJob")
    command = job["spec"]["podTemplate"]["spec"]["containers"][0]["command"]
    script = command[2].replace('sleep "${d:-60}"', 'echo "sleep ${d:-60}"')
    for value, expected in (("30.000s", "sleep 30"), ("7s", "sleep 7"), ("", "sleep 60")):
        out = subprocess.run([*command[:2], script], env={"RUN_DURATION": value, "PATH": os.environ["PATH"]},
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert out.splitlines()[-1] == expected, (value, out)


@pytest.fixture
def plain_node(kubectl: Any) -> Iterator[str]:
    """A Node as a kubelet registers it (capacity and allocatable without GPUs); deleted afterwards."""
    name = f"kind-gpu-patch-{uuid.uuid4().hex[:8]}"
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"capacity": resources, "allocatable": resources}}  # fmt: skip
    kubectl.run("create", "-f", "-", input=json.dumps(node))
    try:
        yield name
    finally:
        kubectl.run("delete", "node", name, "--wait=false", check=False)


def run_lib(kubectl: Any, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `script` in bash with scripts/kind/lib.sh sourced and the test's kubectl first on PATH."""
    env = {**kubectl.env(), "PATH": f"{Path(kubectl.binary).parent}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", f'set -euo pipefail; source "$0"; {script}', str(SCRIPTS / "lib.sh"), *args],
                          capture_output=True, text=True, env=env, timeout=60, check=False)  # fmt: skip


def test_up_scripts_gpu_patch_works_on_a_real_node(kubectl: Any, plain_node: str) -> None:
    for gpus in ("4", "2"):  # "add" also replaces a value already there
        done = run_lib(kubectl, 'start_proxy ""; trap stop_proxy EXIT; patch_node_gpus "$PROXY_URL" "$1" "$2"',
                       plain_node, gpus)  # fmt: skip
        assert done.returncode == 0, done.stderr
        status = kubectl.json("get", "node", plain_node)["status"]
        assert (
            status["capacity"]["nvidia.com/gpu"] == gpus and status["allocatable"]["nvidia.com/gpu"] == gpus
        )
        assert status["capacity"]["cpu"] == "4"  # the rest of the status is untouched


@pytest.mark.parametrize(("node", "gpus", "says"), [
    ("ok-node", "4; rm -rf /", "is not a whole number"),
    ("../nodes/other", "4", "is not a valid Node name"),
    ("Bad_Name", "4", "is not a valid Node name"),
])  # fmt: skip
def test_gpu_patch_refuses_unchecked_input(kubectl: Any, node: str, gpus: str, says: str) -> None:
    done = run_lib(kubectl, 'patch_node_gpus "http://127.0.0.1:9" "$1" "$2"', node, gpus)
    assert done.returncode == 1 and says in done.stderr, done.stderr


def test_gpu_patch_is_the_documented_json_patch(kubectl: Any) -> None:
    done = run_lib(kubectl, 'gpu_patch "$1"', "8")
    assert json.loads(done.stdout) == [
        {"op": "add", "path": "/status/capacity/nvidia.com~1gpu", "value": "8"},
        {"op": "add", "path": "/status/allocatable/nvidia.com~1gpu", "value": "8"},
    ]


# --- the scripts themselves -----------------------------------------------------------------------------


@pytest.mark.parametrize("script", sorted(p.name for p in SCRIPTS.glob("*.sh")))
def test_kind_scripts_parse(script: str) -> None:
    done = subprocess.run(["bash", "-n", str(SCRIPTS / script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_kind_scripts_are_shellcheck_clean() -> None:
    if shutil.which("shellcheck") is None:
        skip_or_fail("shellcheck is not installed (apt-get install shellcheck)")
    done = subprocess.run(["shellcheck", "-x", *sorted(str(p) for p in SCRIPTS.glob("*.sh"))],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout


def test_kind_up_help_and_bad_arguments() -> None:
    shown = subprocess.run(
        ["bash", str(SCRIPTS / "up.sh"), "--help"], capture_output=True, text=True, check=False
    )
    assert shown.returncode == 0 and "Usage: scripts/kind/up.sh" in shown.stdout
    for bad in (["--bogus"], ["--name", "Bad Name"]):
        done = subprocess.run(
            ["bash", str(SCRIPTS / "up.sh"), *bad], capture_output=True, text=True, check=False
        )
        assert done.returncode == 1 and "ERROR" in done.stderr, (bad, done.stderr)


# --- up.sh end to end, with mock kind and docker ------------------------------------------------------
#
# kind and docker cannot run here (no Docker engine), so two stubs stand in for them: `kind get
# clusters` answers "gputwin" (the cluster "exists"), `kind load` and `docker` only record their
# arguments. Everything else is real: a control plane with kube-scheduler and KCM, four KWOK nodes
# named and labelled as kind names and labels its workers, the real kubectl (context kind-gputwin),
# kubectl proxy, the CRDs and install manifests, and a real gputwin operator (a subprocess, backend
# kubernetes) standing in for the Deployment's container, which KWOK only pretends to run.

STUB_KIND = """#!/usr/bin/env bash
echo "kind $*" >>"$STUB_LOG"
case "$1 $2" in
  "get clusters") echo gputwin ;;
  "load docker-image") ;;
  *) echo "stub kind: unexpected: $*" >&2; exit 3 ;;
esac
"""
STUB_DOCKER = """#!/usr/bin/env bash
echo "docker $*" >>"$STUB_LOG"
case "$1 $2" in
  "image inspect") ;;
  *) echo "stub docker: unexpected: $*" >&2; exit 3 ;;
esac
"""


def kind_like_node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """A worker as kind registers it (no GPUs yet), managed by KWOK so that it is Ready and runs pods."""
    resources = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {**labels, "kubernetes.io/hostname": name}},
            "status": {"capacity": resources, "allocatable": resources}}  # fmt: skip


@pytest.fixture(scope="module")
def kind_like(k8s_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Its own control plane (scheduler + KCM) with kind's four workers; kubeconfig context kind-gputwin."""
    state = tmp_path_factory.mktemp("kind-like")
    started = subprocess.run(["bash", str(ROOT / "scripts" / "k8s" / "start.sh"), "--state", str(state),
                              "--with-scheduler", "--with-controller-manager"],
                             capture_output=True, text=True, timeout=180, check=False)  # fmt: skip
    try:
        assert started.returncode == 0, started.stderr
        config = yaml.safe_load((state / "kubeconfig").read_text())
        config["contexts"][0]["name"] = config["current-context"] = "kind-gputwin"
        kubeconfig = state / "kind-kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(config))
        stubs = state / "stubs"
        stubs.mkdir()
        for name, text in (("kind", STUB_KIND), ("docker", STUB_DOCKER)):
            (stubs / name).write_text(text)
            (stubs / name).chmod(0o755)
        yield {"state": state, "kubeconfig": kubeconfig, "stubs": stubs, "bin": k8s_bin}
    finally:
        subprocess.run(["bash", str(ROOT / "scripts" / "k8s" / "stop.sh"), "--state", str(state)],
                       capture_output=True, timeout=120, check=False)  # fmt: skip


def test_kind_up_end_to_end_with_mock_kind_and_docker(kind_like: dict[str, Path], tmp_path: Path) -> None:
    env = {**os.environ, "KUBECONFIG": str(kind_like["kubeconfig"]), "STUB_LOG": str(tmp_path / "stub.log"),
           "KUBECACHEDIR": str(tmp_path / "kubectl-cache"),
           "PATH": f"{kind_like['stubs']}:{kind_like['bin']}:{os.environ['PATH']}"}  # fmt: skip

    def kubectl(*args: str, input: str | None = None) -> str:
        done = subprocess.run([str(kind_like["bin"] / "kubectl"), *args], input=input, capture_output=True,
                              text=True, env=env, timeout=120, check=False)  # fmt: skip
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    nodes = [kind_like_node(name, labels) for name, labels in kind_workers().items()]
    kubectl("create", "-f", "-", input="\n---\n".join(json.dumps(n) for n in nodes))
    kubectl(
        "wait", "--for=condition=Ready", "--timeout=60s", *(f"node/{n['metadata']['name']}" for n in nodes)
    )
    kubectl("apply", "-k", str(ROOT / "crds"))  # before the operator starts: it reads the CRDs once
    kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", *CRD_NAMES)
    operator = subprocess.Popen(
        [sys.executable, "-c", "from gputwin.cli.main import main; main()", "operator", "--all-namespaces"],
        env={**env, "GPUTWIN_BACKEND": "kubernetes", "GPUTWIN_HEALTH_PORT": str(free_port())},
        stdout=(tmp_path / "operator.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        up = subprocess.run(["bash", str(SCRIPTS / "up.sh"), "--no-build"], capture_output=True, text=True,
                            env=env, timeout=400, check=False)  # fmt: skip
        assert up.returncode == 0, up.stderr[-4000:] + (tmp_path / "operator.log").read_text()[-3000:]
        check_up_results(kubectl, tmp_path, nodes)
    finally:
        operator.terminate()
        operator.wait(30)
        for sample in ("jobs.yaml", "cluster.yaml"):
            kubectl("delete", "--ignore-not-found", "--wait=false", "-f", str(SAMPLE / sample))


def check_up_results(kubectl: Any, tmp_path: Path, nodes: list[dict[str, Any]]) -> None:
    calls = (tmp_path / "stub.log").read_text().splitlines()
    assert "kind get clusters" in calls and not any(c.startswith("kind create") for c in calls)
    assert "kind load docker-image gputwin:dev busybox:1.36 --name gputwin" in calls
    for node in nodes:  # the GPU patch went to every worker, with its label's count
        status = json.loads(kubectl("get", "node", node["metadata"]["name"], "-o", "json"))["status"]
        want = node["metadata"]["labels"]["gputwin.io/gpus"]
        assert (
            status["capacity"]["nvidia.com/gpu"] == want and status["allocatable"]["nvidia.com/gpu"] == want
        )
    deployment = json.loads(
        kubectl("-n", "gputwin-system", "get", "deployment", "gputwin-operator", "-o", "json")
    )
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "GPUTWIN_BACKEND", "value": "kubernetes"} in env
    # The sample runs: every GPUJob and the plain Pod end up bound to kind's workers, gangs whole.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        pods = json.loads(kubectl("get", "pods", "-n", "default", "-o", "json"))["items"]
        bound = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods if p["spec"].get("nodeName")}
        jobs = {p["metadata"].get("annotations", {}).get("gputwin.io/job-id", p["metadata"]["name"])
                for p in pods if p["metadata"]["name"] in bound}  # fmt: skip
        if len(jobs) == 4:
            break
        time.sleep(1)
    assert len(jobs) == 4, (bound, kubectl("get", "gpujobs", "-n", "default", "-o", "wide"))
    assert set(bound.values()) <= {n["metadata"]["name"] for n in nodes}
    big = [p for p in pods if p["metadata"]["name"].startswith("llm-finetune-8gpu")]
    gpus = sum(int(c["resources"]["limits"]["nvidia.com/gpu"]) for p in big for c in p["spec"]["containers"]
               if "nvidia.com/gpu" in c["resources"].get("limits", {}))  # fmt: skip
    assert gpus == 8 and all(p["spec"].get("nodeName") for p in big), big  # the whole gang, bound
    assert len({p["spec"]["nodeName"] for p in big}) == len(big) >= 2  # one pod per 4-GPU worker
