"""TraceReplay with `spec.search`: the operator's reconcilers on an in-memory store run the search of
`gputwin tune` (real simulations, a real optuna study in memory), record the best trials, and
promote a winning trial into the SchedulingPolicies exactly as simulated, only if it beats current."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from gputwin.adapters.traces import read_trace
from gputwin.api.convert import policy_spec
from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.api.v1alpha1 import SchedulingPolicy, TraceReplay
from gputwin.api.workloads import search_vocabulary
from gputwin.operator.backends import SimBackend
from gputwin.operator.cluster import read_cluster
from gputwin.operator.controller import Controller
from gputwin.operator.replay import RECORDED_TRIALS, replay_cluster
from gputwin.operator.store import MemoryStore
from gputwin.sim.space import parse_space
from gputwin.sim.tune import describe, tune

T0 = 1767225600.0  # 2026-01-01T00:00:00Z
Obj = dict[str, Any]
# The first 1,200 lines of the demo trace (1,199 jobs): a trial takes a fraction of a second.
HEAD = "".join(demo_trace_path().read_text().splitlines(keepends=True)[:1200])


def cluster(queue: str | None = None) -> list[Obj]:
    """The demo cluster (three partitions, three SchedulingPolicies), optionally all under `queue`."""
    docs = [d for d in yaml.safe_load_all(demo_cluster_path().read_text()) if d]
    for doc in docs:
        if queue is not None and doc["kind"] == "SchedulingPolicy":
            doc["spec"]["queue"] = {"policy": queue}
    return docs


def replay(search: Obj, name: str = "search", **spec: Any) -> Obj:
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "TraceReplay",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"trace": {"configMap": {"name": "traces", "key": "jobs.csv"}}, "topology": "demo",
                     "search": search, **spec}}  # fmt: skip


def reconciled(*objs: Obj, docs: list[Obj] | None = None) -> tuple[MemoryStore, Controller]:
    store = MemoryStore([*(cluster() if docs is None else docs), *objs])
    store.put_configmap("default", "traces", {"jobs.csv": HEAD})
    controller = Controller(store, SimBackend())
    controller.reconcile(T0)
    return store, controller


def status(store: MemoryStore, name: str = "search") -> Obj:
    obj = store.get("TraceReplay", "default", name)
    assert obj is not None
    return dict(obj["status"])


def test_a_search_replay_records_its_best_trials_ranked_with_current() -> None:
    store, _ = reconciled(replay({"budget": 8, "seed": 1}))
    result = status(store)
    assert result["phase"] == "Succeeded" and result["trials"] == 8 and result["promoted"] is False
    candidates = result["candidates"]
    values = [c["metrics"]["avgJct"] for c in candidates]
    assert values == sorted(values) and result["winner"] == candidates[0]["name"]
    trials = [c for c in candidates if c["name"] != "current"]
    assert 1 <= len(trials) <= RECORDED_TRIALS and all(0 <= c["trial"] < 8 for c in trials)
    assert len({c["name"] for c in candidates}) == len(candidates)  # a policy tried twice shows once
    assert "trial" not in next(c for c in candidates if c["name"] == "current")
    assert {c["metrics"]["jobs"] for c in candidates} == {1199}
    cond = result["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Complete", "True", "Replayed")
    assert cond["message"].startswith(f"{result['winner']} wins on avg_jct")
    assert cond["message"].endswith(f"under {len(candidates)} policies (8 search trials)")
    assert [e.reason for e in store.events if e.kind == "TraceReplay"] == ["ReplaySucceeded"]


def test_the_same_seed_gives_the_same_status_and_another_seed_other_trials() -> None:
    objs = [replay({"budget": 5, "seed": 3}, "a"), replay({"budget": 5, "seed": 3}, "b"),
            replay({"budget": 5, "seed": 4}, "c")]  # fmt: skip
    store, _ = reconciled(*objs)
    a, b, c = (status(store, n) for n in "abc")
    assert a["candidates"] == b["candidates"] and a["winner"] == b["winner"]
    assert [x["name"] for x in a["candidates"]] != [x["name"] for x in c["candidates"]]


def test_the_search_is_gputwin_tunes_search_and_its_winner_is_promoted_as_simulated(tmp_path: Path) -> None:
    docs = cluster()
    sjf = next(d for d in docs if d["metadata"]["name"] == "sjf-topology")
    # Knobs the winner does not set must not survive its promotion, or the live policy would
    # differ from the one simulated.
    sjf["spec"]["sizing"] = {"policy": "history", "allowedGPUs": [1, 2, 4, 8]}
    sjf["spec"]["params"] = {"qssf_prior": 600}
    space = {"queue": ["sjf", "srtf"], "placement": ["consolidate", "topology-aware"]}
    obj = replay({"budget": 6, "seed": 5, "space": space}, promote=True)
    store, controller = reconciled(obj, docs=docs)
    result = status(store)
    # The same search run directly, as `gputwin tune` runs it, finds the same best policy.
    (tmp_path / "jobs.csv").write_text(HEAD)
    jobs = read_trace(tmp_path / "jobs.csv", "auto").jobs
    replayed = replay_cluster(read_cluster(MemoryStore(docs)), TraceReplay.model_validate(obj).spec)
    assert not isinstance(replayed, str)
    direct = tune(
        replayed.spec, jobs, parse_space(space, "s", search_vocabulary()), storage=None, budget=6, seed=5
    )
    assert result["winner"] == describe(direct.best.policy) != "current"
    assert result["promoted"] is True and [e.reason for e in store.events][-1] == "Promoted"
    for policy in store.list("SchedulingPolicy"):
        model = SchedulingPolicy.model_validate(policy)
        assert policy["metadata"]["generation"] == 2
        assert "allowedGPUs" not in policy["spec"]["sizing"] and "qssf_prior" not in policy["spec"]["params"]
        checkpoint = model.spec.preemption.checkpoint_seconds
        assert policy_spec(model) == dataclasses.replace(direct.best.policy, checkpoint_seconds=checkpoint)
    # The promoted policy is live: every partition schedules under it now.
    assert controller.cluster is not None
    assert {describe(p.policy) for p in controller.cluster.partitions} == {result["winner"]}


def test_a_search_that_does_not_beat_current_promotes_nothing() -> None:
    fixed = {"queue": "fifo", "placement": "first-fit", "sizing": "as-requested", "backfill": False}
    store, _ = reconciled(replay({"budget": 2, "space": fixed}, promote=True), docs=cluster(queue="srtf"))
    result = status(store)
    assert result["phase"] == "Succeeded" and result["winner"] == "current" and result["promoted"] is False
    assert [c["name"] for c in result["candidates"]] == ["current", "fifo/first-fit/as-requested"]
    assert result["trials"] == 2  # two trials, one distinct policy
    assert {p["metadata"]["generation"] for p in store.list("SchedulingPolicy")} == {1}
    assert "Promoted" not in [e.reason for e in store.events]


def test_listed_candidates_and_search_trials_are_ranked_together() -> None:
    candidates = [{"queue": "fifo", "placement": "first-fit"}, {"queue": "srtf", "placement": "first-fit"}]
    space = {"queue": ["sjf", "srtf"], "placement": "first-fit", "sizing": "as-requested", "backfill": False}
    store, _ = reconciled(replay({"budget": 4, "seed": 2, "space": space}, candidates=candidates))
    result = status(store)
    names = [c["name"] for c in result["candidates"]]
    assert {"current", "fifo/first-fit/as-requested", "srtf/first-fit/as-requested"} <= set(names)
    # srtf was listed: the search's srtf trials are not shown again, only what the list lacks.
    assert names.count("srtf/first-fit/as-requested") == 1
    listed = {n: c for n, c in ((c["name"], c) for c in result["candidates"])}
    assert "trial" not in listed["srtf/first-fit/as-requested"]
    assert {n for n, c in listed.items() if "trial" in c} <= {"sjf/first-fit/as-requested"}
    values = [c["metrics"]["avgJct"] for c in result["candidates"]]
    assert values == sorted(values)


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"qeueu": ["sjf"]}, "spec.search.space: qeueu: unknown knob; known: queue, placement, backfill"),
        ({"queue": ["sjf", "lottery"]}, "spec.search.space: queue: unknown queue policy 'lottery'; known: "),
        ({"placement": "best-fit"}, "spec.search.space: placement: unknown placement policy 'best-fit'"),
        ({"max_wait": {"low": 900, "high": 60}}, "spec.search.space: max_wait: low 900 is above high 60"),
    ],
)
def test_a_bad_search_space_fails_the_replay_with_file_knob_and_reason(space: Obj, message: str) -> None:
    store, _ = reconciled(replay({"space": space}))
    result = status(store)
    cond = result["conditions"][0]
    assert (result["phase"], cond["status"], cond["reason"]) == ("Failed", "False", "InvalidSearch")
    assert cond["message"].startswith(message) and "\n" not in cond["message"]
    assert result["trials"] == 0 and result["candidates"] == []


def test_a_budget_above_the_maximum_is_refused_before_any_simulation() -> None:
    store, _ = reconciled(replay({"budget": 101}))
    result = status(store)
    cond = result["conditions"][0]
    assert (result["phase"], cond["reason"]) == ("Failed", "Invalid")
    assert "spec.search.budget" in cond["message"] and "100" in cond["message"]
