"""Which plots a comparison report draws and what their captions say, on hand-made results.

The results are built by hand (not simulated) so each case pins one rule: span shown only when it
differs, queueing only for partitions where a job waited, captions stating the numbers.
"""

from __future__ import annotations

import pytest

from gputwin.core.model import Candidate
from gputwin.sim.compare import CandidateResult
from gputwin.sim.evaluation import PartitionMetrics, Summary
from gputwin.sim.findings import findings, queued_partitions, spans_vary


def result(queue: str, avg_jct: float, spans: list[int], waits: dict[str, float], util: float = 0.5) -> CandidateResult:
    partitions = {p: PartitionMetrics(jobs=1, avg_queue=w) for p, w in waits.items()}
    summary = Summary(jobs=len(spans), avg_jct=avg_jct, p99_jct=2 * avg_jct, gpu_utilization=util,
                      partitions=partitions, utilization_series=((0.0, util), (3600.0, util)))  # fmt: skip
    return CandidateResult(Candidate(queue, "consolidate"), summary, [avg_jct] * len(spans), spans)


@pytest.mark.parametrize(("spans", "varies"), [
    ([[1, 1], [1, 1]], False),
    ([[1, 2], [2, 1]], False),  # the same tally in another order
    ([[1, 1], [1, 2]], True),
    ([[1, 3]], False),
], ids=["none-spans", "same-tally", "one-differs", "single-candidate"])  # fmt: skip
def test_span_varies_only_when_two_candidates_tally_differently(spans: list[list[int]], varies: bool) -> None:
    ranked = [result(f"q{i}", 10.0, s, {"a": 0.0}) for i, s in enumerate(spans)]
    assert spans_vary(ranked) is varies
    kinds = [p.kind for p in findings(ranked).plots]
    assert ("span_hist" in kinds) is varies


def test_no_span_plot_says_so_in_one_sentence() -> None:
    notes = findings([result("fifo", 10.0, [1, 1], {}), result("sjf", 12.0, [1, 1], {})]).notes
    assert notes == ("No job spans more than one leaf switch under any candidate, so there is no span plot.",)


def test_only_partitions_where_a_job_waited_are_plotted_and_the_rest_named() -> None:
    ranked = [result("fifo", 10.0, [1], {"dev": 30.5, "infer": 0.0, "train": 0.0}),
              result("sjf", 12.0, [1], {"dev": 3.0, "infer": 1.25, "train": 0.0})]  # fmt: skip
    assert queued_partitions(ranked) == ["dev", "infer"]
    found = findings(ranked)
    queue = next(p for p in found.plots if p.kind == "queue_by_partition")
    assert queue.finding == "Jobs wait longest in dev: on average 30.5 s under fifo/consolidate, 3.0 s under sjf/consolidate."
    assert any(n.startswith("No job waited in train under any candidate") for n in found.notes)


def test_no_queueing_plot_when_nothing_waits() -> None:
    found = findings([result("fifo", 10.0, [1], {"a": 0.0, "b": 0.0})])
    assert "queue_by_partition" not in [p.kind for p in found.plots]
    assert any("No job waited in a and b" in n for n in found.notes)


def test_captions_state_the_finding_not_the_title() -> None:
    ranked = [result("sjf", 422.046, [1], {}, util=0.424), result("fifo", 1831.889, [1], {}, util=0.338)]
    by_kind = {p.kind: p for p in findings(ranked).plots}
    assert by_kind["jct_cdf"].finding.startswith(
        "sjf/consolidate has the shortest average JCT, 422.0 s; fifo/consolidate the longest, 1,831.9 s (4.3× as long).")
    assert "highest under sjf/consolidate, 42.4 %, lowest under fifo/consolidate, 33.8 %" in by_kind["utilization"].finding
    for plot in by_kind.values():
        assert plot.finding != plot.title and plot.title not in plot.finding


def test_equal_utilisation_is_one_sentence() -> None:
    ranked = [result("sjf", 1.0, [1], {}, util=0.5), result("fifo", 2.0, [1], {}, util=0.5)]
    finding = next(p for p in findings(ranked).plots if p.kind == "utilization").finding
    assert finding == "GPU utilisation is 50.0 % under every candidate."
