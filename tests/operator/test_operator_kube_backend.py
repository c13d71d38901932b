"""The Kubernetes backend end to end: GPUJobs and plain Pods bound to KWOK GPU nodes of a REAL API server.

What runs: the control plane of `tests/k8s_control_plane.py` (kube-apiserver, etcd, KCM, KWOK with the
`gputwin-pod-complete` stage), eight KWOK nodes `kb-0..7` with 8 `nvidia.com/gpu` each made by
`scripts/k8s/fake-nodes.sh` (label `gputwin.io/switch`: kb-0..3 leaf0, kb-4..7 leaf1), the CRDs,
the install manifests, and the operator as a subprocess with `GPUTWIN_BACKEND=kubernetes` and the
token of its own ServiceAccount (so its RBAC is enough for pods, bindings and nodes).

The declared cluster gives placement a real choice: kb-1..3 and kb-5 are declared with 4 GPUs, so
a 16-GPU job fits two whole 8-GPU nodes only across both leaves (what consolidate picks) or on one
leaf over three nodes (what topology-aware picks). Partition `train` is kb-0..5, `infer` kb-6..7.
Every placer registered in the core is run on the same three jobs and told apart by the pods' nodes
and `gputwin.io/switches`; a TraceReplay with `promote: true` switches `infer` from fifo to sjf while
jobs queue, and they then run in sjf's order, none lost, none started twice.

KWOK ends a pod `gputwin.io/run-duration` after it runs: GPUJobs here simulate 1–6 s. Everything
waits by polling with a deadline; each test deletes what it made (its namespace, its policy edits).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import urllib.request
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, get_args

import pytest
from test_operator_e2e import (  # the same helpers and module fixtures as the sim end-to-end tests
    KOPF_RUN,
    Api,
    Operator,
    api,
    dump,
    free_port,
    gpujob,
    installed,
    namespace,
    sa_kubeconfig,
    wait_for,
)

from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.api.meta import PlacementPolicy
from gputwin.api.resources import demo_trace_path
from gputwin.api.status import epoch_seconds
from gputwin.core.model import JobSpec
from gputwin.core.plugins import PLACERS
from gputwin.core.scheduler import Scheduler
from gputwin.sim.engine import simulate

ROOT = Path(__file__).resolve().parents[2]
NODES = [f"kb-{i}" for i in range(8)]
TRAIN, INFER = NODES[:6], NODES[6:]
GPUS_PER_NODE = 8
TOLERATED = "nvidia.com/gpu,kwok.x-k8s.io/node"  # KWOK nodes carry kwok.x-k8s.io/node:NoSchedule
Obj = dict[str, Any]

__all__ = ["api", "installed", "namespace", "sa_kubeconfig"]  # fixtures, imported to be used

CLUSTER = """
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: kb}
spec:
  switches: [{name: spine}, {name: leaf0, parent: spine}, {name: leaf1, parent: spine}]
  nodeGroups:
    - {switch: leaf0, nodes: "kb-0", gpusPerNode: 8}
    - {switch: leaf0, nodes: "kb-[1-3]", gpusPerNode: 4}
    - {switch: leaf1, nodes: "kb-4", gpusPerNode: 8}
    - {switch: leaf1, nodes: "kb-5", gpusPerNode: 4}
    - {switch: leaf1, nodes: "kb-[6-7]", gpusPerNode: 8}
  commOverhead: {perTier: 0.1, crossNode: 0.05}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: train}
spec: {topology: kb, taskTypes: [train], nodes: "kb-[0-5]", policy: kb-train}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: infer}
spec: {topology: kb, taskTypes: [infer], nodes: "kb-[6-7]", policy: kb-infer}
---
{policies}
"""
POLICY = {"queue": {"policy": "fifo"}, "placement": {"policy": "consolidate"}}


def policy(name: str, spec: Obj) -> Obj:
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "SchedulingPolicy", "metadata": {"name": name},
            "spec": spec}  # fmt: skip


# --- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kwok_nodes(kube: Path, kubectl: Any) -> Iterator[list[str]]:
    env = {**os.environ, "KUBECONFIG": str(kube)}
    subprocess.run(["bash", str(ROOT / "scripts/k8s/fake-nodes.sh"), "8", str(GPUS_PER_NODE), "--prefix", "kb",
                    "--nodes-per-leaf", "4"], env=env, check=True, capture_output=True, timeout=120)  # fmt: skip
    yield NODES
    kubectl.run("delete", "node", *NODES, "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture(scope="module")
def cluster(crds: None, kubectl: Any, kwok_nodes: list[str]) -> Iterator[None]:
    policies = dump(policy("kb-train", POLICY), policy("kb-infer", POLICY))
    text = CLUSTER.replace("{policies}", policies)
    kubectl.run("apply", "-f", "-", input=text)
    yield
    kubectl.run("delete", "-f", "-", "--ignore-not-found", "--wait=false", input=text, check=False)


@pytest.fixture(scope="module")
def operator(cluster: None, sa_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    work = tmp_path_factory.mktemp("kube-operator")
    env = {**os.environ, "KUBECONFIG": str(sa_kubeconfig), "GPUTWIN_BACKEND": "kubernetes",
           "GPUTWIN_NAMESPACE": "", "GPUTWIN_TOLERATED_TAINTS": TOLERATED}  # fmt: skip
    running = Operator(env, work, work, free_port())
    running.env["GPUTWIN_HEALTH_PORT"] = str(running.port)
    running.start()
    yield running
    running.stop()


@pytest.fixture
def set_policy(kubectl: Any, api: Api) -> Iterator[Any]:
    """Change a partition's policy for one test (waiting until the operator runs it); restored after."""
    changed: list[str] = []

    def change(name: str, spec: Obj) -> None:
        changed.append(name)
        kubectl.run("apply", "-f", "-", input=dump(policy(name, spec)))
        generation = api.get("schedulingpolicies", name)["metadata"]["generation"]
        wait_for(f"policy {name} generation {generation} deployed", lambda: api.status("schedulingpolicies", name)
                 .get("observedGeneration") == generation, 20)  # fmt: skip

    yield change
    for name in dict.fromkeys(changed):  # restored, and deployed before the next test runs
        kubectl.run("apply", "-f", "-", input=dump(policy(name, POLICY)))
        generation = api.get("schedulingpolicies", name)["metadata"]["generation"]
        wait_for(f"policy {name} restored", partial(observed, api, name, generation), 20)


