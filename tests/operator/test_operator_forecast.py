"""The live twin on a REAL API server + KWOK: the Kubernetes snapshot, `gputwin forecast --kube`, and the
operator's `status.forecast`.

What runs: the control plane of `tests/k8s_control_plane.py`, four KWOK nodes `kf-0..3` (8
`nvidia.com/gpu` each, `scripts/k8s/fake-nodes.sh`, all under leaf0), the CRDs, a topology `kf`
with one partition `kf-train` (priority queue, first-fit) over them. The snapshot test writes the
GPUJobs' statuses itself (as a running operator would have: Running with an allocation, Queued in
the partition) and binds a pod of one running job to a node directly, then cordons kf-3; no
operator runs there. The shares test does the same with `gpuFraction` GPUJobs, their pods and
reservation pods (as the operator's Kubernetes backend makes them) on kf-0. The operator test
starts the operator (sim backend, forecast period 1 s) on the same cluster and waits for a queued job's and the partition's `status.forecast`. Offline (no
API server: an in-memory store of the same objects): the operator's measured start latency
(`GPUTWIN_FORECAST_START_LATENCY`) reaches the snapshot and moves the forecast starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from kubernetes import config
from test_operator_e2e import Operator, free_port, gpujob, installed, sa_kubeconfig, wait_for

from gputwin.adapters.kube.snapshot import read_snapshot
from gputwin.api.status import epoch_seconds, rfc3339
from gputwin.cli.main import cli
from gputwin.operator.forecasts import NICE, ForecastSettings, refresh, yield_cpu
from gputwin.operator.store import MemoryStore
from gputwin.twin.forecast import forecast

ROOT = Path(__file__).resolve().parents[2]
NODES = [f"kf-{i}" for i in range(4)]
TOLERATED = ("nvidia.com/gpu", "kwok.x-k8s.io/node")  # KWOK nodes carry kwok.x-k8s.io/node:NoSchedule
Obj = dict[str, Any]

__all__ = ["installed", "sa_kubeconfig"]  # fixtures, imported to be used

CLUSTER = """
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: kf}
spec:
  switches: [{name: leaf0}]
  nodeGroups: [{switch: leaf0, nodes: "kf-[0-3]", gpusPerNode: 8}]
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: kf-train}
spec: {topology: kf, taskTypes: [train], nodes: "kf-[0-3]", policy: kf-priority}
---
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: kf-priority}
spec: {queue: {policy: priority}, placement: {policy: first-fit}}
"""


@pytest.fixture(scope="module")
def cluster(crds: None, kube: Path, kubectl: Any) -> Iterator[None]:
    env = {**os.environ, "KUBECONFIG": str(kube)}
    subprocess.run(["bash", str(ROOT / "scripts/k8s/fake-nodes.sh"), "4", "8", "--prefix", "kf"], env=env,
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    kubectl.run("apply", "-f", "-", input=CLUSTER)
    yield
    kubectl.run("delete", "-f", "-", "--ignore-not-found", "--wait=false", input=CLUSTER, check=False)
    kubectl.run("delete", "node", *NODES, "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture
def namespace(kubectl: Any) -> Iterator[str]:
    import uuid

    name = f"kf-{uuid.uuid4().hex[:6]}"
    kubectl.run("create", "namespace", name)
    yield name
    kubectl.run("delete", "gpujobs", "--all", "-n", name, check=False)  # gone before another test's operator starts
    kubectl.run("delete", "namespace", name, "--wait=false", check=False)


def create_job(kubectl: Any, ns: str, name: str, gpus: int, priority: int, status: Obj | None) -> None:
    job = gpujob(name, ns, "train", gpus, 3600)
    job["spec"]["priority"] = priority
    kubectl.run("create", "-f", "-", input=json.dumps(job))
    if status is not None:
        kubectl.run("patch", "gpujob", name, "-n", ns, "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": status}))  # fmt: skip


def bound_pod(ns: str, name: str, node: str, job_id: str, gpus: int) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "annotations": {"gputwin.io/job-id": job_id}},
            "spec": {"schedulerName": "gputwin", "nodeName": node,
                     "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                     "containers": [{"name": "c", "image": "fake",
                                     "resources": {"requests": {"nvidia.com/gpu": str(gpus)},
                                                   "limits": {"nvidia.com/gpu": str(gpus)}}}]}}  # fmt: skip


def test_snapshot_and_forecast_of_the_live_cluster(cluster: None, kube: Path, kubectl: Any, namespace: str) -> None:
    """Two running jobs (one placed by its pod on kf-1, one by its allocation on kf-0), three
    queued in submit order low, high, mid, and kf-3 cordoned: the snapshot holds exactly that, in
    the priority policy's order, and the forecast starts the high-priority job first."""
    now = float(int(time.time()))
    alloc = {"slots": [{"node": "kf-0", "gpus": 8}], "since": rfc3339(now - 600), "runSeconds": 3600}
    running = {"phase": "Running", "partition": "kf-train", "submitTime": rfc3339(now - 900), "allocation": alloc}
    create_job(kubectl, namespace, "run-alloc", 8, 0, running)
    by_pod = {**running, "allocation": {**alloc, "slots": [{"node": "kf-2", "gpus": 8}]}}  # the pod says kf-1
    create_job(kubectl, namespace, "run-pod", 8, 0, by_pod)
    kubectl.run("create", "-f", "-", input=json.dumps(bound_pod(namespace, "run-pod-0", "kf-1",
                                                                 f"{namespace}/run-pod", 8)))  # fmt: skip
    for i, (name, priority) in enumerate((("low", 1), ("high", 9), ("mid", 5))):
        create_job(kubectl, namespace, name, 8, priority,
                   {"phase": "Queued", "partition": "kf-train", "submitTime": rfc3339(now - 300 + i)})
    kubectl.run("cordon", "kf-3")
    try:
        api = config.new_client_from_config(config_file=str(kube))  # type: ignore[no-untyped-call]
        _, snap = read_snapshot(api, namespace, TOLERATED)
        ours = {r.job_id: r for r in snap.running}
        assert ours[f"{namespace}/run-alloc"].slots == (("kf-0", 8),)
        assert ours[f"{namespace}/run-pod"].slots == (("kf-1", 8),)  # from its pod, not its allocation
        assert ours[f"{namespace}/run-alloc"].start == now - 600 and ours[f"{namespace}/run-alloc"].estimate == 3600
        assert [j.job_id.split("/")[1] for j in snap.pending] == ["high", "mid", "low"]
        assert [(o.node, o.state) for o in snap.out_of_service] == [("kf-3", "cordoned (spec.unschedulable)")]
        env = {"KUBECONFIG": "", "GPUTWIN_TOLERATED_TAINTS": ",".join(TOLERATED)}
        result = CliRunner().invoke(cli, ["forecast", "--kube", "--kubeconfig", str(kube), "--namespace",
                                          namespace, "--samples", "8", "--json"], env=env)  # fmt: skip
        assert result.exit_code == 0, result.output
        doc = json.loads(result.output.strip().splitlines()[-1])
        starts = {j["job_id"].split("/")[1]: j["start_p50_s"] for j in doc["jobs"]}
        # kf-2 is the one free node: high starts now; mid and low wait for the running jobs' ends
        assert starts["high"] is not None and starts["high"] < 5
        assert starts["mid"] is not None and 0 < starts["mid"] <= starts["low"]
    finally:
        kubectl.run("uncordon", "kf-3")


