"""The finished-job log: its rows are the final JobStates' fields, and its metrics equal the row-wise ones."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from gputwin.core.model import PolicySpec
from gputwin.core.state import JobState
from gputwin.sim.engine import Recorder, Simulator
from gputwin.sim.finished import FinishedJob, FinishedLog, SpecColumns
from gputwin.sim.metrics import job_metrics, log_metrics

FIELDS = [f for f in FinishedJob._fields if f != "spec"]


class KeepingListenerMock:
    """The simulator's recorder, wrapped so it also keeps each final JobState (what the log
    replaces), to compare with. A wrapper, not a subclass: the compiled build's Recorder cannot
    be subclassed by an interpreted class."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.kept: list[JobState] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.recorder, name)

    def completed(self, ends: Sequence[tuple[JobState, float]], now: float) -> None:
        self.recorder.completed(ends, now)
        self.kept.extend(state for state, _ in ends)


def _replay(sim_cluster, sim_jobs) -> tuple[FinishedLog, list[JobState]]:
    # a: one 4-GPU node and one 2-GPU node under separate leaves; b: one 2-GPU node. srtf preempts.
    spec = sim_cluster({"l0": [4], "l1": [2], "l2": [2]},
                       PolicySpec(queue="srtf"), partitions=[("a", [0, 1], ["a"]), ("b", [2], ["b"])])  # fmt: skip
    specs = sim_jobs([
        ("long", 0, 100, 6, {"task_type": "a"}), ("short", 10, 5, 2, {"task_type": "a"}),
        ("b1", 3, 7, 1, {"task_type": "b"}), ("b2", 3, 9, 2, {"task_type": "b"}),
    ])  # fmt: skip
    sim = Simulator(spec)
    sim.runtime.listener = listener = KeepingListenerMock(sim.recorder)
    out = sim.run(specs)
    return out.finished, listener.kept


def test_rows_hold_the_final_job_states_fields(sim_cluster, sim_jobs) -> None:
    log, states = _replay(sim_cluster, sim_jobs)
    assert len(log) == len(states) == 4
    for row, state in zip(log, states):
        assert row.spec is state.spec and row.job_id == state.job_id
        assert {f: getattr(row, f) for f in FIELDS} == {f: getattr(state, f) for f in FIELDS}
    assert any(row.preemptions for row in log) and any(len(row.slots) > 1 for row in log)


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        pytest.param(0, 0, id="first"),
        pytest.param(-1, 3, id="negative-counts-from-the-end"),
        pytest.param(slice(1, 3), [1, 2], id="slice"),
        pytest.param(slice(None, None, -2), [3, 1], id="reversed-step"),
    ],
)
def test_indexing_is_a_sequences(sim_cluster, sim_jobs, index, expected) -> None:
    log, states = _replay(sim_cluster, sim_jobs)
    got = log[index]
    ids = [r.job_id for r in got] if isinstance(got, list) else got.job_id
    want = [states[i].job_id for i in expected] if isinstance(expected, list) else states[expected].job_id
    assert ids == want


@pytest.mark.parametrize("index", [4, -5], ids=["past-the-end", "before-the-start"])
def test_an_index_out_of_range_raises_index_error(sim_cluster, sim_jobs, index) -> None:
    log, _ = _replay(sim_cluster, sim_jobs)
    with pytest.raises(IndexError):
        log[index]


@pytest.mark.parametrize("partition", [None, "a", "b", "nowhere"], ids=["all", "a", "b", "unknown"])
def test_column_metrics_equal_the_row_metrics(sim_cluster, sim_jobs, partition) -> None:
    log, _ = _replay(sim_cluster, sim_jobs)
    at = range(len(log)) if partition is None else log.by_partition().get(partition, ())
    rows = [log[i] for i in at]
    assert log_metrics(log, at) == job_metrics(rows)
    assert [r.partition for r in rows] == ([partition] * len(rows) if partition else [r.partition for r in log])


def test_positions_by_partition_are_the_same_as_lists_and_as_arrays(sim_cluster, sim_jobs) -> None:
    log, _ = _replay(sim_cluster, sim_jobs)
    listed, packed = log.by_partition(), log.by_partition(listed_up_to=0)
    assert {name: list(at) for name, at in listed.items()} == {name: list(at) for name, at in packed.items()}
    assert all(isinstance(at, list) for at in listed.values()) and not any(isinstance(at, list) for at in packed.values())
    assert all(log_metrics(log, listed[name]) == log_metrics(log, packed[name]) for name in listed)


@pytest.mark.parametrize("n", [0, 1, 2_000], ids=["none", "one", "2k"])
def test_a_streamed_synthetic_replay_equals_the_listed_one(n) -> None:
    # A stream's specs are kept as columns and rebuilt: equal, field for field, to the list's.
    from gputwin.sim.metrics import summarize
    from gputwin.sim.synthetic import iter_synthetic_jobs, synthetic_cluster, synthetic_jobs

    cluster = synthetic_cluster(nodes=64)
    listed = Simulator(cluster).run(synthetic_jobs(n, cluster, seed=3))
    streamed = Simulator(cluster).run(iter_synthetic_jobs(n, cluster, seed=3))
    assert isinstance(streamed.finished.specs, SpecColumns) and isinstance(listed.finished.specs, list)
    assert list(map(repr, streamed.finished)) == list(map(repr, listed.finished))  # repr: `predicted` may be NaN
    assert summarize(streamed.finished, streamed.busy) == summarize(listed.finished, listed.busy)
    assert streamed.events == listed.events
