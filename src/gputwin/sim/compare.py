"""Comparing policies on one trace: run a grid of candidates and rank them (`gputwin compare`).

Pure orchestration, no command line: `grid` builds the candidates (the product of the lists given,
minus the combinations that make no sense, which come back as skip notes), `run_candidate` runs one
through `gputwin.sim.run.run_summary` (where and in what order is a sweep executor's business:
`gputwin.adapters.sweeps`), `comparison` orders the results by average JCT, best first, ties
broken by name (`gputwin.sim.evaluation.rank`). `write_report` writes summary.json and summary.csv
(`gputwin compare` into a new folder it swaps in whole with the plots: `gputwin.sim.atomic`).

Candidates are `gputwin.core.model.Candidate`s, named by `policy_label` (as TraceReplay statuses); a
setting not given (None) keeps what the cluster file says and is left out of the name.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputwin.core.model import Candidate, ClusterSpec, JobSpec
from gputwin.core.plugins import known
from gputwin.core.policies import make_policy
from gputwin.sim.evaluation import TABLE_METRICS, TENANCY_METRICS, Summary, rank, table_metrics
from gputwin.sim.run import RunError, run_summary

OBJECTIVE = "avg_jct"  # what a comparison ranks by


@dataclass(frozen=True, slots=True)
class CandidateResult:
    """A candidate's summary (as `run` returns it) plus what the plots need from its outcome."""

    candidate: Candidate
    summary: Summary
    jcts: list[float] = field(default_factory=list)  # per finished job, completion order
    spans: list[int] = field(default_factory=list)  # leaf switches per finished job

    def score(self, objective: str) -> float:
        return self.summary.scores((objective,))[objective]

    @property
    def tiebreak(self) -> str:
        return self.candidate.name

    def row(self, rank: int) -> dict[str, Any]:
        """The JSON object for this candidate: settings, overall metrics, per-partition metrics (and
        with tenants Jain's index, fragmentation and per-tenant metrics)."""
        c, s = self.candidate, self.summary.to_json()
        return {
            "rank": rank, "candidate": c.name, "queue": c.queue, "placement": c.placement,
            "sizing": c.sizing, "backfill": c.backfill, **{k: s[k] for k in TABLE_METRICS},
            "p50_jct": s["p50_jct"], "p95_jct": s["p95_jct"], "makespan": s["makespan"],
            "wall_seconds": s["wall_seconds"], "rejected": s["rejected"], "policies": s["policies"],
            "partitions": s["partitions"], **self.summary.tenancy_row,
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class Comparison:
    ranked: tuple[CandidateResult, ...]
    skipped: tuple[str, ...]  # one note per combination left out

    @property
    def metrics(self) -> tuple[str, ...]:
        """The ranked table's columns (`evaluation.table_metrics`)."""
        return table_metrics(r.summary for r in self.ranked)

    def to_json(self) -> dict[str, Any]:
        return {
            "candidates": [r.row(i) for i, r in enumerate(self.ranked, start=1)],
            "skipped": list(self.skipped),
            "objective": OBJECTIVE,
        }


def grid(
    queues: Sequence[str],
    placements: Sequence[str],
    sizings: Sequence[str | None] = (None,),
    backfills: Sequence[bool | None] = (None,),
) -> tuple[list[Candidate], list[str]]:
    """The product of the lists in the order given, and notes for the combinations skipped.

    Unknown names raise RunError. Backfill only applies to non-preemptive queue policies, so
    backfill on with `srtf` or `las` is skipped (backfill off with them is their normal behaviour).
    """
    names = known()
    for kind, values in (("queue", queues), ("placement", placements), ("sizing", sizings)):
        allowed = names[kind]
        for value in values:
            if value is not None and value not in allowed:
                raise RunError(f"unknown {kind} policy {value!r}; known: {', '.join(allowed)}")
    for kind, values in (("queue", queues), ("placement", placements)):
        if not values:
            raise RunError(f"no {kind} policy given")
    candidates: list[Candidate] = []
    skipped: list[str] = []
    seen: set[Candidate] = set()
    for queue, placement, sizing, backfill in itertools.product(queues, placements, sizings, backfills):
        candidate = Candidate(queue, placement, sizing, backfill)
        if candidate in seen:
            continue
        seen.add(candidate)
        if backfill and make_policy(queue).preemptive:
            skipped.append(f"{candidate.name}: skipped, backfill does not apply to the preemptive {queue} policy")
            continue
        candidates.append(candidate)
    return candidates, skipped


def run_candidate(cluster: ClusterSpec, jobs: Sequence[JobSpec], candidate: Candidate, seed: int) -> CandidateResult:
    summary, outcome = run_summary(cluster, jobs, overrides=candidate, seed=seed)
    jcts = [j.end - j.spec.submit for j in outcome.finished if j.end is not None]
    spans = [job.leaves for job in outcome.finished]
    return CandidateResult(candidate, summary, jcts, spans)


def expected_cost(candidate: Candidate) -> int:
    """A rough rank of how long a candidate runs, for executors that order their tasks. Starting the
    slow ones first (preemptive policies re-rank running jobs every cycle, LAS also wakes on its
    thresholds, backfill scans the queue) keeps every worker busy to the end instead of one
    finishing a long run alone."""
    policy = make_policy(candidate.queue)
    return 4 * policy.preemptive + 2 * policy.timed + bool(candidate.backfill)


def comparison(results: Sequence[CandidateResult], skipped: Sequence[str] = ()) -> Comparison:
    """Best average JCT first (`evaluation.rank`); equal ones by name, so the order never depends on
    who finished first."""
    return Comparison(tuple(rank(results, OBJECTIVE)), tuple(skipped))


CSV_COLUMNS = ("rank", "candidate", "queue", "placement", "sizing", "backfill", "partition", *TABLE_METRICS)


def write_report(out_dir: Path, comparison: Comparison, extra: dict[str, Any] | None = None) -> list[Path]:
    """DIR/summary.json (the ranked list) and DIR/summary.csv (one row per candidate and partition,
    partition `all` first; with tenants the cluster-wide TENANCY_METRICS too, on the `all` row).
    Returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    data = {**(extra or {}), **comparison.to_json()}
    json_path, csv_path = out_dir / "summary.json", out_dir / "summary.csv"
    json_path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    with open(csv_path, "w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        tenancy = [k for k in comparison.metrics if k in TENANCY_METRICS]
        writer.writerow([*CSV_COLUMNS, *tenancy])
        for row in data["candidates"]:
            head = [row[k] for k in CSV_COLUMNS[:6]]
            head = ["" if v is None else v for v in head]
            wide = ["" if row[k] is None else row[k] for k in tenancy]
            writer.writerow([*head, "all", *(row[k] for k in TABLE_METRICS), *wide])
            for name, metrics in row["partitions"].items():
                writer.writerow([*head, name, *(metrics[k] for k in TABLE_METRICS), *([""] * len(tenancy))])
    return [json_path, csv_path]
