"""An incremental pass decides exactly as a full pass: a model-based test with a fake API.

The Kubernetes backend applies only what the watches changed since its last pass
(`gputwin.adapters.kube.view`). Here two backends see the same random history of pods and nodes
(plain Pods created, bound by us or by another scheduler, running, ending, deleted, being
deleted; other schedulers' pods holding GPUs; GPUJob pods no run accounts for; nodes cordoned and
uncordoned) and take the same actions (binds of the pods they queue, stops); one starts over from
the whole copy at every pass, one only every `FULL_SECONDS`, and a third has no watch (it lists pods
and nodes every pass). After every step all must report the same: nodes out of service, GPUs held
by others, plain-Pod jobs (new, running, gone), finished runs, failures, and the same API calls.

The watches are real `Watched` copies fed watch events directly; the API is a fake that records
binds and deletes and answers reads from the test's world (the real API server cannot replay thousands of seeded histories per test
run). The same flows run against a real API server in test_operator_kube_backend.py.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from copy import deepcopy
from typing import Any

import pytest
from cluster_builders import build_cluster

from gputwin.adapters.kube.manifests import JOB_ID, SCHEDULER
from gputwin.adapters.kube.cluster_watch import ClusterWatch
from gputwin.adapters.kube.watch import Watched
from gputwin.core.decision import Start
from gputwin.adapters.kube.backend import KubernetesBackend

Obj = dict[str, Any]
NODES = [f"n{i}" for i in range(6)]


class FakeApi:
    """Records what the backend asks of the API server; reads answer from the world (`world`, set
    once it exists: a backend without a watch lists pods and nodes, and reads a pod it misses)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.world: World | None = None

    def bind(self, namespace: str, name: str, node: str) -> None:
        self.calls.append(("bind", namespace, name, node))

    def delete(self, namespace: str, name: str, grace: int | None = None) -> None:
        self.calls.append(("delete", namespace, name))

    def pod(self, namespace: str, name: str) -> Obj | None:
        world = self.world
        found = (world.pods.get(name) or world.ended.get(name)) if world else None
        return deepcopy(found) if found else None

    def pods(self, field_selector: str = "") -> list[Obj]:
        assert field_selector == "status.phase!=Succeeded,status.phase!=Failed"
        return [deepcopy(p) for p in self.world.pods.values()] if self.world else []

    def nodes(self) -> list[Obj]:
        return [deepcopy(n) for n in self.world.nodes.values()] if self.world else []

    def event(self, *args: object) -> None:
        self.calls.append(("event",))