# --- helpers ----------------------------------------------------------------------------------------


def pods_of(api: Api, namespace: str, job: str | None = None) -> list[Obj]:
    selector = f"gputwin.io/job={job}" if job else ""
    got = api.core.list_namespaced_pod(namespace, label_selector=selector)
    return [api.core.api_client.sanitize_for_serialization(p) for p in got.items]


def gpus(pod: Obj) -> int:
    limits = pod["spec"]["containers"][0].get("resources", {}).get("limits", {})
    requests = pod["spec"]["containers"][0].get("resources", {}).get("requests", {})
    assert limits.get("nvidia.com/gpu") == requests.get("nvidia.com/gpu"), pod["spec"]["containers"][0]
    return int(limits.get("nvidia.com/gpu", 0))


def holding(pod: Obj) -> bool:
    """Bound and still holding its GPUs (not ended, not being deleted)."""
    return bool(pod["spec"].get("nodeName")) and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed") \
        and not pod["metadata"].get("deletionTimestamp")  # fmt: skip


def node_load(api: Api) -> Counter[str]:
    """GPUs per node of every bound, running pod in the cluster (what a kubelet would admit)."""
    used: Counter[str] = Counter()
    for pod in api.core.list_pod_for_all_namespaces().items:
        raw = api.core.api_client.sanitize_for_serialization(pod)
        if holding(raw) and raw["spec"]["nodeName"] in NODES:
            used[raw["spec"]["nodeName"]] += gpus(raw)
    return used


def assert_not_overallocated(api: Api) -> Counter[str]:
    load = node_load(api)
    assert all(g <= GPUS_PER_NODE for g in load.values()), f"over-allocated: {load}"
    return load


def passes(operator: Operator) -> int:
    """Reconcile passes the operator has completed (its /readyz detail)."""
    with urllib.request.urlopen(operator.url("/readyz"), timeout=2) as answer:
        return int(json.loads(answer.read())["passes"])


def passed(operator: Operator, count: int) -> bool:
    return passes(operator) >= count


def observed(api: Api, policy_name: str, generation: int) -> bool:
    """Whether the operator runs this generation of the SchedulingPolicy."""
    return bool(api.status("schedulingpolicies", policy_name).get("observedGeneration") == generation)


def poke_and_wait_for_a_pass(operator: Operator, kubectl: Any, node: str) -> None:
    """Wait until a pass that started after now has completed: touch a node (the node watch pokes
    the loop), see one more pass, touch it again, see another. The second pass starts after the
    first one ended, and that one ended after the first touch or was followed by a pass for it."""
    before = passes(operator)
    for more in (1, 2):
        kubectl.run("label", "node", node, f"e2e-poke={os.urandom(2).hex()}", "--overwrite")
        wait_for("a reconcile pass after the poke", partial(passed, operator, before + more), 10)


def phase_of(api: Api, namespace: str, name: str) -> str:
    return str(api.phases(namespace).get(name, ""))


def events_of(api: Api, namespace: str, name: str, kind: str = "GPUJob") -> list[str]:
    return [reason for who, reason in api.events(namespace, kind) if who == name]


# --- placement --------------------------------------------------------------------------------------


def test_jobs_are_routed_by_task_type_and_run_as_pods_bound_in_their_partition(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    kubectl.run("apply", "-f", "-", input=dump(gpujob("t", namespace, "train", 8, 2), gpujob("i", namespace, "infer", 4, 2)))
    wait_for("both jobs Running", lambda: api.phases(namespace) == {"t": "Running", "i": "Running"}, 20,
             on_timeout=operator.tail)  # fmt: skip
    for job, partition, nodes, want in (("t", "train", TRAIN, 8), ("i", "infer", INFER, 4)):
        (pod,) = pods_of(api, namespace, job)
        meta, spec = pod["metadata"], pod["spec"]
        assert meta["name"] == f"{job}-0-0" and spec["schedulerName"] == "gputwin"
        assert spec["nodeName"] in nodes and gpus(pod) == want
        assert meta["labels"]["gputwin.io/partition"] == partition
        assert meta["annotations"]["gputwin.io/run-duration"] == "2.000s"
        assert meta["annotations"]["gputwin.io/comm-overhead"] == "0"
        assert meta["ownerReferences"][0]["name"] == job  # deleting the GPUJob collects its pods
        status = api.status("gpujobs", job, namespace)
        assert status["nodes"] == spec["nodeName"] and status["partition"] == partition
    # consolidate: the 8-GPU job fills a whole 8-GPU node of train (kb-0 or kb-4), best fit
    assert pods_of(api, namespace, "t")[0]["spec"]["nodeName"] in ("kb-0", "kb-4")
    wait_for("both jobs to succeed when KWOK ends their pods",
             lambda: api.phases(namespace) == {"t": "Succeeded", "i": "Succeeded"}, 20, on_timeout=operator.tail)  # fmt: skip
    assert all(p["status"]["phase"] == "Succeeded" for p in pods_of(api, namespace))


def test_a_multi_node_job_is_bound_all_or_nothing(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    """A 16-GPU job needs two pods; while its second pod cannot be placed (a pod of that name is
    bound elsewhere), the first is deleted again: the job stays Queued with none bound."""
    blocker = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "g-0-1", "namespace": namespace},
               "spec": {"nodeName": "kb-7", "containers": [{"name": "c", "image": "pause"}],
                        "tolerations": [{"operator": "Exists"}]}}  # fmt: skip
    kubectl.run("apply", "-f", "-", input=dump(blocker))
    kubectl.run("apply", "-f", "-", input=dump(gpujob("g", namespace, "train", 16, 2)))
    # Backoff doubles (1, 2, 4 s): right after the third failure is announced nothing is retried for 4 s.
    wait_for("three failed gang starts", lambda: events_of(api, namespace, "g").count("FailedStart") >= 3, 30,
             on_timeout=operator.tail)  # fmt: skip
    assert [p for p in pods_of(api, namespace, "g") if p["spec"].get("nodeName")] == []
    assert phase_of(api, namespace, "g") == "Queued"
    kubectl.run("delete", "pod", "g-0-1", "-n", namespace, "--grace-period=0", "--force")
    wait_for("the gang to run", lambda: phase_of(api, namespace, "g") == "Running", 40, on_timeout=operator.tail)
    pods = pods_of(api, namespace, "g")
    assert sorted(p["metadata"]["name"] for p in pods) == ["g-0-0", "g-0-1"]
    assert all(p["spec"].get("nodeName") for p in pods) and sum(gpus(p) for p in pods) == 16
    # consolidate: the fewest nodes (two whole 8-GPU ones) even though that spans both leaves
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["kb-0", "kb-4"]
    assert {p["metadata"]["annotations"]["gputwin.io/switches"] for p in pods} == {"leaf0,leaf1"}
    assert pods[0]["metadata"]["annotations"]["gputwin.io/comm-overhead"] == "0.15"  # 5% cross-node + 10% tier


