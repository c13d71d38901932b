"""The reconcilers on an in-memory store: statuses, conditions, the GPUJob life cycle, restarts, replays."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.core.decision import Start
from gputwin.operator.backends import SimBackend
from gputwin.operator.controller import Controller
from gputwin.operator.store import MemoryStore
from gputwin.operator.trace_files import TraceAccess
from gputwin.runtime.capabilities import Resolved, Resolver

ROOT = Path(__file__).resolve().parents[2]
TWO_LEAF = ROOT / "manifests" / "samples" / "two-leaf.yaml"
T0 = 1767225600.0  # 2026-01-01T00:00:00Z
Obj = dict[str, Any]


class RecordingBackend(SimBackend):
    """The sim backend, remembering every call the controller made."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[str] = []
        self.adopted: list[str] = []
        self.stopped: list[str] = []
        self.graces: list[float | None] = []  # the grace of each stop, in `stopped` order

    def start_all(
        self, starts: Sequence[Start], node_names: Sequence[str], now: float
    ) -> list[tuple[Start, Exception]]:
        self.starts += [start.job_id for start in starts]
        return super().start_all(starts, node_names, now)

    def adopt(self, start: Start, node_names: Sequence[str], since: float) -> None:
        self.adopted.append(start.job_id)
        super().adopt(start, node_names, since)

    def stop(self, job_id: str, grace: float | None = None) -> None:
        self.stopped.append(job_id)
        self.graces.append(grace)
        super().stop(job_id)


class ResolvingBackendMock(RecordingBackend):
    """A mock of a backend that needs payloads (`NeedsPayloads`, as the Kubernetes one): it records
    every start as the controller resolved it."""

    def __init__(self) -> None:
        super().__init__()
        self.resolver: Resolver | None = None
        self.resolved: list[tuple[str, Resolved]] = []

    def resolve_with(self, resolver: Resolver) -> None:
        self.resolver = resolver

    def start_all(
        self, starts: Sequence[Start], node_names: Sequence[str], now: float
    ) -> list[tuple[Start, Exception]]:
        assert self.resolver is not None
        self.resolved += [(start.job_id, self.resolver.resolve(start)) for start in starts]
        return super().start_all(starts, node_names, now)


def manifests(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def job(name: str, gpus: int, duration: float, task_type: str = "infer", **spec: Any) -> Obj:
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"taskType": task_type, "gpus": gpus, "durationSeconds": duration, **spec}}  # fmt: skip


def setup(*jobs: Obj, cluster: list[Obj] | None = None,
          backend: RecordingBackend | None = None) -> tuple[MemoryStore, RecordingBackend, Controller]:  # fmt: skip
    store = MemoryStore([*(cluster if cluster is not None else manifests(TWO_LEAF)), *jobs])
    backend = backend or RecordingBackend()
    return store, backend, Controller(store, backend, traces=TraceAccess(demo_trace_path().resolve().parent))


def status(store: MemoryStore, kind: str, name: str, namespace: str | None = None) -> Obj:
    obj = store.get(kind, "default" if kind in ("GPUJob", "TraceReplay") else namespace, name)
    assert obj is not None
    return dict(obj.get("status") or {})


def ready(store: MemoryStore, kind: str, name: str) -> Obj:
    return next(c for c in status(store, kind, name)["conditions"] if c["type"] == "Ready")


def drive(controller: Controller, until: float = float("inf")) -> float:
    """Reconcile at every event, like `gputwin run`; the last time reached."""
    now = T0
    while (when := controller.next_event()) is not None and when <= until:
        now = when
        controller.reconcile(now)
    return now