def share_pods(ns: str) -> list[Obj]:
    """On kf-0: reservation pods r0 (slot 0) and r1 (slot 1), quarter shares qa, qb on r0 and qc on r1."""
    pods = []
    for name, slot in (("r0", 0), ("r1", 1)):
        pod = bound_pod(ns, name, "kf-0", "", 1)
        pod["metadata"] = {"name": name, "namespace": ns, "labels": {"gputwin.io/gpu-reservation": str(slot)}}
        pods.append(pod)
    for job, gpu in (("qa", "r0"), ("qb", "r0"), ("qc", "r1")):
        pod = bound_pod(ns, f"{job}-0", "kf-0", f"{ns}/{job}", 0)
        pod["spec"]["containers"][0]["resources"] = {}
        pod["metadata"]["annotations"].update({"gputwin.io/gpu-fraction-milli": "250",
                                               "gputwin.io/gpu-reservation": gpu,
                                               "gputwin.io/gpu-reservation-namespace": ns})  # fmt: skip
        pods.append(pod)
    return pods


def test_shares_on_the_live_cluster_hold_the_gpus_of_their_reservation_pods(
        cluster: None, kube: Path, kubectl: Any, namespace: str) -> None:  # fmt: skip
    """kf-0 alone in service: a 6-GPU job and three quarter shares on two reservation pods fill it.
    The snapshot puts qa and qb on one GPU and qc on another, so a waiting 1-GPU job waits for an
    end: counted whole the shares would over-fill kf-0 (9 GPUs), packed onto one GPU they would
    leave one free."""
    now = float(int(time.time()))
    since = {"since": rfc3339(now - 600), "runSeconds": 3600}
    whole = {"phase": "Running", "partition": "kf-train", "submitTime": rfc3339(now - 900),
             "allocation": {"slots": [{"node": "kf-0", "gpus": 6}], **since}}  # fmt: skip
    create_job(kubectl, namespace, "six", 6, 0, whole)
    share = {**whole, "allocation": {"slots": [{"node": "kf-0", "gpus": 1}], **since}}
    for name in ("qa", "qb", "qc"):
        job = gpujob(name, namespace, "train", 1, 3600)
        job["spec"]["gpuFraction"] = 0.25
        kubectl.run("create", "-f", "-", input=json.dumps(job))
        kubectl.run("patch", "gpujob", name, "-n", namespace, "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": share}))  # fmt: skip
    create_job(kubectl, namespace, "w", 1, 0, {"phase": "Queued", "partition": "kf-train",
                                                "submitTime": rfc3339(now - 60)})  # fmt: skip
    for pod in [bound_pod(namespace, "six-0", "kf-0", f"{namespace}/six", 6), *share_pods(namespace)]:
        kubectl.run("create", "-f", "-", input=json.dumps(pod))
    kubectl.run("cordon", "kf-1", "kf-2", "kf-3")
    try:
        api = config.new_client_from_config(config_file=str(kube))  # type: ignore[no-untyped-call]
        declared, snap = read_snapshot(api, namespace, TOLERATED)
        shares = {r.job_id.split("/")[1]: (r.slots, r.gpu_milli, r.share_gpu) for r in snap.running
                  if r.gpu_milli < 1000}  # fmt: skip
        assert shares == {"qa": ((("kf-0", 1),), 250, 0), "qb": ((("kf-0", 1),), 250, 0),
                          "qc": ((("kf-0", 1),), 250, 1)}  # fmt: skip
        result = forecast(declared, snap, samples=4, seed=1, horizon=86400.0)
        assert not result.left_out, result.left_out
        start = next(j.start_p50 for j in result.jobs if j.job_id == f"{namespace}/w")
        assert start is not None and start > snap.taken_at + 5  # no GPU of kf-0 is free now
    finally:
        kubectl.run("uncordon", "kf-1", "kf-2", "kf-3")


