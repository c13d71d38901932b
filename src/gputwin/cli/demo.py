"""`gputwin demo`: the embedded default run, no cluster or download needed.

The bundled trace (`gputwin/data/demo-trace.csv`, 3,375 jobs) is an excerpt of the shared
Philly-shaped trace (first two hours of three virtual clusters, relabelled as task types train,
dev and infer); the bundled cluster is `gputwin/data/demo-cluster.yaml` (32 nodes x 8 GPUs, four
leaf switches). Each candidate applies one queue policy and placer to every partition.
"""

from __future__ import annotations

from typing import Any

from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.core.model import policy_label
from gputwin.sim.run import Overrides, run

CANDIDATES = (
    ("fifo", "first-fit", False),
    ("fifo", "consolidate", True),
    ("sjf", "consolidate", False),
    ("qssf", "topology-aware", True),
    ("srtf", "consolidate", False),
    ("las", "topology-aware", False),
)

METRICS = ("jobs", "avg_jct", "p99_jct", "avg_queue", "p99_queue", "gpu_utilization", "avg_overhead", "preemptions")


def run_demo() -> list[dict[str, Any]]:
    """Every candidate on the embedded trace and cluster, best average JCT first."""
    cluster = load_cluster(demo_cluster_path())
    jobs = read_trace(demo_trace_path()).jobs
    rows = []
    for queue, placement, backfill in CANDIDATES:
        summary, _ = run(cluster, jobs, overrides=Overrides(queue=queue, placement=placement, backfill=backfill))
        label = policy_label(queue, placement, backfill=backfill)
        rows.append({"candidate": label, **{k: summary[k] for k in METRICS}})
    return sorted(rows, key=lambda r: (r["avg_jct"], r["candidate"]))