def test_topology_aware_keeps_the_job_under_one_leaf(
    operator: Operator, api: Api, kubectl: Any, namespace: str, set_policy: Any
) -> None:
    set_policy("kb-train", {"queue": {"policy": "fifo"}, "placement": {"policy": "topology-aware", "maxWaitSeconds": 60}})
    kubectl.run("apply", "-f", "-", input=dump(gpujob("ta", namespace, "train", 16, 1)))
    wait_for("the job to run", lambda: phase_of(api, namespace, "ta") == "Running", 20, on_timeout=operator.tail)
    pods = pods_of(api, namespace, "ta")
    nodes = sorted(p["spec"]["nodeName"] for p in pods)
    assert set(nodes) <= {"kb-0", "kb-1", "kb-2", "kb-3"} and sum(gpus(p) for p in pods) == 16, nodes
    assert {p["metadata"]["annotations"]["gputwin.io/switches"] for p in pods} == {"leaf0"}
    assert api.status("gpujobs", "ta", namespace)["switches"] == 1


# --- every registered placer, one table -----------------------------------------------------------

# Three train jobs in one apply, so each is placed beside the earlier ones still running; with the
# declared 8/4/4/4 | 8/4 GPUs per node, every placer then picks different nodes (derived by hand
# from core/placement.py, and checked against the core itself below). job -> (GPUs per node, switches)
PLACED = (("a", 4), ("b", 12), ("c", 8))
DECLARED = {"kb-0": 8, "kb-1": 4, "kb-2": 4, "kb-3": 4, "kb-4": 8, "kb-5": 4, "kb-6": 8, "kb-7": 8}
LEAF = {n: "leaf0" if n in ("kb-0", "kb-1", "kb-2", "kb-3") else "leaf1" for n in NODES}
EXPECTED_PLACEMENT: dict[str, dict[str, tuple[dict[str, int], str]]] = {
    "first-fit": {"a": ({"kb-0": 4}, "leaf0"),  # node by node in index order, scattered
                  "b": ({"kb-0": 4, "kb-1": 4, "kb-2": 4}, "leaf0"),
                  "c": ({"kb-3": 4, "kb-4": 4}, "leaf0,leaf1")},
    "consolidate": {"a": ({"kb-1": 4}, "leaf0"),  # best fit on the fewest nodes
                    "b": ({"kb-4": 8, "kb-5": 4}, "leaf1"),
                    "c": ({"kb-0": 8}, "leaf0")},
    "topology-aware": {"a": ({"kb-5": 4}, "leaf1"),  # the best-fit leaf first
                       "b": ({"kb-0": 8, "kb-1": 4}, "leaf0"),
                       "c": ({"kb-2": 4, "kb-3": 4}, "leaf0")},
}  # fmt: skip
API_PLACERS = get_args(PlacementPolicy)  # what a SchedulingPolicy may name


def placement_spec(placer: str) -> Obj:
    placement: Obj = {"policy": placer}
    if placer == "topology-aware":
        placement["maxWaitSeconds"] = 60
    return {"queue": {"policy": "fifo"}, "placement": placement}


def core_placements(folder: Path, spec: Obj) -> dict[str, dict[str, int]]:
    """What the scheduling core itself (same declaration, same default seed) gives PLACED on train."""
    placer = spec["placement"]["policy"]
    declared = spec if placer in API_PLACERS else {**spec, "placement": {"policy": "first-fit"}}
    path = folder / "cluster.yaml"
    policies = dump(policy("kb-train", declared), policy("kb-infer", POLICY))
    path.write_text(CLUSTER.replace("{policies}", policies))
    cluster = load_cluster(path)
    parts = tuple(dataclasses.replace(p, policy=dataclasses.replace(p.policy, placement=placer))
                  if p.name == "train" else p for p in cluster.partitions)  # fmt: skip
    scheduler = Scheduler(dataclasses.replace(cluster, partitions=parts))
    placed: dict[str, dict[str, int]] = {}
    for order, (name, gpus) in enumerate(PLACED):
        scheduler.submit(JobSpec(job_id=name, submit=order, duration=60, gpus=gpus, task_type="train"), order)
        for start in scheduler.run_cycle(order).starts:
            placed[start.job_id] = {scheduler.topology.node_names[i]: g for i, g in start.slots}
    return placed


