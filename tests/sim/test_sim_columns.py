"""Compact columns: widened integer arrays keep every value, strings round-trip, and sorted runs
answer what `sorted()` answers."""

from __future__ import annotations

import math
import random
from array import array

import pytest

from gputwin.sim import columns
from gputwin.sim.columns import Blob, SortedRuns, extended, picked, widened
from gputwin.sim.finished import FinishedLog, SpecColumns
from gputwin.sim.metrics import percentile


@pytest.mark.parametrize(
    ("code", "value", "want"),
    [
        pytest.param("B", 256, "H", id="unsigned-byte-to-short"),
        pytest.param("B", 70_000, "I", id="skips-a-code-too-narrow"),
        pytest.param("B", -1, "q", id="negative-needs-a-signed-code"),
        pytest.param("b", 2**40, "q", id="signed-to-64-bit"),
    ],
)
def test_widened_keeps_the_values_and_takes_the_new_one(code: str, value: int, want: str) -> None:
    column = array(code, [0, 1, 7])
    wide = widened(column, value)  # type: ignore[arg-type]
    assert wide.typecode == want and list(wide) == [0, 1, 7, value]


@pytest.mark.parametrize(
    ("code", "values", "want"),
    [
        pytest.param("B", [0, 255, True], "B", id="bytes-fit"),
        pytest.param("B", [3, 256, 1], "H", id="bytes-widen"),
        pytest.param("B", [3, -1], "q", id="bytes-negative"),
        pytest.param("H", [3, 70_000], "I", id="struct-widen"),
    ],
)
def test_extended_appends_every_value_widening_as_needed(code: str, values: list[int], want: str) -> None:
    column = extended(array(code, [7]), values)  # type: ignore[arg-type]
    assert column.typecode == want and list(column) == [7, *values]


def test_extended_refuses_what_is_not_an_integer() -> None:
    with pytest.raises(TypeError):
        extended(array("B"), [1.5])  # type: ignore[list-item]


def test_a_value_beyond_64_bits_is_refused() -> None:
    with pytest.raises(OverflowError, match="64-bit"):
        widened(array("q", [1]), 2**64)


def test_spec_columns_and_blob_round_trip_any_string() -> None:
    from gputwin.core.model import JobSpec

    words = ["u1", "", "ünï", "u1", "\udcff", *[f"n{k}" for k in range(300)]]  # 300+: codes widen
    specs = [JobSpec(w, 1.0, 2.0, 1, "t", user=w, name=f"{w}!", seq=k) for k, w in enumerate(words)]
    columns, blob = SpecColumns(), Blob()
    columns.submit = array("d", [1.0] * len(specs))
    for spec in specs:
        columns.append(spec)
        blob.append(spec.job_id)
    assert [columns[i] for i in range(len(columns))] == specs and [blob[i] for i in range(len(blob))] == words
    assert columns.codes[1].typecode == "H" and len(columns.strings) == 2 * len(set(words)) + 2


@pytest.mark.parametrize("run", [1, 3, 64, 10_000], ids=["runs-of-1", "runs-of-3", "runs-of-64", "one-run"])
def test_sorted_runs_index_as_sorted_does(monkeypatch: pytest.MonkeyPatch, run: int) -> None:
    monkeypatch.setattr(columns, "RUN", run)
    rng = random.Random(5)
    ties = [rng.choice([0.0, 1.5, -3.25, 1e300, 5e-324]) for _ in range(200)]  # repeats, extremes, a subnormal
    values = ties + [rng.lognormvariate(5, 2) for _ in range(800)]
    want, got = sorted(values), SortedRuns(values)
    assert len(got) == len(want) and len(got.runs) == math.ceil(len(values) / run)
    assert [got[k] for k in range(len(want))] == want and list(got) == want and got[-1] == want[-1]
    assert got.total() == math.fsum(values)
    for q in (0, 50, 95, 99, 99.9, 100):
        assert percentile(got, q) == percentile(want, q)
    with pytest.raises(IndexError):
        got[len(want)]


@pytest.mark.parametrize("chunk", [1, 2, 3, 1 << 16])
def test_picked_gives_the_values_at_the_positions_in_order(chunk: int) -> None:
    column = array("d", [0.5, 1.5, 2.5, 3.5, 4.5])
    at = array("I", [4, 0, 2, 3])
    assert list(picked(column, at, chunk)) == [4.5, 0.5, 2.5, 3.5] and list(picked(column, [], chunk)) == []


def test_the_log_widens_a_column_that_a_value_overflows(sim_cluster, sim_jobs) -> None:
    # A 300-GPU job on one 300-GPU node (gpus and slot_gpus start at one byte), priority -1 and
    # 1,000 milli-GPUs (the spec's ints start signed one-byte): each widens, nothing is lost.
    from gputwin.core.model import PolicySpec
    from gputwin.sim.engine import Simulator

    spec = sim_cluster({"l0": [300, 1]}, PolicySpec(queue="fifo"))
    jobs = sim_jobs([("big", 0, 10, 300, {"priority": -1}), ("one", 20, 5, 1, {})])
    listed, streamed = Simulator(spec).run(jobs).finished, Simulator(spec).run(iter(jobs)).finished
    assert list(streamed) == list(listed) and [r.spec for r in streamed] == jobs
    assert streamed[0].slots == ((0, 300),) and [r.gpus for r in streamed] == [300, 1]
    assert streamed.gpus.typecode == streamed.slot_gpus.typecode == "H"