def with_change(docs: list[Obj], kind: str, name: str, **spec: Any) -> list[Obj]:
    """The manifests with one object's spec changed; that object counts as created last."""
    docs = copy.deepcopy(docs)
    for doc in docs:
        doc["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            doc["spec"].update(spec)
            doc["metadata"]["creationTimestamp"] = "2026-01-01T00:00:01Z"
    return docs


# --- the cluster kinds ----------------------------------------------------------------------------


def test_valid_cluster_fills_counts_and_ready_conditions() -> None:
    store, _, controller = setup()
    controller.reconcile(T0)
    assert status(store, "SwitchTopology", "two-leaf") | {"conditions": None} == {
        "nodes": 8, "gpus": 64, "switches": 3, "observedGeneration": 1, "conditions": None}  # fmt: skip
    train = status(store, "GPUPartition", "train")
    assert (train["nodes"], train["totalGPUs"], train["freeGPUs"], train["queued"], train["running"]) == (
        6,
        48,
        48,
        0,
        0,
    )
    policy = status(store, "SchedulingPolicy", "sjf-topology")
    assert policy["partitions"] == ["train"] and policy["backends"] == ["sim"]
    deployed = policy["lastDeploy"]
    assert (deployed["backend"], deployed["result"], deployed["time"]) == (
        "sim",
        "Succeeded",
        "2026-01-01T00:00:00Z",
    )
    for kind, name in [
        ("SwitchTopology", "two-leaf"),
        ("GPUPartition", "infer"),
        ("SchedulingPolicy", "fifo-consolidate"),
    ]:
        cond = ready(store, kind, name)
        assert (cond["status"], cond["lastTransitionTime"]) == ("True", "2026-01-01T00:00:00Z")


def test_an_unchanged_cluster_is_not_written_again() -> None:
    store, _, controller = setup()
    controller.reconcile(T0)
    before = {k: store.list(k) for k in ("SwitchTopology", "GPUPartition", "SchedulingPolicy")}
    controller.reconcile(T0 + 60)
    assert before == {k: store.list(k) for k in before}


CYCLE = [
    {"name": "spine", "parent": "core"},
    {"name": "core", "parent": "spine"},
    {"name": "leaf0", "parent": "spine"},
    {"name": "leaf1", "parent": "spine"},
]


@pytest.mark.parametrize(
    ("kind", "name", "change", "broken", "reason", "words"),
    [
        ("GPUPartition", "infer", {"policy": "nope"}, ("GPUPartition", "infer"), "InvalidReference",
         ["spec.policy", "'nope'", "fifo-consolidate"]),
        ("GPUPartition", "infer", {"nodes": "gpu[06-08]"}, ("GPUPartition", "infer"), "NodeConflict",
         ["spec.nodes", "gpu06", "'train'"]),
        ("SwitchTopology", "two-leaf", {"switches": CYCLE}, ("SwitchTopology", "two-leaf"), "InvalidTopology",
         ["cycle"]),
        ("SchedulingPolicy", "sjf-topology", {"queue": {"policy": "bogus"}},
         ("SchedulingPolicy", "sjf-topology"), "Invalid", ["spec.queue.policy", "'fifo'"]),
    ],
    ids=["missing-policy", "nodes-claimed-twice", "switch-cycle", "schema-invalid-policy"],
)  # fmt: skip
def test_broken_manifests_are_reported_on_the_object(
    kind: str, name: str, change: Obj, broken: tuple[str, str], reason: str, words: list[str]
) -> None:
    store, backend, controller = setup(
        job("j", 1, 10), cluster=with_change(manifests(TWO_LEAF), kind, name, **change)
    )
    controller.reconcile(T0)
    cond = ready(store, *broken)
    assert (cond["status"], cond["reason"]) == ("False", reason)
    assert all(w in cond["message"] for w in words), cond["message"]
    assert controller.scheduler is None and backend.starts == []
    pending = status(store, "GPUJob", "j")
    assert pending["phase"] == "Pending" and pending["submitTime"] == "2026-01-01T00:00:00Z"
    assert pending["conditions"][0]["reason"] == "ClusterNotReady"


def test_dependents_of_a_broken_object_say_why_they_cannot_run() -> None:
    cluster = with_change(manifests(TWO_LEAF), "SwitchTopology", "two-leaf", switches=CYCLE)
    cluster = with_change(cluster, "SchedulingPolicy", "sjf-topology", queue={"policy": "bogus"})
    store, _, controller = setup(cluster=cluster)
    controller.reconcile(T0)
    assert ready(store, "GPUPartition", "infer")["reason"] == "TopologyNotReady"
    store.put(
        with_change(
            cluster, "SwitchTopology", "two-leaf", switches=manifests(TWO_LEAF)[0]["spec"]["switches"]
        )[0]
    )
    controller.reconcile(T0)
    cond = ready(store, "GPUPartition", "train")
    assert (
        cond["reason"] == "InvalidReference"
        and "SchedulingPolicy 'sjf-topology' is invalid" in cond["message"]
    )


# --- GPUJobs --------------------------------------------------------------------------------------


def test_jobs_go_queued_running_succeeded_with_placement_details() -> None:
    store, _, controller = setup(
        job("a", 8, 100), job("b", 8, 100), job("c", 8, 50), job("wide", 40, 1000, "train")
    )
    controller.reconcile(T0)
    queued = status(store, "GPUJob", "c")
    assert (queued["phase"], queued["partition"], queued["gpus"]) == ("Queued", "infer", 8)
    assert status(store, "GPUPartition", "infer")["queued"] == 1
    # topology-aware placement waits maxWaitSeconds (300) for one leaf, then spreads over two.
    assert status(store, "GPUJob", "wide")["phase"] == "Queued"
    drive(controller, T0 + 100)
    running = status(store, "GPUJob", "c")
    assert (running["phase"], running["startTime"], running["switches"], running["overhead"]) == (
        "Running", "2026-01-01T00:01:40Z", 1, 0.0)  # fmt: skip
    drive(controller, T0 + 300)
    wide = status(store, "GPUJob", "wide")
    assert (wide["phase"], wide["nodes"], wide["switches"], wide["overhead"]) == (
        "Running",
        "gpu[01-05]",
        2,
        0.15,
    )
    assert wide["allocation"] == {"slots": [{"node": f"gpu0{i}", "gpus": 8} for i in range(1, 6)],
                                  "since": "2026-01-01T00:05:00Z", "runSeconds": 1150.0}  # fmt: skip
    drive(controller)
    done = {name: status(store, "GPUJob", name) for name in ("a", "c", "wide")}
    assert {s["phase"] for s in done.values()} == {"Succeeded"}
    assert (done["c"]["endTime"], done["wide"]["endTime"]) == ("2026-01-01T00:02:30Z", "2026-01-01T00:24:10Z")
    assert "allocation" not in done["c"] and done["c"]["nodes"]
    assert status(store, "GPUPartition", "train")["freeGPUs"] == 48
    reasons = [(e.name, e.reason) for e in store.events]
    assert ("c", "Scheduled") in reasons and ("c", "Completed") in reasons


def test_a_job_no_partition_serves_is_rejected() -> None:
    store, backend, controller = setup(job("render", 1, 10, "render"))
    controller.reconcile(T0)
    rejected = status(store, "GPUJob", "render")
    assert rejected["phase"] == "Rejected"
    assert rejected["conditions"][0]["reason"] == "Unschedulable"
    event = store.events[-1]
    assert (event.type, event.reason) == ("Warning", "Rejected")
    assert "no partition serves task type 'render'" in event.message
    controller.reconcile(T0 + 1)
    assert len(store.events) == 1 and backend.starts == []


def test_srtf_preempts_and_the_status_says_so() -> None:
    cluster = with_change(manifests(TWO_LEAF), "SchedulingPolicy", "fifo-consolidate",
                          queue={"policy": "srtf"}, preemption={"checkpointSeconds": 30})  # fmt: skip
    store, backend, controller = setup(job("long1", 8, 1000), job("long2", 8, 1000), cluster=cluster)
    controller.reconcile(T0)
    store.put(job("short", 8, 50))
    controller.reconcile(T0 + 100)
    phases = {n: status(store, "GPUJob", n)["phase"] for n in ("long1", "long2", "short")}
    assert phases["short"] == "Running" and sorted(phases.values()) == ["Queued", "Running", "Running"]
    victim = next(n for n, p in phases.items() if p == "Queued")
    preempted = status(store, "GPUJob", victim)
    assert preempted["preemptions"] == 1 and "allocation" not in preempted
    cond = next(c for c in preempted["conditions"] if c["type"] == "Scheduled")
    assert (cond["reason"], "checkpoint and restore cost 30 s" in cond["message"]) == ("Preempted", True)
    assert f"default/{victim}" in backend.stopped
    assert backend.graces[backend.stopped.index(f"default/{victim}")] == 30  # the checkpoint the core charged
    drive(controller)
    assert {status(store, "GPUJob", n)["phase"] for n in phases} == {"Succeeded"}
    assert status(store, "GPUJob", victim)["preemptions"] == 1


def test_a_start_is_resolved_at_the_boundary_from_what_the_pass_read_mock() -> None:
    """A backend that needs payloads gets each start in names, with the GPUJob as the pass listed
    it and its preemptions so far: a restarted victim's second run is attempt 1."""
    cluster = with_change(manifests(TWO_LEAF), "SchedulingPolicy", "fifo-consolidate",
                          queue={"policy": "srtf"}, preemption={"checkpointSeconds": 30})  # fmt: skip
    backend = ResolvingBackendMock()
    store, _, controller = setup(job("long1", 8, 1000), job("long2", 8, 1000), cluster=cluster, backend=backend)
    controller.reconcile(T0)
    store.put(job("short", 8, 50))
    controller.reconcile(T0 + 100)
    drive(controller)
    attempts: dict[str, list[int]] = {}
    last: dict[str, Resolved] = {}
    for job_id, resolved in backend.resolved:
        name = job_id.split("/", 1)[1]
        assert resolved.body is not None and resolved.body["metadata"]["name"] == name
        assert resolved.submitted == T0 + (100 if name == "short" else 0)
        attempts.setdefault(name, []).append(resolved.attempt)
        last[name] = resolved
    victim = next(n for n, runs in attempts.items() if len(runs) == 2)
    assert (attempts[victim], attempts["short"]) == ([0, 1], [0])
    for name, resolved in last.items():  # the names the backend got are those the status shows
        assert ",".join(resolved.nodes) == status(store, "GPUJob", name)["nodes"]
        assert len(resolved.switches) == status(store, "GPUJob", name)["switches"]


def test_a_policy_change_keeps_every_queued_job() -> None:
    jobs = [job(f"j{i}", 8, 100 * (6 - i)) for i in range(5)]
    store, backend, controller = setup(*jobs)
    controller.reconcile(T0)
    first = controller.scheduler
    policy = store.get("SchedulingPolicy", None, "fifo-consolidate")
    assert policy is not None
    store.patch_spec("SchedulingPolicy", None, "fifo-consolidate", {"queue": {"policy": "sjf"}})
    controller.reconcile(T0 + 10)
    assert controller.scheduler is not first
    part = status(store, "GPUPartition", "infer")
    assert (part["queued"], part["running"]) == (3, 2)
    assert (
        status(store, "SchedulingPolicy", "fifo-consolidate")["lastDeploy"]["time"] == "2026-01-01T00:00:10Z"
    )
    drive(controller)
    assert {status(store, "GPUJob", j["metadata"]["name"])["phase"] for j in jobs} == {"Succeeded"}
    assert sorted(backend.starts) == sorted(f"default/j{i}" for i in range(5))
    # sjf after the change: the shortest queued job (j4) went before j2 and j3.
    assert backend.starts[2] == "default/j4"


def test_a_restart_adopts_running_jobs_and_starts_nothing_twice() -> None:
    jobs = [job(f"j{i}", 8, 100 * (i + 1)) for i in range(4)]
    # "spread" waits for one leaf (topology-aware, 300 s) across the restart, then spans two.
    jobs += [job("wide", 8, 500, "train"), job("spread", 40, 1000, "train")]
    reference_store, _, reference = setup(*jobs)
    reference.reconcile(T0)
    drive(reference)

    store, first_backend, first = setup(*jobs)
    first.reconcile(T0)
    assert len(first_backend.starts) == 3
    backend = RecordingBackend()
    second = Controller(store, backend)  # the operator restarted: same objects, empty memory
    second.reconcile(T0 + 50)
    assert backend.starts == [] and sorted(backend.adopted) == sorted(first_backend.starts)
    assert status(store, "GPUPartition", "infer")["freeGPUs"] == 0
    drive(second)
    assert sorted(backend.starts) == ["default/j2", "default/j3", "default/spread"]
    spread = status(store, "GPUJob", "spread")
    assert (spread["switches"], spread["startTime"]) == (2, "2026-01-01T00:05:00Z")
    for j in jobs:
        name = j["metadata"]["name"]
        assert status(store, "GPUJob", name) == status(reference_store, "GPUJob", name)


def test_a_deleted_job_frees_its_gpus_and_leaves_the_queue() -> None:
    store, backend, controller = setup(job("a", 8, 100), job("b", 8, 100), job("c", 8, 100), job("d", 8, 100))
    controller.reconcile(T0)
    store.delete("GPUJob", "default", "a")
    store.delete("GPUJob", "default", "d")
    controller.reconcile(T0 + 10)
    assert (backend.stopped, backend.graces) == (["default/a"], [None])  # its pods keep their own grace
    assert status(store, "GPUJob", "c")["phase"] == "Running"
    part = status(store, "GPUPartition", "infer")
    assert (part["queued"], part["running"], part["freeGPUs"]) == (0, 2, 0)


# --- TraceReplay ----------------------------------------------------------------------------------


def replay(promote: bool = False, file: str | None = None) -> Obj:
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "TraceReplay",
            "metadata": {"name": "what-if", "namespace": "default"},
            "spec": {"trace": {"file": file or str(demo_trace_path()), "format": "helios"},
                     "topology": "demo",
                     "candidates": [{"queue": "fifo", "placement": "first-fit"},
                                    {"queue": "sjf", "placement": "consolidate", "backfill": True}],
                     "objective": "avg_jct", "promote": promote}}  # fmt: skip


