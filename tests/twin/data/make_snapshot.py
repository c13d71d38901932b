"""Makes philly-mix1-2vc.snapshot.json, the golden forecast's input (run from the repository root).

The excerpt: the jobs of the two busiest small VCs of ../shared/traces/philly_mix1/jobs.csv
(ed69ec and 103959, 8 nodes x 8 GPUs each, as in its cluster.csv), replayed under the VC table's
default policy (fifo, first-fit) and snapshotted at t = 10,000 s, when both queue: the running
jobs on their GPUs since their start, the queued ones in queue order (`gputwin.twin.replayed`).

    python tests/twin/data/make_snapshot.py
"""

from __future__ import annotations

from pathlib import Path

from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.twin.replayed import snapshot_at
from gputwin.twin.snapfile import save_snapshot

HERE = Path(__file__).resolve().parent
TRACES = HERE.parents[2].parent / "shared" / "traces" / "philly_mix1"
VCS = ("ed69ec", "103959")
AT = 10_000.0


def excerpt() -> tuple[object, list[object]]:
    cluster = load_cluster(HERE / "philly-mix1-2vc.csv")
    jobs = [j for j in read_trace(TRACES / "jobs.csv").jobs if j.task_type in VCS]
    return cluster, jobs


if __name__ == "__main__":
    cluster, jobs = excerpt()
    save_snapshot(snapshot_at(cluster, jobs, AT), HERE / "philly-mix1-2vc.snapshot.json")  # type: ignore[arg-type]