def placed_pods(api: Api, namespace: str, job: str, gpus_asked: int) -> dict[str, int]:
    """GPUs per node of one job's pods, checking what holds for ANY placer: every pod bound (the
    gang all-or-nothing), one pod per node, in the job's partition, GPUs as asked, and the
    switch annotation naming exactly the leaves of its nodes."""
    pods = pods_of(api, namespace, job)
    assert pods and all(p["spec"].get("nodeName") for p in pods), [p["metadata"]["name"] for p in pods]
    placed = {p["spec"]["nodeName"]: gpus(p) for p in pods}
    assert len(placed) == len(pods) and set(placed) <= set(TRAIN), placed
    assert sum(placed.values()) == gpus_asked, placed
    switches = {p["metadata"]["annotations"]["gputwin.io/switches"] for p in pods}
    assert switches == {",".join(sorted({LEAF[n] for n in placed}))}, (placed, switches)
    assert api.status("gpujobs", job, namespace)["switches"] == len({LEAF[n] for n in placed})
    return placed


@pytest.mark.parametrize("placer", sorted(PLACERS))
def test_every_registered_placer_places_the_jobs_pods(
    operator: Operator, api: Api, kubectl: Any, namespace: str, set_policy: Any, tmp_path: Path, placer: str
) -> None:
    spec = placement_spec(placer)
    if placer not in API_PLACERS:  # registered in the core, not (yet) accepted by the API
        done = kubectl.run("apply", "-f", "-", input=dump(policy("kb-train", spec)), check=False)
        if done.returncode != 0:
            assert "spec.placement.policy" in done.stderr and placer in done.stderr, done.stderr
            pytest.xfail(f"placer {placer!r} is registered in core/plugins.py but not in the API's "
                         f"PlacementPolicy vocabulary (api/meta.py): the API server refuses it")  # fmt: skip
    set_policy("kb-train", spec)
    wait_for("train to be idle", lambda: api.status("gpupartitions", "train").get("freeGPUs") == 32, 30)
    # Long runs, so all three still hold their GPUs when the last is placed (the namespace's
    # deletion stops them; the next test waits for `train` to be idle).
    jobs = [gpujob(name, namespace, "train", gpus, 60) for name, gpus in PLACED]
    kubectl.run("apply", "-f", "-", input=dump(*jobs))
    wait_for("every job to run", lambda: set(api.phases(namespace).values()) == {"Running"}
             and len(api.phases(namespace)) == len(PLACED), 30, on_timeout=operator.tail)  # fmt: skip
    placed = {name: placed_pods(api, namespace, name, gpus) for name, gpus in PLACED}
    load: Counter[str] = Counter()
    for nodes in placed.values():
        load.update(nodes)
    assert all(load[n] <= DECLARED[n] for n in load), f"more GPUs than declared: {load}"
    assert placed == core_placements(tmp_path, spec)  # deterministic: what the core gives, seeded as it is
    if placer in EXPECTED_PLACEMENT:
        for name, (nodes, switches) in EXPECTED_PLACEMENT[placer].items():
            switches_seen = pods_of(api, namespace, name)[0]["metadata"]["annotations"]["gputwin.io/switches"]
            assert (placed[name], switches_seen) == (nodes, switches), name


# --- preemption -------------------------------------------------------------------------------------


# --- queue policies: the order jobs start in -------------------------------------------------------

# Three 16-GPU jobs wait behind a blocker on the 16-GPU infer partition, so they run one at a time,
# in the order the policy gives: (name, durationSeconds, priority), created in this order.
QUEUED = (("a", 4, 1), ("b", 2, 3), ("c", 3, 2))
EXPECTED = {"fifo": ["a", "b", "c"], "sjf": ["b", "c", "a"], "priority": ["b", "c", "a"], "qssf": ["b", "c", "a"]}


def queued_job(name: str, namespace: str, seconds: float, priority: int, job_name: str | None = None) -> Obj:
    job = gpujob(name, namespace, "infer", 16, seconds)
    job["spec"].update(priority=priority, jobName=job_name or name)
    return job


@pytest.mark.parametrize("queue", list(EXPECTED))
def test_queued_jobs_start_in_the_order_of_the_partitions_policy(
    operator: Operator, api: Api, kubectl: Any, namespace: str, set_policy: Any, queue: str
) -> None:
    set_policy("kb-infer", {"queue": {"policy": queue}, "placement": {"policy": "consolidate"}})
    if queue == "qssf":  # history from finished GPUJobs: a ran 4 s, b 2 s, c 3 s (1 GPU each, at once)
        history = [queued_job(f"past-{n}", namespace, d, 0, job_name=n) for n, d, _ in QUEUED]
        for job in history:
            job["spec"]["gpus"] = 1
        kubectl.run("apply", "-f", "-", input=dump(*history))
        wait_for("the history jobs to succeed", lambda: {v for k, v in api.phases(namespace).items()
                 if k.startswith("past-")} == {"Succeeded"}, 30, on_timeout=operator.tail)  # fmt: skip
    kubectl.run("apply", "-f", "-", input=dump(gpujob("blocker", namespace, "infer", 16, 3)))
    wait_for("the blocker to run", lambda: phase_of(api, namespace, "blocker") == "Running", 20, on_timeout=operator.tail)
    # qssf knows durations only from history: the queued jobs all simulate 2 s, their names differ.
    jobs = [queued_job(n, namespace, 2 if queue == "qssf" else d, prio) for n, d, prio in QUEUED]
    kubectl.run("apply", "-f", "-", input=dump(*jobs))
    names = [n for n, _, _ in QUEUED]
    wait_for("the queued jobs to succeed", lambda: all(phase_of(api, namespace, n) == "Succeeded" for n in names),
             60, on_timeout=operator.tail)  # fmt: skip
    started = sorted(names, key=lambda n: api.status("gpujobs", n, namespace)["startTime"])
    assert started == EXPECTED[queue], {n: api.status("gpujobs", n, namespace)["startTime"] for n in names}
    assert_not_overallocated(api)


