"""`gputwin demo`: the embedded default run, no cluster or download needed.

The bundled trace (`gputwin/data/demo-trace.csv`, 3,375 jobs) is an excerpt of the shared
Philly-shaped trace (first two hours of three virtual clusters, relabelled as task types train,
dev and infer); the bundled cluster is `gputwin/data/demo-cluster.yaml` (32 nodes x 8 GPUs, four
leaf switches). Each candidate applies one queue policy and placer to every partition.
"""

from __future__ import annotations

import json
from typing import Any

import click

from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.cli.output import comparison_table
from gputwin.core.model import Candidate
from gputwin.sim.compare import run_candidate
from gputwin.sim.evaluation import rank, table_row

CANDIDATES = (
    Candidate("fifo", "first-fit", backfill=False),
    Candidate("fifo", "consolidate", backfill=True),
    Candidate("sjf", "consolidate", backfill=False),
    Candidate("qssf", "topology-aware", backfill=True),
    Candidate("srtf", "consolidate", backfill=False),
    Candidate("las", "topology-aware", backfill=False),
)


def run_demo() -> list[dict[str, Any]]:
    """Every candidate on the embedded trace and cluster, best average JCT first (ties by name)."""
    cluster = load_cluster(demo_cluster_path())
    jobs = read_trace(demo_trace_path()).jobs
    results = rank((run_candidate(cluster, jobs, c, seed=0) for c in CANDIDATES), "avg_jct")
    return [table_row(r.candidate.name, r.summary) for r in results]


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as one JSON object.")
def demo(as_json: bool) -> None:
    """Run the embedded default: a bundled trace and cluster under several policies, compared."""
    rows = run_demo()
    if as_json:
        click.echo(json.dumps(rows, sort_keys=True))
    else:
        comparison_table(rows)
