"""Click options shared by the commands that replay a trace on a cluster (simulate, compare)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from gputwin.adapters.traces import FORMATS, TraceResult, read_trace
from gputwin.core.model import ClusterSpec

F = TypeVar("F", bound=Callable[..., Any])


def trace_and_cluster(func: F) -> F:
    """--trace, --format, --cluster, --gpus-per-node, --skip-invalid and --procs-per-gpu, as `simulate` has them."""
    options = (
        click.option("--trace", "trace_path", required=True, type=click.Path(path_type=Path),
                     help="Job history: sacct -P or --json output, a Helios/Philly CSV or raw cluster_log.csv, an "
                          "Alibaba pod list or PAI 2020 task table, an SWF log or a Philly cluster_job_log."),
        click.option("--format", "fmt", default="auto", show_default=True, type=click.Choice(("auto",) + FORMATS),
                     help="Trace format; auto sniffs it from the file."),
        click.option("--cluster", "cluster_path", required=True, type=click.Path(path_type=Path),
                     help="SwitchTopology + GPUPartition (+ SchedulingPolicy) YAML, a folder of them, "
                          "or a Helios VC table CSV (vc,num_nodes)."),
        click.option("--gpus-per-node", default=8, show_default=True, type=click.IntRange(1, 1024),
                     help="GPUs per node when --cluster is a VC table CSV."),
        click.option("--skip-invalid", is_flag=True,
                     help="Skip malformed trace records (counted) instead of stopping."),
        click.option("--procs-per-gpu", default=1, show_default=True, type=click.IntRange(1, 1 << 20),
                     help="SWF traces: processors that make one GPU (a job's GPUs are rounded up)."),
    )  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return func


def load_inputs(trace_path: Path, fmt: str, cluster_path: Path, gpus_per_node: int,
                skip_invalid: bool, procs_per_gpu: int = 1) -> tuple[ClusterSpec, TraceResult]:  # fmt: skip
    """The cluster, then the trace (a jobs-read count on a terminal while it loads, `output.trace_progress`);
    their errors (ClusterError, TraceError, OSError) propagate."""
    from gputwin.api.loader import load_cluster
    from gputwin.cli.progress import trace_progress

    cluster = load_cluster(cluster_path, gpus_per_node=gpus_per_node)
    with trace_progress(trace_path) as progress:
        trace = read_trace(trace_path, fmt, skip_invalid=skip_invalid, procs_per_gpu=procs_per_gpu, progress=progress)
    return cluster, trace