@pytest.mark.parametrize("queue", ["srtf", "las"])
def test_a_preemptive_policy_deletes_the_victims_pods_and_runs_it_again_later(
    operator: Operator, api: Api, kubectl: Any, namespace: str, set_policy: Any, queue: str
) -> None:
    spec: Obj = {"queue": {"policy": queue}, "placement": {"policy": "consolidate"}, "preemption": {"checkpointSeconds": 1}}
    if queue == "las":
        spec["params"] = {"las_thresholds": "8"}  # half a second on 16 GPUs: below any new job
    set_policy("kb-infer", spec)
    kubectl.run("apply", "-f", "-", input=dump(gpujob("long", namespace, "infer", 16, 6)))
    wait_for("the long job to run", lambda: phase_of(api, namespace, "long") == "Running", 20, on_timeout=operator.tail)
    assert sorted(p["metadata"]["name"] for p in pods_of(api, namespace, "long")) == ["long-0-0", "long-0-1"]
    kubectl.run("apply", "-f", "-", input=dump(gpujob("short", namespace, "infer", 8, 1)))

    def preempted() -> Obj | None:
        status = api.status("gpujobs", "long", namespace)
        return status if status.get("preemptions") else None

    status = wait_for("the long job to be preempted", preempted, 20, on_timeout=operator.tail)
    scheduled = next(c for c in status["conditions"] if c["type"] == "Scheduled")
    assert scheduled["reason"] == "Preempted" and "checkpoint and restore cost 1 s" in scheduled["message"]
    wait_for("the victim's pods to be deleted",
             lambda: not [p for p in pods_of(api, namespace, "long") if p["metadata"]["name"].startswith("long-0-")], 10)  # fmt: skip
    wait_for("both jobs to succeed", lambda: api.phases(namespace) == {"long": "Succeeded", "short": "Succeeded"},
             40, on_timeout=operator.tail)  # fmt: skip
    assert sorted(p["metadata"]["name"] for p in pods_of(api, namespace, "long")) == ["long-1-0", "long-1-1"]
    assert "Preempted" in events_of(api, namespace, "long")


# --- a TraceReplay promotes its winner while jobs queue --------------------------------------------

# Two 16-GPU jobs fill `infer` for hours and ten short ones queue behind them: shortest-first wins.
SJF_TRACE = "\n".join(
    ["job_id,user,vc,jobname,gpu_num,state,submit_time,duration"]
    + [f"{i},u,infer,long{i},16,COMPLETED,{i - 1},10000" for i in (1, 2)]
    + [f"{i},u,infer,short{i},16,COMPLETED,2,10" for i in range(3, 13)]
) + "\n"


def promoting_replay(namespace: str) -> list[Obj]:
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"jobs.csv": SJF_TRACE},
                 "metadata": {"name": "sjf-trace", "namespace": namespace}}  # fmt: skip
    replay = {"apiVersion": "gputwin.io/v1alpha1", "kind": "TraceReplay",
              "metadata": {"name": "go-sjf", "namespace": namespace},
              "spec": {"trace": {"configMap": {"name": "sjf-trace", "key": "jobs.csv"}, "format": "helios"},
                       "topology": "kb", "partitions": ["infer"], "objective": "avg_jct", "promote": True,
                       "candidates": [{"queue": "sjf", "placement": "consolidate"}]}}  # fmt: skip
    return [configmap, replay]


def test_a_promoted_replay_switches_the_live_policy_and_keeps_every_queued_job(
    operator: Operator, api: Api, kubectl: Any, namespace: str, set_policy: Any
) -> None:
    """Under fifo, a, b, c (16 GPUs each) queue behind a blocker that would run for 10 min; a
    TraceReplay promotes sjf into kb-infer. The scheduler is rebuilt under sjf with the blocker
    still running where it ran and every queued job still queued; once the blocker is deleted the
    three run one at a time in sjf's order (b 2 s, c 3 s, a 4 s), each exactly once. A plain Pod
    queued with them is kept and bound once as well."""
    set_policy("kb-infer", {"queue": {"policy": "fifo"}, "placement": {"policy": "consolidate"}})
    kubectl.run("apply", "-f", "-", input=dump(gpujob("blocker", namespace, "infer", 16, 600)))
    wait_for("the blocker to run", lambda: phase_of(api, namespace, "blocker") == "Running", 20,
             on_timeout=operator.tail)  # fmt: skip

    def blocker_pods() -> list[tuple[str, str]]:
        pods = pods_of(api, namespace, "blocker")
        return sorted((p["metadata"]["uid"], p["spec"]["nodeName"]) for p in pods)

    before = blocker_pods()
    names = [n for n, _, _ in QUEUED]
    kubectl.run("apply", "-f", "-", input=dump(*[queued_job(n, namespace, d, prio) for n, d, prio in QUEUED]))
    kubectl.run("apply", "-f", "-", input=dump(plain_pod("plain", namespace, 8, seconds=1)))  # queued too
    wait_for("the jobs to queue", lambda: all(phase_of(api, namespace, n) == "Queued" for n in names), 20,
             on_timeout=operator.tail)  # fmt: skip
    wait_for("four queued in infer", lambda: api.status("gpupartitions", "infer").get("queued") == 4, 20,
             on_timeout=operator.tail)  # fmt: skip

    kubectl.run("apply", "-f", "-", input=dump(*promoting_replay(namespace)))

    def promoted() -> Obj | None:
        status = api.status("tracereplays", "go-sjf", namespace)
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    status = wait_for("the replay to finish", promoted, 60, on_timeout=operator.tail)
    assert status["phase"] == "Succeeded" and status["promoted"] is True, status
    assert status["winner"] == "sjf/consolidate/as-requested", status
    # The status is written before its events are posted: the event may follow a moment later.
    wait_for("the Promoted event", lambda: ("go-sjf", "Promoted") in api.events(namespace, "TraceReplay"), 10)
    live = api.get("schedulingpolicies", "kb-infer")
    assert live["spec"]["queue"]["policy"] == "sjf", live["spec"]
    generation = live["metadata"]["generation"]
    wait_for("the promoted policy to be deployed", lambda: api.status("schedulingpolicies", "kb-infer")
             .get("observedGeneration") == generation, 20, on_timeout=operator.tail)  # fmt: skip
    # Rebuilt under sjf: nothing lost, nothing moved, nothing started early.
    assert {n: phase_of(api, namespace, n) for n in ["blocker", *names]} == {
        "blocker": "Running", **dict.fromkeys(names, "Queued")}  # fmt: skip
    assert blocker_pods() == before  # the same pods on the same nodes
    assert all(pods_of(api, namespace, n) == [] for n in names)
    (plain,) = [p for p in pods_of(api, namespace) if p["metadata"]["name"] == "plain"]
    assert not plain["spec"].get("nodeName"), plain["spec"]
    wait_for("infer's status after the rebuild",
             lambda: api.status("gpupartitions", "infer").get("queued") == 4, 10)  # fmt: skip

    kubectl.run("delete", "gpujob", "blocker", "-n", namespace, "--wait=false")
    wait_for("the queued jobs to succeed", lambda: all(phase_of(api, namespace, n) == "Succeeded"
             for n in names), 60, on_timeout=operator.tail)  # fmt: skip
    started = sorted(names, key=lambda n: api.status("gpujobs", n, namespace)["startTime"])
    assert started == EXPECTED["sjf"] != EXPECTED["fifo"], started
    (plain,) = [p for p in pods_of(api, namespace) if p["metadata"]["name"] == "plain"]
    assert plain["spec"]["nodeName"] in INFER and plain["status"]["phase"] == "Succeeded", plain["status"]
    assert Counter(api.events(namespace, "Pod"))[("plain", "Scheduled")] == 1
    events = Counter(api.events(namespace))
    for name in names:  # each ran once: one Scheduled event, the two pods of its first attempt
        assert events[(name, "Scheduled")] == 1, events
        pods = sorted(p["metadata"]["name"] for p in pods_of(api, namespace, name))
        assert pods == [f"{name}-0-0", f"{name}-0-1"], pods
    assert not [e for e in events if e[1] in ("Evicted", "FailedStart", "Preempted", "PodsLost")], events
    assert_not_overallocated(api)