def test_trace_replay_reports_metrics_and_the_winner() -> None:
    store, _, controller = setup(replay(), cluster=manifests(demo_cluster_path()))
    controller.reconcile(T0)
    result = status(store, "TraceReplay", "what-if")
    assert result["phase"] == "Succeeded" and result["promoted"] is False
    names = [c["name"] for c in result["candidates"]]
    assert sorted(names) == [
        "current",
        "fifo/first-fit/as-requested",
        "sjf/consolidate/as-requested+backfill",
    ]
    values = [c["metrics"]["avgJct"] for c in result["candidates"]]
    assert values == sorted(values) and result["winner"] == names[0]
    assert {c["metrics"]["jobs"] for c in result["candidates"]} == {3375}
    assert set(result["candidates"][0]["metrics"]) == {"jobs", "avgJct", "avgQueue", "p50Jct", "p99Jct",
                                                      "p99Queue", "makespan"}  # fmt: skip
    cond = result["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Complete", "True", "Replayed")
    assert result["winner"] in cond["message"]
    controller.reconcile(T0 + 1)  # replayed once per generation
    assert [e.reason for e in store.events] == ["ReplaySucceeded"]


def test_a_promoted_winner_is_written_into_the_policies() -> None:
    store, _, controller = setup(replay(promote=True), cluster=manifests(demo_cluster_path()))
    controller.reconcile(T0)
    result = status(store, "TraceReplay", "what-if")
    assert result["winner"] != "current" and result["promoted"] is True
    queue, placement = result["winner"].split("/")[:2]
    for policy in store.list("SchedulingPolicy"):
        assert (policy["spec"]["queue"]["policy"], policy["spec"]["placement"]["policy"]) == (
            queue,
            placement,
        )
        assert policy["metadata"]["generation"] == 2
    assert {p.policy.queue for p in controller.cluster.partitions} == {queue}  # type: ignore[union-attr]
    assert "Promoted" in [e.reason for e in store.events]