def test_kube_forecast_with_a_bad_context_is_one_line(kube: Path) -> None:
    result = CliRunner().invoke(cli, ["forecast", "--kube", "--kubeconfig", str(kube), "--context", "nope"])
    assert result.exit_code == 2 and "kubeconfig" in result.output and "Traceback" not in result.output


@pytest.fixture
def operator(cluster: None, sa_kubeconfig: Path, tmp_path: Path) -> Iterator[Operator]:
    env = {**os.environ, "KUBECONFIG": str(sa_kubeconfig), "GPUTWIN_BACKEND": "sim", "GPUTWIN_NAMESPACE": "",
           "GPUTWIN_FORECAST_SECONDS": "1", "GPUTWIN_FORECAST_SAMPLES": "8"}  # fmt: skip
    running = Operator(env, tmp_path, tmp_path, free_port())
    running.env["GPUTWIN_HEALTH_PORT"] = str(running.port)
    running.start()
    yield running
    running.stop()


def test_operator_writes_forecasts_on_its_period(operator: Operator, kubectl: Any, namespace: str) -> None:
    """Four whole-cluster jobs of an hour (simulated): one runs, three queue. Within the period the
    queued ones get `status.forecast` (start p50 about 1 h, 2 h, 3 h later, in priority order) and
    the partition its drain time; the printer column shows the p50."""
    for name, priority in (("first", 9), ("c", 1), ("b", 5), ("a", 7)):
        create_job(kubectl, namespace, name, 32, priority, None)
        if name == "first":
            wait_for("first running", lambda: kubectl.json("get", "gpujob", "first", "-n", namespace)
                     .get("status", {}).get("phase") == "Running", 60, on_timeout=operator.tail)  # fmt: skip

    def forecasts() -> dict[str, Obj] | None:
        jobs = kubectl.json("get", "gpujobs", "-n", namespace)["items"]
        found = {j["metadata"]["name"]: j["status"].get("forecast") for j in jobs if j.get("status")}
        return found if all(found.get(n) for n in "abc") else None

    found = wait_for("forecasts on the queued jobs", forecasts, 60, on_timeout=operator.tail)
    assert found is not None and found.get("first") is None  # running: no forecast
    starts = {n: epoch_seconds(found[n]["startTime"]["p50"]) - epoch_seconds(found[n]["computedAt"]) for n in "abc"}
    assert 1200 < starts["a"] < starts["b"] < starts["c"] < 6 * 3600, starts
    # The partition's status is written apart from the jobs' (the status writer's own order): poll for it too.
    drain = wait_for("the partition's drain time", lambda: kubectl.json("get", "gpupartition", "kf-train")
                     .get("status", {}).get("forecast", {}).get("drainSeconds"), 60, on_timeout=operator.tail)  # fmt: skip
    assert drain["p50"] == pytest.approx(starts["c"], abs=60)
    table = kubectl.run("get", "gpujobs", "-n", namespace).stdout
    assert "START-P50" in table.splitlines()[0] and found["a"]["startTime"]["p50"] in table


