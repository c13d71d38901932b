"""The learned estimator's per-(user, name) features: the group's recent runs (an exponentially
weighted mean), how it was submitted (seconds since its previous submission, a count of its earlier
ones decayed by age), and the CPUs and memory a job asks for. Alibaba's pods repeat a request shape as their name; Philly's names are unique, so these
columns are empty (constant) there and its trees split as before."""

from __future__ import annotations

import math

import pytest

from gputwin.core.model import JobSpec
from gputwin.estimators.features import BURST, FEATURES, RECENT_WEIGHT, FeatureState


def _job(job_id: str, submit: float, name: str = "cpu8000-mem30000", seq: int = 0, **fields: float) -> JobSpec:
    return JobSpec(job_id, submit, 1.0, 1, "default", "LS", name, seq=seq, **fields)  # type: ignore[arg-type]


def _column(row: list[float], name: str) -> float:
    return row[FEATURES.index(name)]


def test_the_recent_mean_weighs_the_groups_newest_runs() -> None:
    state = FeatureState()
    runs = [1e5] * 3 + [10.0] * 16  # the three long ones were long ago: their weight has decayed
    for i, run in enumerate(runs):
        state.observe(_job(f"h{i}", 0.0), run)
    row = state.row(_job("new", 10.0))
    assert _column(row, "name_recent_log") == pytest.approx(math.log1p(10.0), abs=0.1)
    assert _column(row, "name_mean_log") > _column(row, "name_recent_log") + 1.0  # the all-time mean has them
    state.observe(_job("long", 0.0), 1e5)
    moved = _column(state.row(_job("next", 20.0)), "name_recent_log")
    expected = _column(row, "name_recent_log") + RECENT_WEIGHT * (math.log1p(1e5) - _column(row, "name_recent_log"))
    assert moved == pytest.approx(expected)
    assert math.isnan(_column(state.row(_job("other", 10.0, name="cpu1-mem1")), "name_recent_log"))


def test_submissions_count_the_groups_earlier_ones_decayed_by_age() -> None:
    state = FeatureState()
    jobs = [_job("a", 0.0), _job("b", 100.0), _job("c", 100.0, seq=1), _job("d", 100.0 + BURST)]
    rows = state.rows(jobs)
    gaps = [_column(row, "name_gap_log") for row in rows]
    bursts = [_column(row, "name_burst_log") for row in rows]
    assert math.isnan(gaps[0]) and gaps[1:] == pytest.approx([math.log1p(100.0), 0.0, math.log1p(BURST)])
    decayed = math.exp(-100.0 / BURST)  # a, as b sees it
    # d: b and c are one time constant old, a a little older.
    at_d = (decayed + 2.0) * math.exp(-1.0)
    assert bursts == pytest.approx([0.0, math.log1p(decayed), math.log1p(decayed + 1.0), math.log1p(at_d)])
    other = state.row(_job("e", 200.0, name="cpu1-mem1"))
    assert math.isnan(_column(other, "name_gap_log")) and _column(other, "name_burst_log") == 0.0


def test_a_job_described_again_is_not_counted_twice() -> None:
    # observe() describes a job that was never predicted: the latest one gets its first answer, an
    # older one is read from the state and not added to it.
    state = FeatureState()
    first = state.rows([_job("a", 0.0), _job("b", 50.0), _job("c", 60.0)])
    gap = FEATURES.index("name_gap_log")
    assert state.row(_job("c", 60.0))[gap:] == first[2][gap:]
    older = state.row(_job("b", 50.0))
    assert math.isnan(_column(older, "name_gap_log"))  # only the latest submission's time is kept
    later = state.row(_job("d", 60.0))
    assert _column(later, "name_burst_log") == pytest.approx(math.log1p(math.exp(-10.0 / BURST) * (math.exp(-50.0 / BURST) + 1.0) + 1.0))


def test_cpus_and_memory_are_features_where_the_trace_has_them() -> None:
    state = FeatureState()
    given = state.row(_job("a", 0.0, cpus=8.0, memory_mib=30000.0))
    assert (_column(given, "cpus_log"), _column(given, "memory_log")) == pytest.approx(
        (math.log1p(8.0), math.log1p(30000.0))
    )
    absent = state.row(_job("b", 0.0))
    assert math.isnan(_column(absent, "cpus_log")) and math.isnan(_column(absent, "memory_log"))


def test_unique_names_leave_the_group_columns_constant() -> None:
    # Philly's job names never repeat: the new columns hold nothing to split on there.
    state = FeatureState()
    rows = []
    for i in range(20):
        job = JobSpec(f"{i}", float(i), 5.0, 1, "vc1", "u", f"job{i}")
        rows.append(state.row(job))
        state.observe(job, 5.0 + i)
    for name in ("name_recent_log", "name_gap_log", "cpus_log", "memory_log"):
        assert all(math.isnan(row[FEATURES.index(name)]) for row in rows)
    assert {row[FEATURES.index("name_burst_log")] for row in rows} == {0.0}
