"""One runtime, one result: a trace through `gputwin simulate` and through the emulator's controller
(the trace's jobs as GPUJobs, created at their submit times) gives every job the same start, end
and nodes.

Both sides declare the cluster with the same manifests (`cluster_documents`: the simulator reads
them back through `cluster_spec`), and both run the one runtime (`gputwin.runtime`) on a virtual
clock; only what drives it differs - the simulator's `Replay` of JobSpecs, and here the
controller reconciling GPUJob objects in a store, stepped by the same `run_steps` loop. Traces:
the bundled demo trace and the shared Philly-shaped trace (../shared/traces/philly_mix1), an
excerpt of each (the controller lists every GPUJob per pass, so a whole trace would take long).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hostlist
import pytest

from gputwin.adapters.traces import read_trace
from gputwin.api.convert import cluster_documents, cluster_spec
from gputwin.api.loader import load_cluster
from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.api.status import epoch_seconds
from gputwin.api.v1alpha1 import GPUPartition, SchedulingPolicy, SwitchTopology
from gputwin.cli.emulator import settle
from gputwin.core.model import ClusterSpec, JobSpec
from gputwin.operator.backends import SimBackend
from gputwin.operator.controller import Controller
from gputwin.operator.store import MemoryStore
from gputwin.runtime.clock import VirtualClock, run_steps
from gputwin.sim.engine import simulate

PHILLY = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "philly_mix1"
Outcome = dict[str, tuple[float, float, str]]  # GPUJob name -> (first start, end, nodes)


def name_of(index: int) -> str:
    return f"j{index:05d}"  # names sort in trace order: the controller admits ties by name


def declared(cluster: ClusterSpec, queue: str | None) -> tuple[list[dict[str, Any]], ClusterSpec]:
    """The cluster's manifests (every partition on `queue`, if given) and what they declare."""
    docs = cluster_documents(cluster)
    for doc in docs:
        if queue is not None and doc["kind"] == "SchedulingPolicy":
            doc["spec"]["queue"]["policy"] = queue
    topology = SwitchTopology.model_validate(docs[0])
    parts = [GPUPartition.model_validate(d) for d in docs if d["kind"] == "GPUPartition"]
    policies = [SchedulingPolicy.model_validate(d) for d in docs if d["kind"] == "SchedulingPolicy"]
    return docs, cluster_spec(topology, parts, policies)


def simulated(cluster: ClusterSpec, jobs: Sequence[JobSpec]) -> Outcome:
    outcome = simulate(cluster, jobs)
    names = [n.name for n in cluster.topology.nodes]
    index = {job.job_id: i for i, job in enumerate(jobs)}
    out: Outcome = {}
    for state in outcome.finished:
        assert state.first_start is not None and state.end is not None
        nodes = hostlist.collect_hostlist([names[i] for i, _ in state.slots])
        out[name_of(index[state.job_id])] = (round(state.first_start, 3), round(state.end, 3), nodes)
    return out


def gpujob(index: int, job: JobSpec) -> dict[str, Any]:
    spec = {"taskType": job.task_type, "gpus": job.gpus, "durationSeconds": job.duration,
            "user": job.user or "u", "jobName": job.name or "job"}  # fmt: skip
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob",
            "metadata": {"name": name_of(index), "namespace": "default"}, "spec": spec}  # fmt: skip


class Arrivals:
    """GPUJobs created in the store as their submit times come; each step reconciles the
    controller there (`gputwin.runtime.clock.Steps`, as the emulator's `gputwin run` is)."""

    def __init__(self, controller: Controller, store: MemoryStore, jobs: Sequence[JobSpec]) -> None:
        self.controller, self.store, self.jobs, self.next = controller, store, jobs, 0

    def next_event(self) -> float | None:
        when = self.controller.next_event()
        if self.next < len(self.jobs) and (when is None or self.jobs[self.next].submit < when):
            return self.jobs[self.next].submit
        return when

    def step(self, now: float) -> None:
        while self.next < len(self.jobs) and self.jobs[self.next].submit <= now:
            self.store.put(gpujob(self.next, self.jobs[self.next]))
            self.next += 1
        settle(self.controller, now)


def emulated(docs: list[dict[str, Any]], jobs: Sequence[JobSpec]) -> Outcome:
    store = MemoryStore(docs)
    controller = Controller(store, SimBackend())
    controller.reconcile(0.0)
    run_steps(Arrivals(controller, store, jobs), VirtualClock(0.0))
    out: Outcome = {}
    for obj in store.list("GPUJob"):
        status = obj["status"]
        assert status["phase"] == "Succeeded", (obj["metadata"]["name"], status)
        start, end = epoch_seconds(status["startTime"]), epoch_seconds(status["endTime"])
        out[obj["metadata"]["name"]] = (round(start, 3), round(end, 3), status["nodes"])
    return out


def excerpt(path: Path, count: int) -> list[JobSpec]:
    """The first `count` jobs of a trace (in submit order), submit times as the trace gives them."""
    return list(read_trace(path).jobs[:count])


CASES = {
    "demo-trace": (demo_cluster_path, demo_trace_path, None),
    "demo-trace-srtf-preemptive": (demo_cluster_path, demo_trace_path, "srtf"),
    "philly-fifo": (lambda: PHILLY / "cluster.csv", lambda: PHILLY / "jobs.csv", "fifo"),
    "philly-las-preemptive": (lambda: PHILLY / "cluster.csv", lambda: PHILLY / "jobs.csv", "las"),
}


@pytest.mark.parametrize(("cluster_path", "trace_path", "queue"), CASES.values(), ids=CASES.keys())
def test_simulate_and_the_emulator_give_every_job_the_same_start_end_and_nodes(
    cluster_path: Any, trace_path: Any, queue: str | None
) -> None:
    if not Path(trace_path()).is_file():
        pytest.skip(f"shared traces not found at {PHILLY}")
    jobs = excerpt(trace_path(), 250)
    docs, cluster = declared(load_cluster(cluster_path()), queue)
    sim, emu = simulated(cluster, jobs), emulated(docs, jobs)
    assert len(sim) == len(jobs)
    different = {name: (sim.get(name), emu.get(name)) for name in sim.keys() | emu.keys() if sim.get(name) != emu.get(name)}
    assert different == {}, f"{len(different)} jobs differ, e.g. {sorted(different.items())[:3]}"
