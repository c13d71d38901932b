"""`gputwin demo`: the embedded default run, no cluster or download needed.

The bundled trace (`gputwin/data/demo-trace.csv`, 3,375 jobs) is an excerpt of the shared
Philly-shaped trace (first two hours of three virtual clusters, relabelled as task types train,
dev and infer); the bundled cluster is `gputwin/data/demo-cluster.yaml` (32 nodes x 8 GPUs, four
leaf switches). Each candidate applies one queue policy and placer to every partition.

`--json` prints what `gputwin compare --json` prints (`Comparison.to_json()` plus the trace and
seed), so one parser reads both.
"""

from __future__ import annotations

import json
from typing import Any

import click

from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.cli.output import comparison_table
from gputwin.cli.progress import sweep_progress
from gputwin.core.model import Candidate
from gputwin.sim.compare import Comparison, comparison, run_candidate

CANDIDATES = (
    Candidate("fifo", "first-fit", backfill=False),
    Candidate("fifo", "consolidate", backfill=True),
    Candidate("sjf", "consolidate", backfill=False),
    Candidate("qssf", "topology-aware", backfill=True),
    Candidate("srtf", "consolidate", backfill=False),
    Candidate("las", "topology-aware", backfill=False),
)
SEED = 0


def run_demo(progress: bool = False) -> tuple[Comparison, dict[str, Any]]:
    """Every candidate on the embedded trace and cluster, best average JCT first (ties by name), and
    what compare's JSON says beside the ranking (the trace, the seed, the executor)."""
    cluster = load_cluster(demo_cluster_path())
    trace = read_trace(demo_trace_path())
    results = []
    with sweep_progress(len(CANDIDATES), enabled=progress) as advance:
        for candidate in CANDIDATES:
            results.append(run_candidate(cluster, trace.jobs, candidate, seed=SEED))
            if advance is not None:
                advance(candidate.name)
    extra = {"trace": {"path": str(demo_trace_path()), "format": trace.format, "jobs": len(trace.jobs),
                       "skipped": dict(trace.skipped)}, "seed": SEED, "executor": "local"}  # fmt: skip
    return comparison(results), extra


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the ranking as `gputwin compare --json` does.")
def demo(as_json: bool) -> None:
    """Run the embedded default: a bundled trace and cluster under several policies, compared."""
    report, extra = run_demo(progress=not as_json)
    if as_json:
        click.echo(json.dumps({**extra, **report.to_json()}, sort_keys=True))
        return
    comparison_table(report.to_json()["candidates"])
