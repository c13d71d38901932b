"""Tenancy metrics in a comparison (issue 16, item 3): Jain's index, fragmentation and the
per-tenant figures in the ranked rows, the CSV, the report's table and its tenants' plot, and as
objectives; a cluster without tenants gets exactly the columns and plots it always did."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import pytest

from gputwin.core.model import Candidate, QuotaSpec
from gputwin.sim.compare import comparison, run_candidate, write_report
from gputwin.sim.evaluation import OBJECTIVES, TABLE_METRICS, Summary, TenantMetrics, rank
from gputwin.sim.findings import findings
from gputwin.sim.reportpage import markdown

QUOTAS = (QuotaSpec("a", 4, ("a",), cohort="c"), QuotaSpec("b", 4, ("b",), cohort="c"))
# a floods the cluster with 2-GPU jobs; b arrives later: fifo serves a's backlog first, sjf b's short ones
JOBS = [*((f"a{i}", 0, 3600, 2, {"user": "a"}) for i in range(6)), ("b1", 100, 60, 4, {"user": "b"}),
        ("b2", 100, 60, 3, {"user": "b"})]  # fmt: skip


def _compare(sim_cluster, sim_jobs, quotas):
    base = sim_cluster({"l0": [4, 4]})
    cluster = dataclasses.replace(base, partitions=(dataclasses.replace(base.partitions[0], quotas=quotas),))
    jobs = sim_jobs(JOBS)
    return comparison([run_candidate(cluster, jobs, Candidate(q, "consolidate"), 0) for q in ("fifo", "sjf")])


@pytest.fixture()
def tenants(sim_cluster, sim_jobs):
    return _compare(sim_cluster, sim_jobs, QUOTAS)


@pytest.fixture()
def plain(sim_cluster, sim_jobs):
    return _compare(sim_cluster, sim_jobs, ())


def test_rows_with_tenants_carry_jain_fragmentation_and_tenants(tenants) -> None:
    row = tenants.to_json()["candidates"][0]
    assert tenants.metrics == (*TABLE_METRICS, "jain", "fragmented_gpus")
    assert set(row["tenants"]) == {"a", "b"} and 0 < row["jain"] <= 1 and row["fragmented_gpus"] >= 0
    assert row["tenants"]["b"]["guaranteed_gpus"] == 4


def test_rows_without_tenants_are_as_before(plain) -> None:
    row = plain.to_json()["candidates"][0]
    assert plain.metrics == TABLE_METRICS
    assert not {"jain", "fragmented_gpus", "tenants"} & set(row)


@pytest.mark.parametrize("which,extra", [("tenants", ["jain", "fragmented_gpus"]), ("plain", [])],
                         ids=["tenants", "no-tenants"])  # fmt: skip
def test_csv_columns(request, tmp_path: Path, which: str, extra: list[str]) -> None:
    result = request.getfixturevalue(which)
    write_report(tmp_path, result)
    rows = list(csv.DictReader((tmp_path / "summary.csv").open()))
    assert list(rows[0])[-len(TABLE_METRICS) - len(extra):] == [*TABLE_METRICS, *extra]
    if extra:  # cluster-wide: on the `all` row only
        assert rows[0]["partition"] == "all" and float(rows[0]["jain"]) > 0 and rows[1]["jain"] == ""


def test_the_report_has_the_columns_and_the_tenants_plot_only_with_tenants(tenants, plain) -> None:
    with_t, without = findings(tenants.ranked), findings(plain.ranked)
    assert "tenant_quota" in [p.kind for p in with_t.plots]
    assert "tenant_quota" not in [p.kind for p in without.plots]
    assert [n for n in without.notes if "tenant" in n.lower()] == []
    assert "Jain's index" in next(p.finding for p in with_t.plots if p.kind == "tenant_quota")
    assert "| Jain | fragmented GPUs |" in markdown(tenants, with_t, {}, None)
    assert "Jain" not in markdown(plain, without, {}, None)


def _summary(jain: float | None, frag: float | None, tenants: bool = True) -> Summary:
    return Summary(jain=jain, fragmented_gpus=frag, tenants={"a": TenantMetrics()} if tenants else {})


SCORES = [
    ("measured", _summary(0.9, 2.5), {"jain": 0.9, "fragmented_gpus": 2.5}),
    ("one-gpu-trace-fragments-nothing", _summary(0.9, None), {"jain": 0.9, "fragmented_gpus": 0.0}),
    ("nothing-used-is-the-worst-jain", _summary(None, 1.0), {"jain": 0.0, "fragmented_gpus": 1.0}),
]


@pytest.mark.parametrize("summary,expected", [c[1:] for c in SCORES], ids=[c[0] for c in SCORES])
def test_tenancy_scores(summary: Summary, expected: dict[str, float]) -> None:
    assert {k: summary.scores()[k] for k in expected} == expected


def test_scores_without_tenants_are_the_metrics_of_old() -> None:
    assert "jain" not in _summary(None, 3.0, tenants=False).scores()


@pytest.mark.parametrize("objective,best", [("jain", "fair"), ("fragmented_gpus", "tidy")], ids=["jain", "frag"])
def test_tenancy_objectives_rank_in_their_direction(objective: str, best: str) -> None:
    class Result:
        def __init__(self, name: str, summary: Summary) -> None:
            self.tiebreak, self.summary = name, summary

        def score(self, key: str) -> float:
            return self.summary.scores((key,))[key]

    results = [Result("fair", _summary(1.0, 9.0)), Result("tidy", _summary(0.5, 0.1))]
    assert objective in OBJECTIVES
    assert rank(results, objective)[0].tiebreak == best