class World:
    """The cluster's pods and nodes, and the watch events they cause, fed to every copy."""

    def __init__(self, copies: list[ClusterWatch]) -> None:
        self.copies = copies
        self.version = 0
        self.pods: dict[str, Obj] = {}
        self.ended: dict[str, Obj] = {}  # pods that ended, as they ended (deleted ones leave no trace)
        self.nodes: dict[str, Obj] = {}
        for name in NODES:
            self.node(name, cordoned=False)

    def _send(self, watch: str, kind: str, obj: Obj) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        for copy in self.copies:
            target = copy.pods if watch == "pods" else copy.nodes
            target._apply({"type": kind, "object": deepcopy(obj)})

    def node(self, name: str, cordoned: bool) -> None:
        node = {"metadata": {"name": name, "labels": {}},
                "spec": {"unschedulable": cordoned},
                "status": {"allocatable": {"nvidia.com/gpu": "8"},
                           "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip
        kind = "MODIFIED" if name in self.nodes else "ADDED"
        self.nodes[name] = node
        self._send("nodes", kind, node)

    def pod(self, name: str, gpus: int, *, scheduler: str = SCHEDULER, node: str | None = None,
            job: str | None = None) -> None:  # fmt: skip
        pod = {"metadata": {"namespace": "t", "name": name, "creationTimestamp": "2026-01-01T00:00:00Z",
                            "annotations": {JOB_ID: job} if job else {}},
               "spec": {"schedulerName": scheduler, "nodeName": node,
                        "containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
               "status": {"phase": "Pending"}}  # fmt: skip
        self.pods[name] = pod
        self._send("pods", "ADDED", pod)

    def change(self, name: str, *, node: str | None = None, phase: str | None = None,
               deleting: bool = False) -> None:  # fmt: skip
        pod = self.pods[name]
        if node is not None:
            pod["spec"]["nodeName"] = node
        if phase is not None:
            pod["status"]["phase"] = phase
        if deleting:
            pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
        self._send("pods", "MODIFIED", pod)
        if phase in ("Succeeded", "Failed"):
            self.ended[name] = self.pods.pop(name)  # the copies drop ended pods; so does the world

    def delete(self, name: str) -> None:
        pod = self.pods.pop(name, None)
        if pod is not None:
            self._send("pods", "DELETED", pod)


def _watch() -> ClusterWatch:
    def never(**_: object) -> None:
        raise AssertionError("the test feeds events; nothing is listed")

    pods, nodes = Watched(never, pods=True), Watched(never)
    for copy in (pods, nodes):
        copy._synced.set()
        copy._thread = object()  # type: ignore[assignment]  # started: the test is the watch thread
    return ClusterWatch(pods, nodes)


def _report(backend: KubernetesBackend, cluster: Any, now: float, full: bool) -> Iterator[object]:
    """One pass of the backend's reads, in JobControl's order; yields what it reports."""
    if full:
        backend._full_at = None  # start over from the whole copy at every pass
    yield backend.observe(cluster, now)
    yield backend.held_by_others()
    yield sorted(backend.finished(now))
    yield [(f.job_id, f.reason, f.retry) for f in backend.failures(now)]
    jobs = backend.own_jobs(now)
    yield [s.job_id for s in jobs.new], [(s.job_id, slots) for s, slots, _ in jobs.running], jobs.gone


@pytest.mark.parametrize("seed", range(12))
def test_incremental_passes_report_what_full_passes_report_fake_api(seed: int) -> None:
    rng = random.Random(seed)
    cluster = build_cluster({"l0": [8, 8, 8], "l1": [8, 8, 8]})
    watches = [_watch(), _watch()]
    world = World(watches)
    apis = [FakeApi(), FakeApi(), FakeApi()]
    apis[2].world = world
    backends = [KubernetesBackend(api, watch=w, pod_events=False)  # type: ignore[arg-type]
                for api, w in zip(apis, [*watches, None])]  # fmt: skip
    queued: list[str] = []  # plain-Pod jobs the backends queued and we have not started yet
    running: set[str] = set()
    applied = 0  # of the API calls, those the world has carried out
    now, counter = 1000.0, 0
    for step in range(150):
        for _ in range(rng.randint(0, 4)):  # the world changes
            counter += 1
            name, pick = f"p{counter}", rng.random()
            if pick < 0.45:
                world.pod(name, rng.choice((1, 2, 4, 8)))
            elif pick < 0.6:
                world.pod(name, rng.choice((1, 2)), scheduler="default-scheduler", node=rng.choice(NODES))
            elif pick < 0.65:
                world.pod(name, 1, node=rng.choice(NODES), job="t/orphaned-job")
            elif pick < 0.75:
                world.node(rng.choice(NODES), cordoned=rng.random() < 0.5)
            elif world.pods:
                victim = rng.choice(sorted(world.pods))
                how = rng.random()
                if world.pods[victim]["spec"]["nodeName"] and how < 0.5:
                    world.change(victim, phase=rng.choice(("Running", "Succeeded", "Succeeded", "Failed")))
                elif how < 0.8:
                    world.delete(victim)
                else:
                    world.change(victim, deleting=True)
        now += rng.choice((0.2, 1.0, 3.0))
        reports = [list(_report(b, cluster, now, full)) for b, full in zip(backends, (True, False, True))]
        assert reports[0] == reports[1] == reports[2], f"seed {seed}, step {step}"
        new, _, gone = reports[0][-1]  # type: ignore[misc]
        queued = [j for j in queued if j not in gone] + list(new)
        running -= {j for j in running if j in set(reports[0][2])}  # type: ignore[arg-type]
        starts = []  # the same actions on both backends
        for job_id in list(queued):
            if rng.random() < 0.5:
                queued.remove(job_id)
                starts.append((Start(job_id, "p", ((0, 1),), 0.0, 0.0, 1, 0, 0), [rng.choice(NODES)]))
        for backend in backends:
            backend.start_batch(starts, now)
        running |= {s.job_id for s, _ in starts}
        if running and rng.random() < 0.2:
            stopped = rng.choice(sorted(running))
            running.discard(stopped)
            for backend in backends:
                backend.stop(stopped)
        assert apis[0].calls == apis[1].calls == apis[2].calls, f"seed {seed}, step {step}"
        for call in apis[0].calls[applied:]:  # the API server carries out what was asked
            name = call[2] if len(call) > 2 else ""
            if call[0] == "bind" and name in world.pods and not world.pods[name]["spec"]["nodeName"]:
                world.change(name, node=call[3])
            elif call[0] == "delete" and name in world.pods:
                world.delete(name)
        applied = len(apis[0].calls)
    assert applied > 20, "the history exercised binds and deletes"