def test_an_unreadable_trace_fails_the_replay_with_a_reason() -> None:
    store, _, controller = setup(replay(file="nonexistent.csv"), cluster=manifests(demo_cluster_path()))
    controller.reconcile(T0)
    result = status(store, "TraceReplay", "what-if")
    cond = result["conditions"][0]
    assert (result["phase"], cond["reason"]) == ("Failed", "TraceNotFound")
    assert "spec.trace.file: nonexistent.csv: no such file" == cond["message"]


def configmap_replay(name: str = "what-if", configmap: str = "traces", key: str = "jobs.csv") -> Obj:
    obj = replay()
    obj["metadata"]["name"] = name
    obj["spec"]["trace"] = {"configMap": {"name": configmap, "key": key}}  # format auto: sniffed
    return obj


def test_trace_replay_reads_its_trace_from_a_configmap() -> None:
    head = "".join(demo_trace_path().read_text().splitlines(keepends=True)[:200])
    store, _, controller = setup(
        configmap_replay(), configmap_replay("no-key", key="x.csv"), configmap_replay("no-cm", "absent"),
        cluster=manifests(demo_cluster_path()),
    )  # fmt: skip
    store.put_configmap("default", "traces", {"jobs.csv": head, "README": "demo"})
    controller.reconcile(T0)
    result = status(store, "TraceReplay", "what-if")
    assert result["phase"] == "Succeeded" and result["winner"] == result["candidates"][0]["name"]
    assert {c["metrics"]["jobs"] for c in result["candidates"]} == {199}
    missing = {n: status(store, "TraceReplay", n) for n in ("no-key", "no-cm")}
    conds = {n: s["conditions"][0] for n, s in missing.items()}
    assert {s["phase"] for s in missing.values()} == {"Failed"}
    assert {c["reason"] for c in conds.values()} == {"TraceNotFound"}
    no_key = "ConfigMap default/traces has no key x.csv"  # not its keys: the author may not read it
    assert conds["no-key"]["message"].endswith(no_key)
    assert "ConfigMap default/absent not found" in conds["no-cm"]["message"]
    # Fixed ConfigMap: the same generation is not replayed again; an edit of the spec is.
    store.put_configmap("default", "absent", {"jobs.csv": head})
    controller.reconcile(T0 + 1)
    assert status(store, "TraceReplay", "no-cm")["phase"] == "Failed"