# --- runs that end badly ----------------------------------------------------------------------------


def test_a_failed_pod_fails_the_job_and_frees_its_gpus(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    kubectl.run("apply", "-f", "-", input=dump(gpujob("f", namespace, "infer", 16, 60), gpujob("next", namespace, "infer", 8, 1)))
    wait_for("the first job to run", lambda: phase_of(api, namespace, "f") == "Running", 20, on_timeout=operator.tail)
    failed = {"status": {"phase": "Failed", "reason": "Error", "message": "exit code 3"}}
    kubectl.run("patch", "pod", "f-0-0", "-n", namespace, "--subresource=status", "--type=merge", "-p", json.dumps(failed))
    wait_for("the job to fail", lambda: phase_of(api, namespace, "f") == "Failed", 20, on_timeout=operator.tail)
    complete = next(c for c in api.status("gpujobs", "f", namespace)["conditions"] if c["type"] == "Complete")
    assert complete["status"] == "False" and complete["reason"] == "PodFailed", complete
    assert "pod f-0-0 failed: exit code 3" in complete["message"]
    assert "Failed" in events_of(api, namespace, "f")
    wait_for("the gang's other pod to be deleted", lambda: [p["metadata"]["name"] for p in pods_of(api, namespace, "f")] == ["f-0-0"], 10)
    wait_for("the freed GPUs to run the next job", lambda: phase_of(api, namespace, "next") == "Succeeded", 20)


def test_a_pod_deleted_by_someone_else_queues_its_job_again(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    kubectl.run("apply", "-f", "-", input=dump(gpujob("d", namespace, "infer", 8, 3)))
    wait_for("the job to run", lambda: phase_of(api, namespace, "d") == "Running", 20, on_timeout=operator.tail)
    kubectl.run("delete", "pod", "d-0-0", "-n", namespace, "--grace-period=0", "--force")
    wait_for("the job to be told", lambda: "PodsLost" in events_of(api, namespace, "d"), 20, on_timeout=operator.tail)
    wait_for("the job to run again and succeed", lambda: phase_of(api, namespace, "d") == "Succeeded", 30, on_timeout=operator.tail)
    (pod,) = pods_of(api, namespace, "d")
    assert pod["metadata"]["name"] == "d-0-0" and pod["status"]["phase"] == "Succeeded"  # a new pod, same name


def test_an_invalid_pod_template_fails_the_job_with_the_api_servers_reason(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    job = gpujob("bad", namespace, "infer", 1, 1)
    job["spec"]["podTemplate"] = {"spec": {"containers": [{"name": "no image"}]}}
    kubectl.run("apply", "-f", "-", input=dump(job))
    wait_for("the job to fail", lambda: phase_of(api, namespace, "bad") == "Failed", 20, on_timeout=operator.tail)
    complete = next(c for c in api.status("gpujobs", "bad", namespace)["conditions"] if c["type"] == "Complete")
    assert complete["reason"] == "FailedStart" and "its pod is invalid" in complete["message"], complete
    assert pods_of(api, namespace, "bad") == []


# --- nodes out of service ---------------------------------------------------------------------------


def test_cordoned_and_tainted_nodes_get_no_new_pods(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    kubectl.run("cordon", "kb-6")
    kubectl.run("taint", "node", "kb-7", "e2e/broken=yes:NoSchedule")
    try:
        kubectl.run("apply", "-f", "-", input=dump(gpujob("x", namespace, "infer", 8, 1)))
        wait_for("the job to be Queued", lambda: phase_of(api, namespace, "x") == "Queued", 20, on_timeout=operator.tail)
        # Not placed while both nodes are out: check over a few passes (node changes poke the loop).
        for _ in range(2):
            poke_and_wait_for_a_pass(operator, kubectl, "kb-6")
            assert pods_of(api, namespace, "x") == [] and phase_of(api, namespace, "x") == "Queued"
        kubectl.run("uncordon", "kb-6")
        wait_for("the job to run on the uncordoned node", lambda: phase_of(api, namespace, "x") == "Running", 20)
        assert pods_of(api, namespace, "x")[0]["spec"]["nodeName"] == "kb-6"
    finally:
        kubectl.run("uncordon", "kb-6", check=False)
        kubectl.run("taint", "node", "kb-7", "e2e/broken=yes:NoSchedule-", check=False)
        kubectl.run("label", "node", "kb-6", "e2e-poke-", check=False)


def test_a_notready_node_gets_no_new_pods(operator: Operator, api: Api, kubectl: Any, namespace: str) -> None:
    """A node KWOK no longer manages (no heartbeat) is made NotReady; KWOK makes it Ready again."""
    kubectl.run("annotate", "node", "kb-7", "kwok.x-k8s.io/node-")
    ready = {"type": "Ready", "status": "False", "reason": "E2E", "message": "made NotReady by a test"}
    kubectl.run("patch", "node", "kb-7", "--subresource=status", "--type=strategic", "-p",
                json.dumps({"status": {"conditions": [ready]}}))  # fmt: skip
    kubectl.run("cordon", "kb-6")  # so the only candidate left is the NotReady one
    try:
        kubectl.run("apply", "-f", "-", input=dump(gpujob("nr", namespace, "infer", 8, 1)))
        wait_for("the job to be Queued", lambda: phase_of(api, namespace, "nr") == "Queued", 20, on_timeout=operator.tail)
        poke_and_wait_for_a_pass(operator, kubectl, "kb-7")
        assert pods_of(api, namespace, "nr") == [] and phase_of(api, namespace, "nr") == "Queued"
        kubectl.run("uncordon", "kb-6")
        wait_for("the job to run elsewhere", lambda: phase_of(api, namespace, "nr") == "Running", 20)
        assert pods_of(api, namespace, "nr")[0]["spec"]["nodeName"] == "kb-6"
    finally:
        kubectl.run("annotate", "node", "kb-7", "kwok.x-k8s.io/node=fake", "--overwrite", check=False)
        kubectl.run("uncordon", "kb-6", check=False)
        kubectl.run("label", "node", "kb-7", "e2e-poke-", check=False)

        def usable() -> bool:  # Ready again, and KCM's not-ready taints gone, for the next tests
            node = kubectl.json("get", "node", "kb-7")
            conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
            taints = [t["key"] for t in node["spec"].get("taints", []) if t["key"] != "kwok.x-k8s.io/node"]
            return conditions.get("Ready") == "True" and not taints

        wait_for("kb-7 Ready again", usable, 60)


# --- restarts ---------------------------------------------------------------------------------------


def test_restart_mid_run_loses_nothing_and_binds_nothing_twice(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    jobs = [gpujob(f"tr-{i}", namespace, "train", 8, 3) for i in range(6)]
    jobs += [gpujob(f"in-{i}", namespace, "infer", 8, 3) for i in range(4)]
    names = {j["metadata"]["name"] for j in jobs}
    kubectl.run("apply", "-f", "-", input=dump(*jobs))

    def check() -> None:
        assert_not_overallocated(api)
        live = Counter(p["metadata"]["labels"]["gputwin.io/job"] for p in pods_of(api, namespace) if holding(p))
        assert all(n == 1 for n in live.values()), f"a job holds two sets of pods: {live}"

    def mid_run() -> bool:
        check()
        phases = Counter(api.phases(namespace).values())
        return bool(phases["Running"] and phases["Queued"])

    wait_for("some jobs Running and some Queued", mid_run, 20, interval=0.1, on_timeout=operator.tail)
    assert operator.stop(signal.SIGKILL) == -signal.SIGKILL
    operator.start(KOPF_RUN)

    def all_done() -> bool:
        check()
        return set(api.phases(namespace).values()) == {"Succeeded"} and len(api.phases(namespace)) == len(names)

    wait_for("every job to succeed after the restart", all_done, 90, interval=0.1, on_timeout=operator.tail)
    for name in names:  # one run each: one pod of attempt 0, which succeeded
        (pod,) = pods_of(api, namespace, name)
        assert pod["metadata"]["name"] == f"{name}-0-0" and pod["status"]["phase"] == "Succeeded", pod["metadata"]


# --- plain Pods -------------------------------------------------------------------------------------


def plain_pod(name: str, namespace: str, gpus: int, task_type: str = "infer", seconds: float = 2) -> Obj:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"gputwin.io/task-type": task_type},
                         "annotations": {"gputwin.io/run-duration": f"{seconds}s"}},
            "spec": {"schedulerName": "gputwin", "restartPolicy": "Never",
                     "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                     "containers": [{"name": "c", "image": "pause", "resources": resources}]}}  # fmt: skip


def test_plain_pods_with_our_scheduler_name_are_queued_and_bound(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    """Six 4-GPU pods on the 16 GPUs of `infer`: four bound at once, two when GPUs free; a pod
    larger than any node is refused with a Warning; nothing is ever over-allocated."""
    pods = [plain_pod(f"p{i}", namespace, 4) for i in range(6)] + [plain_pod("huge", namespace, 16)]
    kubectl.run("apply", "-f", "-", input=dump(*pods))

    def done() -> bool:
        assert_not_overallocated(api)
        got = {p["metadata"]["name"]: p for p in pods_of(api, namespace)}
        return all(got[f"p{i}"]["status"].get("phase") == "Succeeded" for i in range(6))

    wait_for("every pod to be bound and to succeed", done, 40, interval=0.1, on_timeout=operator.tail)
    got = {p["metadata"]["name"]: p for p in pods_of(api, namespace)}
    assert {got[f"p{i}"]["spec"]["nodeName"] for i in range(6)} == set(INFER)
    assert not got["huge"]["spec"].get("nodeName")
    scheduled = Counter(who for who, reason in api.events(namespace, "Pod") if reason == "Scheduled")
    assert all(scheduled[f"p{i}"] == 1 for i in range(6)), scheduled
    assert ("huge", "FailedScheduling") in api.events(namespace, "Pod")


def test_gpus_held_by_another_schedulers_pod_are_never_given_out_again(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    """A pod bound by someone else (here: created with nodeName, as kube-scheduler would bind it)
    holds 6 of kb-6's 8 GPUs; with kb-7 cordoned only 2 more fit, so of four 1-GPU pods two are
    bound and two wait until the foreign pod is gone."""
    foreign = plain_pod("foreign", namespace, 6, seconds=600)
    foreign["spec"].update(schedulerName="default-scheduler", nodeName="kb-6")
    foreign["metadata"]["labels"] = {}
    kubectl.run("cordon", "kb-7")
    try:
        kubectl.run("apply", "-f", "-", input=dump(foreign))
        kubectl.run("apply", "-f", "-", input=dump(*[plain_pod(f"q{i}", namespace, 1, seconds=600) for i in range(4)]))

        def bound() -> list[str]:
            assert_not_overallocated(api)
            return sorted(p["metadata"]["name"] for p in pods_of(api, namespace) if p["spec"].get("nodeName"))

        wait_for("two of the pods to be bound beside the foreign one",
                 lambda: len(bound()) == 3, 20, interval=0.2, on_timeout=operator.tail)  # fmt: skip
        for _ in range(2):  # and no more over the next passes
            poke_and_wait_for_a_pass(operator, kubectl, "kb-6")
            assert len(bound()) == 3 and node_load(api)["kb-6"] == 8
        kubectl.run("delete", "pod", "foreign", "-n", namespace, "--grace-period=0", "--force")
        wait_for("the other two to be bound once its GPUs are free", lambda: len(bound()) == 4, 20,
                 interval=0.2, on_timeout=operator.tail)  # fmt: skip
        assert node_load(api)["kb-6"] == 4
    finally:
        kubectl.run("uncordon", "kb-7", check=False)
        kubectl.run("label", "node", "kb-6", "e2e-poke-", check=False)


# --- parity: the live cluster starts jobs in the order the simulator says -----------------------------

PARITY_JOBS, PARITY_WALL_SECONDS = 200, 40.0


def parity_jobs(namespace: str) -> tuple[list[JobSpec], list[Obj]]:
    """The first 200 train jobs of the bundled demo trace (an excerpt of the shared Philly-shaped
    trace), durations scaled so the partition's 32 GPUs need about 40 s of wall time for them all;
    as JobSpecs (all submitted at once) and as GPUJobs named in trace order."""
    trace = [j for j in read_trace(demo_trace_path()).jobs if j.task_type == "train"][:PARITY_JOBS]
    scale = PARITY_WALL_SECONDS * 32 / sum(j.gpus * j.duration for j in trace)
    specs, objs = [], []
    for i, job in enumerate(trace):
        name, seconds = f"parity-{i:03d}", round(job.duration * scale, 3)
        specs.append(JobSpec(job_id=name, submit=0.0, duration=seconds, gpus=job.gpus, task_type="train", seq=i))
        objs.append(gpujob(name, namespace, "train", job.gpus, seconds))
    return specs, objs


def test_a_200_job_excerpt_starts_in_the_order_the_simulator_gives(
    operator: Operator, api: Api, kubectl: Any, namespace: str, set_policy: Any, tmp_path: Path
) -> None:
    """The same declaration, policy and jobs through `gputwin.sim` and through the operator on the
    real API server with KWOK: every job starts, in the simulator's order, ties (jobs the simulator
    starts at the same instant) aside. Strict SJF makes the order independent of wall-clock jitter:
    only the head of the queue ever starts, so pass latency moves start times, never their order."""
    spec = {"queue": {"policy": "sjf"}, "placement": {"policy": "consolidate"}}
    set_policy("kb-train", spec)
    specs, objs = parity_jobs(namespace)
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER.replace("{policies}", dump(policy("kb-train", spec), policy("kb-infer", POLICY))))
    simulated = {s.job_id: s.first_start for s in simulate(load_cluster(path), specs).finished}
    # Every job must be queued before any starts (as in the simulation, where all arrive at t=0):
    # a blocker holds the partition's 32 GPUs until the last one is Queued, then is deleted.
    kubectl.run("apply", "-f", "-", input=dump(gpujob("parity-blocker", namespace, "train", 32, 600)))
    wait_for("the blocker to run", lambda: phase_of(api, namespace, "parity-blocker") == "Running", 30,
             on_timeout=operator.tail)  # fmt: skip
    kubectl.run("apply", "-f", "-", input=dump(*objs))
    names = [o["metadata"]["name"] for o in objs]
    wait_for("every job to be queued", lambda: Counter(api.phases(namespace).values())["Queued"] == len(names), 60,
             on_timeout=operator.tail)  # fmt: skip
    kubectl.run("delete", "gpujob", "parity-blocker", "-n", namespace)
    wait_for("every job to succeed", lambda: Counter(api.phases(namespace).values())["Succeeded"] == len(names),
             240, on_timeout=operator.tail)  # fmt: skip
    live = {j["metadata"]["name"]: epoch_seconds(j["status"]["startTime"]) for j in api.jobs(namespace)
            if j["metadata"]["name"] in simulated}  # fmt: skip
    inversions = [(a, b) for a in names for b in names if simulated[a] < simulated[b] and live[a] > live[b]]
    assert inversions == [], [(a, simulated[a], live[a], b, simulated[b], live[b]) for a, b in inversions[:5]]
    assert_not_overallocated(api)
