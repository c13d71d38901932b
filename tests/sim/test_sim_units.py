"""How metrics are shown: every metric has one label, unit and fixed format, the same in every row."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputwin.sim.evaluation import METRICS, TENANCY_METRICS
from gputwin.sim.units import FORMATS, metric


def test_every_metric_has_exactly_one_format() -> None:
    assert list(FORMATS) == [*METRICS, *TENANCY_METRICS]


@pytest.mark.parametrize(("key", "value", "cell", "header"), [
    ("avg_jct", 1831.889, "1,831.9", "avg JCT (s)"),
    ("avg_jct", 2.0, "2.0", "avg JCT (s)"),
    ("p99_queue", 0.0, "0.0", "p99 queue (s)"),
    ("gpu_utilization", 0.3379, "33.8", "GPU util (%)"),
    ("avg_overhead", 0.00016, "0.02", "overhead (%)"),
    ("jobs", 1234567, "1,234,567", "jobs"),
    ("makespan", 98765.4, "98,765", "makespan (s)"),
    ("avg_jct", None, "—", "avg JCT (s)"),
], ids=["seconds", "seconds-whole", "zero", "fraction-as-percent", "small-percent", "count", "makespan", "missing"])  # fmt: skip
def test_cells_are_thousands_separated_with_fixed_decimals(key: str, value: float | None, cell: str,
                                                           header: str) -> None:  # fmt: skip
    assert metric(key).cell(value) == cell
    assert metric(key).header == header


def test_a_sentence_gets_the_unit_after_the_number() -> None:
    assert metric("avg_jct").with_unit(422.046) == "422.0 s"
    assert metric("jobs").with_unit(3375) == "3,375"


def test_an_unknown_metric_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="avg_jct"):
        metric("avg_jtc")


@given(st.sampled_from(list(FORMATS)), st.lists(st.floats(0, 1e7, allow_nan=False), min_size=2, max_size=20))
def test_a_column_has_the_same_decimals_in_every_row(key: str, values: list[float]) -> None:
    decimals = {len(c.split(".")[1]) if "." in c else 0 for c in map(metric(key).cell, values)}
    assert len(decimals) == 1