def test_sacct_traces_are_left_to_the_slurm_issue() -> None:
    obj = replay()
    obj["spec"]["trace"] = {"sacct": {"start": "now-7days"}}
    store, _, controller = setup(obj, cluster=manifests(demo_cluster_path()))
    controller.reconcile(T0)
    result = status(store, "TraceReplay", "what-if")
    cond = result["conditions"][0]
    assert (result["phase"], cond["reason"]) == ("Failed", "UnsupportedSource")
    assert "SLURM issue" in cond["message"] and "configMap" in cond["message"]


def test_a_run_that_ended_while_the_operator_was_down_ends_when_it_really_ended() -> None:
    jobs = [job("a", 8, 100), job("b", 8, 250), job("c", 8, 100), job("later", 8, 50)]
    store, first_backend, first = setup(*jobs)
    first.reconcile(T0)
    assert sorted(first_backend.starts) == ["default/a", "default/b"]
    second = Controller(store, RecordingBackend())  # restarted long after a and b ended
    second.reconcile(T0 + 5000)
    ends = {n: status(store, "GPUJob", n).get("endTime") for n in ("a", "b")}
    assert ends == {"a": "2026-01-01T00:01:40Z", "b": "2026-01-01T00:04:10Z"}
    done = next(c for c in status(store, "GPUJob", "b")["conditions"] if c["type"] == "Complete")
    assert done["message"].startswith("ended 250 s after submission")
    # Their GPUs were free only from the restart on: the queued jobs start then, not before.
    assert status(store, "GPUJob", "c")["startTime"] == "2026-01-01T01:23:20Z"


