"""The one evaluation module: the typed Summary round-trips through its JSON, `run` prints exactly
`to_json()`, and `rank` orders by an objective's direction with a deterministic tie-break."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.core.model import Candidate
from gputwin.sim.evaluation import DIRECTIONS, METRICS, OBJECTIVES, TENANCY_METRICS, JobMetrics, PartitionMetrics, Summary, rank
from gputwin.sim.run import run, run_summary

DEMO_KEYS = {*JobMetrics().to_json(), "makespan", "gpu_utilization", "partitions", "wall_seconds", "rejected",
             "resized", "policies", "compat", "utilization_series", "fragmented_gpus"}  # fmt: skip


@pytest.fixture(scope="module")
def demo_summary() -> Summary:
    cluster, jobs = load_cluster(demo_cluster_path()), tuple(read_trace(demo_trace_path()).jobs[:300])
    summary, _ = run_summary(cluster, jobs, overrides=Candidate("sjf", "consolidate", backfill=True))
    return summary


def test_summary_json_keys_are_the_documented_ones(demo_summary: Summary) -> None:
    data = demo_summary.to_json()
    assert data.keys() == DEMO_KEYS
    partition_keys = {*JobMetrics().to_json(), "gpus", "gpu_utilization"}
    assert all(m.keys() == partition_keys for m in data["partitions"].values())
    assert data["jobs"] == 300 and data["utilization_series"][0].keys() == {"t", "gpu_utilization"}


def test_a_real_summary_round_trips_through_json_text(demo_summary: Summary) -> None:
    again = Summary.from_json(json.loads(json.dumps(demo_summary.to_json())))
    assert again == demo_summary and again.to_json() == demo_summary.to_json()


def test_run_prints_the_typed_summarys_json() -> None:
    cluster, jobs = load_cluster(demo_cluster_path()), tuple(read_trace(demo_trace_path()).jobs[:100])
    data, _ = run(cluster, jobs)
    typed, _ = run_summary(cluster, jobs)
    strip = lambda d: {k: v for k, v in d.items() if k != "wall_seconds"}  # noqa: E731
    assert strip(data) == strip(typed.to_json())


numbers = st.floats(0, 1e9, allow_nan=False)
counts = st.integers(0, 10**6)
job_metrics = st.builds(JobMetrics, jobs=counts, avg_jct=numbers, avg_queue=numbers, p50_jct=numbers,
                        p95_jct=numbers, p99_jct=numbers, p99_queue=numbers, preemptions=counts,
                        avg_overhead=numbers)  # fmt: skip
partition = st.builds(lambda m, g, u: PartitionMetrics(**m.to_json(), gpus=g, gpu_utilization=u),
                      job_metrics, counts, st.floats(0, 1))  # fmt: skip
summaries = st.builds(
    lambda m, extra, parts, series: Summary(**m.to_json(), **extra, partitions=parts,
                                            utilization_series=series),
    job_metrics,
    st.fixed_dictionaries({"makespan": numbers, "gpu_utilization": st.floats(0, 1), "wall_seconds": numbers,
                           "rejected": st.dictionaries(st.text(max_size=8), counts, max_size=3),
                           "resized": counts,
                           "policies": st.dictionaries(st.text(max_size=8), st.text(), max_size=3),
                           "compat": st.none() | st.just("helios")}),  # fmt: skip
    st.dictionaries(st.text(min_size=1, max_size=8), partition, max_size=3),
    st.lists(st.tuples(numbers, st.floats(0, 1)), max_size=4).map(tuple),
)


@settings(max_examples=60, deadline=None)
@given(summary=summaries)
def test_any_summary_round_trips(summary: Summary) -> None:
    assert Summary.from_json(json.loads(json.dumps(summary.to_json()))) == summary


@pytest.mark.parametrize("field", ["jobs", "avg_jct", "gpu_utilization"], ids=str)
@pytest.mark.parametrize("value", ["1", None, True, [1]], ids=repr)
def test_from_json_refuses_a_metric_that_is_no_number(demo_summary: Summary, field: str,
                                                     value: object) -> None:  # fmt: skip
    data = {**demo_summary.to_json(), field: value}
    with pytest.raises(TypeError, match=field):
        Summary.from_json(data)


@dataclass(frozen=True)
class Result:
    values: dict[str, float]
    tiebreak: str

    def score(self, objective: str) -> float:
        return self.values[objective]


RANKINGS = [  # objective, results as (tie-break, value), expected order
    ("avg_jct", [("b", 2.0), ("a", 2.0), ("c", 1.0)], ["c", "a", "b"]),
    ("gpu_utilization", [("b", 0.5), ("a", 0.5), ("c", 0.9)], ["c", "a", "b"]),
    ("p99_queue", [("z", 0.0), ("y", 0.0)], ["y", "z"]),
]


@pytest.mark.parametrize(("objective", "results", "order"), RANKINGS, ids=[r[0] for r in RANKINGS])
def test_rank_follows_the_objectives_direction_then_the_tiebreak(
    objective: str, results: list[tuple[str, float]], order: list[str]
) -> None:
    ranked = rank([Result({objective: v}, name) for name, v in results], objective)
    assert [r.tiebreak for r in ranked] == order
    assert [r.tiebreak for r in rank(reversed(ranked), objective)] == order  # input order does not matter


def test_rank_refuses_an_unknown_metric() -> None:
    with pytest.raises(KeyError, match="unknown metric"):
        rank([Result({"x": 1.0}, "a")], "x")


def test_every_objective_is_a_metric() -> None:
    assert OBJECTIVES.keys() <= DIRECTIONS.keys() == METRICS.keys() | TENANCY_METRICS.keys()
    assert (OBJECTIVES["gpu_utilization"], OBJECTIVES["jain"], OBJECTIVES["fragmented_gpus"]) == (
        "maximize", "maximize", "minimize")
