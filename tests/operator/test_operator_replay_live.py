"""TraceReplay with `spec.trace.live`: the reconcilers on an in-memory store fork the scheduler's present
(GPUJobs running and queued, nodes out of service) and rank the candidates on its forecast, by the same
rule as a trace replay (ties to current, only a winner other than current promoted).

The cluster is manifests/samples/two-leaf.yaml; its `infer` partition (gpu07-08, 16 GPUs) runs
fifo-consolidate without backfill, at most 8 GPUs a job. The live queue there: two 8-GPU jobs hold
all 16 GPUs for 100 s, then two 8-GPU hour-long jobs head the queue in front of eight 2-GPU one-minute
jobs, so a shortest-first queue finishes the small ones an hour sooner than fifo does. The history
(`HISTORY`) has the same jobs one at a time, where no queue policy makes a difference: there current
keeps winning (a tie goes to current).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gputwin.operator.backends import SimBackend
from gputwin.operator.controller import Controller
from gputwin.operator.store import MemoryStore

ROOT = Path(__file__).resolve().parents[2]
TWO_LEAF = ROOT / "manifests" / "samples" / "two-leaf.yaml"
T0 = 1767225600.0  # 2026-01-01T00:00:00Z
Obj = dict[str, Any]
SJF = {"queue": "sjf", "placement": "consolidate"}
# Each job submitted after the one before has ended: the queue is always empty, every policy ties.
HISTORY = "job_id,user,vc,jobname,gpu_num,state,submit_time,duration\n" + "".join(
    f"{i},u,infer,j{i},{g},COMPLETED,{i * 4000},{d}\n"
    for i, (g, d) in enumerate([(8, 100)] * 2 + [(8, 3600)] * 2 + [(2, 60)] * 8)
)


def job(name: str, gpus: int, duration: float, task_type: str = "infer") -> Obj:
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob", "metadata": {"name": name, "namespace": "default"},
            "spec": {"taskType": task_type, "gpus": gpus, "durationSeconds": duration}}  # fmt: skip


QUEUE = [*(job(f"a-hold-{i}", 8, 100) for i in range(2)), *(job(f"b-big-{i}", 8, 3600) for i in range(2)),
         *(job(f"c-small-{i}", 2, 60) for i in range(8))]


def replay(name: str = "live", trace: Obj | None = None, **spec: Any) -> Obj:
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "TraceReplay",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"trace": trace or {"live": {"horizonSeconds": 86400, "samples": 4}}, "topology": "two-leaf",
                     "partitions": ["infer"], "candidates": [SJF], "objective": "avg_jct", **spec}}  # fmt: skip


def reconciled(*objs: Obj) -> tuple[MemoryStore, Controller]:
    store = MemoryStore([*(d for d in yaml.safe_load_all(TWO_LEAF.read_text()) if d), *objs])
    store.put_configmap("default", "traces", {"jobs.csv": HISTORY})
    controller = Controller(store, SimBackend())
    controller.reconcile(T0)
    return store, controller


def status(store: MemoryStore, name: str = "live") -> Obj:
    obj = store.get("TraceReplay", "default", name)
    assert obj is not None
    return dict(obj.get("status") or {})


def queue_policy(store: MemoryStore, name: str = "fifo-consolidate") -> str:
    obj = store.get("SchedulingPolicy", None, name)
    assert obj is not None
    return str(obj["spec"]["queue"]["policy"])


HISTORY_TRACE = {"configMap": {"name": "traces", "key": "jobs.csv"}}


@pytest.mark.parametrize(
    ("trace", "jobs", "phase", "reason", "winner"),
    [
        pytest.param(None, QUEUE, "Succeeded", "Forecast", "sjf/consolidate/as-requested", id="live-queue-sjf-wins"),
        pytest.param(HISTORY_TRACE, QUEUE, "Succeeded", "Replayed", "current", id="history-current-wins"),
        pytest.param(None, [], "Pending", "NothingQueued", None, id="live-empty-queue"),
        pytest.param(None, QUEUE[:2], "Pending", "NothingQueued", None, id="live-nothing-waits"),
        pytest.param(None, [job("t", 8, 60, "train")], "Pending", "NothingQueued", None, id="live-other-partition"),
    ],
)
def test_a_live_replay_ranks_on_the_present(trace: Obj | None, jobs: list[Obj], phase: str, reason: str,
                                            winner: str | None) -> None:  # fmt: skip
    store, _ = reconciled(replay(trace=trace), *jobs)
    result = status(store)
    cond = result["conditions"][0]
    assert (result["phase"], cond["reason"], result.get("winner")) == (phase, reason, winner)
    if reason == "NothingQueued":
        assert cond["message"] == "nothing queued: the live queue has no job to compare on"
        assert not result.get("candidates")


def test_the_live_queue_picks_another_winner_than_history_and_promotes_it() -> None:
    store, controller = reconciled(replay(promote=True), replay("history", HISTORY_TRACE, promote=True), *QUEUE)
    live, history = status(store), status(store, "history")
    assert history["winner"] == "current" and history["promoted"] is False
    assert live["winner"].startswith("sjf/consolidate") and live["promoted"] is True
    by_name = {c["name"]: c["metrics"] for c in live["candidates"]}
    assert by_name[live["winner"]]["avgJct"] < by_name["current"]["avgJct"] - 1000  # an hour sooner for 8 of 9
    assert {m["jobs"] for m in by_name.values()} == {10}  # the queued jobs, not the running ones
    assert queue_policy(store) == "sjf" and queue_policy(store, "sjf-topology") == "sjf"  # train: untouched
    assert {p.name: p.policy.queue for p in controller.cluster.partitions}["infer"] == "sjf"  # type: ignore[union-attr]
    message = live["conditions"][0]["message"]
    assert message.endswith("10 queued and 2 running jobs forecast under 2 policies over 86,400 s (4 samples)")
    assert "Promoted" in [e.reason for e in store.events]


def test_a_live_replay_is_deterministic_and_never_promotes_a_tie() -> None:
    a, _ = reconciled(replay(promote=True), *QUEUE)
    b, _ = reconciled(replay(promote=True), *QUEUE)
    assert status(a)["candidates"] == status(b)["candidates"]
    tie, _ = reconciled(replay(candidates=[{"queue": "fifo", "placement": "consolidate"}], promote=True), *QUEUE)
    result = status(tie)
    assert result["winner"] == "current" and result["promoted"] is False and queue_policy(tie) == "fifo"


def test_a_live_replay_waits_for_a_queue_then_runs_once() -> None:
    store, controller = reconciled(replay())
    assert status(store)["phase"] == "Pending"
    for obj in QUEUE:
        store.put(obj)
    controller.reconcile(T0 + 10)
    assert status(store)["phase"] == "Succeeded"
    controller.reconcile(T0 + 20)  # once per generation
    assert [e.reason for e in store.events if e.kind == "TraceReplay"] == ["ReplaySucceeded"]


def test_a_live_replay_sees_nodes_out_of_service() -> None:
    """A mock of a backend observing gpu08 cordoned: one hour-long job waits for the other, the
    small ones behind them under fifo, a few minutes under sjf."""

    class CordonedBackendMock(SimBackend):
        def observe(self, cluster: Any, now: float) -> dict[str, str]:
            return {"gpu08": "cordoned"}

        def held_by_others(self) -> dict[str, int]:
            return {}

    store = MemoryStore([*(d for d in yaml.safe_load_all(TWO_LEAF.read_text()) if d), replay(), *QUEUE])
    Controller(store, CordonedBackendMock()).reconcile(T0)
    by_name = {c["name"]: c["metrics"] for c in status(store)["candidates"]}
    assert by_name["current"]["avgJct"] > 7200 > 3600 > by_name[status(store)["winner"]]["avgJct"]