class OrderCheckingStore(MemoryStore):
    """A MemoryStore that fails if a status runs ahead of the event announcing it."""

    ANNOUNCED: ClassVar[dict[str, str]] = {
        "Scheduled": "Running",
        "Completed": "Succeeded",
        "Rejected": "Rejected",
        "Preempted": "Queued",
    }

    def event(self, kind: str, namespace: str | None, name: str, reason: str, message: str,
              type: Any = "Normal", key: str | None = None) -> None:  # fmt: skip
        obj = self.get(kind, namespace, name)
        phase = ((obj or {}).get("status") or {}).get("phase")
        if kind == "GPUJob" and reason in self.ANNOUNCED and reason != "Preempted":
            assert phase != self.ANNOUNCED[reason], (name, reason, phase)
        if kind == "TraceReplay" and reason in ("ReplaySucceeded", "ReplayFailed", "Promoted"):
            assert phase in ("Succeeded", "Failed"), (name, reason, phase)
        super().event(kind, namespace, name, reason, message, type, key)


def test_events_are_posted_before_their_statuses_and_never_twice() -> None:
    cluster = with_change(manifests(TWO_LEAF), "SchedulingPolicy", "fifo-consolidate",
                          queue={"policy": "srtf"}, preemption={"checkpointSeconds": 30})  # fmt: skip
    store = OrderCheckingStore([*cluster, job("long1", 8, 1000), job("long2", 8, 1000),
                                job("render", 1, 10, "render")])  # fmt: skip
    controller = Controller(store, RecordingBackend())
    controller.reconcile(T0)
    store.put(job("short", 8, 50))
    controller.reconcile(T0 + 100)
    drive(controller)
    reasons = Counter(e.reason for e in store.events)
    assert reasons["Scheduled"] == 4 and reasons["Completed"] == 3 and reasons["Preempted"] == 1
    assert reasons["Rejected"] == 1
    # A pass repeated after a crash posts its keyed events again: the store keeps one of each.
    posted = len(store.events)
    MemoryStore.event(store, "GPUJob", "default", "long1", "Completed", "again", key="completed")
    assert len(store.events) == posted