# --- offline: the measured start latency in the operator's forecast snapshot ----------------------------


def memory_cluster(now: float) -> MemoryStore:
    """CLUSTER in memory, one whole-cluster job of an hour running for 600 s, two more queued behind it."""
    store = MemoryStore(d for d in yaml.safe_load_all(CLUSTER) if d)
    alloc = {"slots": [{"node": n, "gpus": 8} for n in NODES], "since": rfc3339(now - 600), "runSeconds": 3600}
    statuses = {"first": {"phase": "Running", "partition": "kf-train", "submitTime": rfc3339(now - 900),
                          "allocation": alloc},
                "a": {"phase": "Queued", "partition": "kf-train", "submitTime": rfc3339(now - 300)},
                "b": {"phase": "Queued", "partition": "kf-train", "submitTime": rfc3339(now - 299)}}  # fmt: skip
    for name, status in statuses.items():
        store.put({**gpujob(name, "ns", "train", 32, 3600), "status": status})
    return store


def forecast_starts(latency: float) -> dict[str, float]:
    now = float(int(time.time()))
    store = memory_cluster(now)
    written = refresh(store, now, ForecastSettings(samples=2, start_latency=latency))
    assert written == 3  # a, b and the partition
    jobs = {n: store.get("GPUJob", "ns", n) for n in ("a", "b")}
    return {n: epoch_seconds(j["status"]["forecast"]["startTime"]["p50"]) - now for n, j in jobs.items() if j}


@pytest.mark.parametrize("latency", [0.0, 45.0, 300.0], ids=["not-modelled", "measured", "slow-operator"])
def test_forecast_snapshot_carries_the_measured_start_latency(latency: float) -> None:
    """The same seeded draws of the run times with and without the latency: `a` starts `latency`
    after the running job's end made room, `b` `latency` after `a`'s end: each link of the chain moves
    by it once more (the running job's own latency is behind it)."""
    instant, delayed = forecast_starts(0.0), forecast_starts(latency)
    assert instant["a"] > 0 and instant["b"] > instant["a"] + 600
    assert {n: delayed[n] - instant[n] for n in "ab"} == {"a": latency, "b": 2 * latency}


def _niceness_after_yield(out: Any) -> None:
    before = os.nice(0)
    yield_cpu()
    out.put(os.nice(0) - before)


def test_a_forecast_round_yields_the_cpu_to_the_operator() -> None:
    """The round's child lowers its own priority (never the operator's: a child process of its own)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    child = context.Process(target=_niceness_after_yield, args=(out,))
    child.start()
    child.join(60)
    assert out.get(timeout=5) == min(NICE, 19 - os.nice(0))  # nice caps at 19
    assert child.exitcode == 0


def test_forecast_settings_pass_the_start_latency_from_the_environment() -> None:
    settings = ForecastSettings.from_env({"GPUTWIN_FORECAST_START_LATENCY": "1.5", "GPUTWIN_FORECAST_SAMPLES": "2"})
    assert (settings.start_latency, settings.samples) == (1.5, 2)
    assert ForecastSettings.from_env({}).start_latency == 0.0  # unset: not modelled, as before
