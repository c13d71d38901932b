"""`gputwin forecast`: when each pending job starts and ends, and when each queue drains.

The present comes from the live SLURM cluster (`--slurm`, `gputwin.adapters.slurm.snapshot`), the
live Kubernetes cluster the operator schedules (`--kube`, `gputwin.adapters.kube.snapshot`: its
declared SwitchTopology, GPUPartitions and SchedulingPolicies are the cluster, unless `--cluster`),
or from a snapshot file (`--snapshot FILE`, written by `--save FILE`); the cluster is the one the
snapshot implies (its nodes and partitions, SLURM's priority order with backfill) unless
`--cluster FILE` declares one. Unknown run times are drawn around the estimator's point
(`gputwin.twin.sampling`; `--history TRACE` teaches the estimator first; `--estimator learned`
draws from the LightGBM model's p10/p50/p90, trained on the history or loaded with `--model DIR`,
`gputwin.twin.learned`), `--samples`
replays are summarised at p50/p90 (`gputwin.twin.forecast`). Times print relative to the
snapshot; `--json` prints one object with both relative seconds and the snapshot's clock.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable

import click

from gputwin.cli.params import FiniteRange
from gputwin.errors import InputError

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)", re.ASCII)
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def horizon_seconds(ctx: click.Context, param: click.Parameter, value: str) -> float:
    """`--horizon` in seconds: a number with an optional unit s, m, h or d."""
    match = _DURATION.fullmatch(str(value).strip())
    seconds = float(match[1]) * _UNITS[match[2]] if match else 0.0
    if not 0 < seconds <= 366 * 86400:
        raise click.BadParameter(f"{str(value)[:40]!r}: want a duration up to 366d, e.g. 3600, 90m, 12h or 7d")
    return seconds


REPLAY_OPTIONS = (
    click.option("--history", "history_path", type=click.Path(path_type=Path),
                 help="A trace of finished jobs the run-time estimator learns from first."),
    click.option("--estimator", "estimator_name", type=click.Choice(("history", "learned")), default="history",
                 show_default=True, help="Run times: the history's running mean, or the learned model's p10/p50/p90."),
    click.option("--model", "model_path", type=click.Path(path_type=Path),
                 help="With --estimator learned: a model saved by `gputwin estimator train --out DIR`."),
    click.option("--horizon", default="7d", show_default=True, callback=horizon_seconds,
                 help="How far ahead to replay (seconds, or with a unit: 90m, 12h, 7d)."),
    click.option("--samples", default=32, show_default=True, type=click.IntRange(1, 4096), help="Seeded replays."),
    click.option("--seed", default=0, show_default=True, type=int, help="Seed of the run-time draws."),
    click.option("--start-latency", "start_latency", type=FiniteRange(0, 3600), metavar="SECONDS",
                 help="The live scheduler's delay from the event that makes room to a job's start, as measured "
                      "(benchmarks/sim_to_real.py prints it) [default: the snapshot's; --kube: "
                      "GPUTWIN_FORECAST_START_LATENCY, else 0]."),
)  # fmt: skip


SOURCE_OPTIONS = (
    click.option("--slurm", "from_slurm", is_flag=True, help="Snapshot the live SLURM cluster (SLURM_CONF selects it)."),
    click.option("--kube", "from_kube", is_flag=True, help="Snapshot the Kubernetes cluster the operator schedules."),
    click.option("--kubeconfig", type=click.Path(path_type=Path),
                 help="With --kube: the kubeconfig (default $KUBECONFIG)."),
    click.option("--context", help="With --kube: the kubeconfig context (default: its current one)."),
    click.option("--namespace", help="With --kube: GPUJobs of this namespace only (default: all)."),
    click.option("--snapshot", "snapshot_path", type=click.Path(path_type=Path),
                 help="Start from a saved snapshot file (`gputwin forecast --save FILE`)."),
    click.option("--cluster", "cluster_path", type=click.Path(path_type=Path),
                 help="Declared cluster (YAML); default: the snapshot's nodes and partitions, priority+backfill "
                      "(with --kube: the declared SwitchTopology, GPUPartitions and SchedulingPolicies)."),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Source:
    """Where the present comes from: exactly one of `--slurm`, `--kube` and `--snapshot FILE`."""

    from_slurm: bool
    from_kube: bool
    kubeconfig: Path | None
    context: str | None
    namespace: str | None
    snapshot_path: Path | None
    cluster_path: Path | None

    def check(self) -> None:
        """Usage errors, before anything is read."""
        if self.from_slurm + self.from_kube + (self.snapshot_path is not None) != 1:
            raise click.UsageError("give exactly one of --slurm, --kube and --snapshot FILE")
        if not self.from_kube and (self.kubeconfig or self.context or self.namespace):
            raise click.UsageError("--kubeconfig, --context and --namespace need --kube")

    def read(self) -> tuple[Any, Any]:
        """The snapshot and the cluster it runs on."""
        if self.from_kube:
            declared, snap = _kube_snapshot(self.kubeconfig, self.context, self.namespace)
            return snap, declared if self.cluster_path is None else _cluster(snap, self.cluster_path)
        snap = _snapshot(self.from_slurm, self.snapshot_path)
        return snap, _cluster(snap, self.cluster_path)


def source_options(command: Callable[..., None]) -> Callable[..., None]:
    """The present's options of `forecast` and `whatif` (SOURCE_OPTIONS), handed to `command` as one
    checked `source: Source`."""
    names = [field.name for field in fields(Source)]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> None:
        source = Source(**{name: kwargs.pop(name) for name in names})
        source.check()
        command(source=source, **kwargs)

    decorated: Callable[..., None] = wrapper
    for option in reversed(SOURCE_OPTIONS):
        decorated = option(decorated)
    return decorated


def replay_options(command: Callable[..., None]) -> Callable[..., None]:
    """How `forecast` and `whatif` replay a snapshot: the estimator, its history or model, the
    horizon, the samples and their seed (the same options, in the same order, on both)."""
    for option in reversed(REPLAY_OPTIONS):
        command = option(command)
    return command


@click.command()
@source_options
@replay_options
@click.option("--workers", type=click.IntRange(1, 64), help="Processes (default: 2 for large forecasts, else 1).")
@click.option("--save", "save_path", type=click.Path(path_type=Path), help="Also write the snapshot to this file.")
@click.option("--json", "as_json", is_flag=True, help="Print the forecast as one JSON object on stdout.")
def forecast(source: Source, history_path: Path | None, estimator_name: str, model_path: Path | None, horizon: float,
             samples: int, seed: int, start_latency: float | None, workers: int | None, save_path: Path | None,
             as_json: bool) -> None:  # fmt: skip
    """Forecast when each pending job starts (p50/p90) and ends, and when each partition's queue drains."""
    from gputwin.twin.forecast import forecast as run_forecast
    from gputwin.twin.snapfile import save_snapshot

    if model_path is not None and estimator_name != "learned":
        raise click.UsageError("--model needs --estimator learned")
    snap, cluster = source.read()
    snap = with_latency(snap, start_latency)
    estimator = _estimator(estimator_name, history_path, model_path, snap, seed)
    if save_path is not None:
        save_snapshot(snap, save_path)
    result = run_forecast(cluster, snap, estimator, samples=samples, seed=seed, horizon=horizon, workers=workers)
    document = as_document(result)
    if as_json:
        click.echo(json.dumps(document, sort_keys=True))
    else:
        _print(document)


def with_latency(snap: Any, seconds: float | None) -> Any:
    """`snap` with `--start-latency` when given (else its own, 0 unless a saved file says)."""
    import dataclasses

    return snap if seconds is None else dataclasses.replace(snap, start_latency_s=seconds)


def _snapshot(from_slurm: bool, path: Path | None) -> Any:
    if from_slurm:
        from gputwin.adapters.slurm.snapshot import slurm_snapshot

        return slurm_snapshot()
    from gputwin.twin.snapfile import load_snapshot

    assert path is not None
    return load_snapshot(path)


def _kube_snapshot(kubeconfig: Path | None, context: str | None, namespace: str | None) -> tuple[Any, Any]:
    """The declared cluster and its snapshot, from the API server of `kubeconfig`'s `context`."""
    import os

    from gputwin.adapters.kube.backend import TOLERATED
    from gputwin.adapters.kube.connect import api_errors, kubeconfig_client
    from gputwin.adapters.kube.snapshot import read_snapshot

    # The taints the operator's pods tolerate, as the operator reads them (`KubernetesBackend.from_env`).
    keys = os.environ.get("GPUTWIN_TOLERATED_TAINTS", ",".join(TOLERATED)).split(",")
    tolerated = [k.strip() for k in keys if k.strip()]
    latency = _operator_latency()  # a bad setting is refused before any connection
    with kubeconfig_client(kubeconfig, context) as api, api_errors(api):
        return read_snapshot(api, namespace, tolerated, start_latency_s=latency)


def _operator_latency() -> float:
    """The start latency the operator's forecasts model (`GPUTWIN_FORECAST_START_LATENCY`, as it reads it)."""
    from gputwin.operator.config import ConfigError, forecast_start_latency

    try:
        return forecast_start_latency()
    except ConfigError as exc:
        raise InputError(str(exc)) from None


def _cluster(snap: Any, path: Path | None) -> Any:
    from gputwin.twin.seed import default_cluster

    if path is None:
        return default_cluster(snap)
    from gputwin.api.loader import load_cluster

    cluster = load_cluster(path)
    names = {p.name for p in cluster.partitions}
    missing = sorted({job.partition for job in snap.pending} - names)
    if missing and not any(not p.task_types for p in cluster.partitions):
        raise InputError(f"{path}: partitions: no partition named {missing[0]!r}, which jobs of the snapshot "
                         "wait in")  # fmt: skip
    return cluster


def _estimator(name: str, history: Path | None, model: Path | None, snap: Any, seed: int) -> Any:
    """The run-time estimator `name`, taught the finished jobs of `history` first (if given)."""
    trace = None
    if history is not None:
        from gputwin.adapters.traces import read_trace

        trace = read_trace(history)
    if name == "learned":
        from gputwin.twin.learned import learned_intervals

        if trace is None and model is None:
            raise click.UsageError("--estimator learned needs --history TRACE or --model DIR")
        jobs, origin = (trace.jobs, trace.origin) if trace is not None else ((), 0.0)
        try:
            return learned_intervals(snap, jobs, origin, model, seed)
        except InputError as exc:
            raise InputError(f"{history}: {exc}" if model is None else str(exc)) from None
    from gputwin.core.history import HistoryEstimator

    estimator = HistoryEstimator()
    for job in trace.jobs if trace is not None else ():
        if job.state == "COMPLETED" and job.duration > 0:
            estimator.observe(job, job.duration)
    return estimator


def as_document(result: Any) -> dict[str, Any]:
    """The forecast as its --json object: seconds after the snapshot (`*_s`) and the clock (`*_at`)."""
    t0 = result.taken_at

    def rel(value: float | None) -> float | None:
        return None if value is None else round(value - t0, 3)

    jobs = [{"job_id": j.job_id, "partition": j.partition, "gpus": j.gpus,
             "start_p50_s": rel(j.start_p50), "start_p90_s": rel(j.start_p90),
             "end_p50_s": rel(j.end_p50), "end_p90_s": rel(j.end_p90),
             "start_p50_at": j.start_p50, "start_p90_at": j.start_p90,
             "started_share": j.started, "rejected": j.rejected} for j in result.jobs]  # fmt: skip
    parts = [{"partition": p.partition, "pending": p.pending, "drain_p50_s": p.drain_p50,
              "drain_p90_s": p.drain_p90} for p in result.partitions]  # fmt: skip
    return {"taken_at": t0, "horizon_s": result.horizon, "samples": result.samples, "seed": result.seed,
            "workers": result.workers, "wall_s": round(result.wall_seconds, 3), "jobs": jobs,
            "partitions": parts, "left_out": [list(x) for x in result.left_out]}  # fmt: skip


def _span(seconds: float | None) -> str:
    if seconds is None:
        return "> horizon"
    minutes, sec = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{sec:02d}s" if hours else f"{minutes}m{sec:02d}s"


def _print(doc: dict[str, Any]) -> None:
    click.echo(f"forecast: {len(doc['jobs'])} pending jobs, {doc['samples']} samples, "
               f"horizon {_span(doc['horizon_s'])}, {doc['wall_s']:.2f} s")  # fmt: skip
    click.echo(f"{'JOB':<16} {'PARTITION':<12} {'GPUS':>4}  {'START p50':>10} {'START p90':>10} {'END p50':>10}")
    for j in doc["jobs"]:
        note = f"  rejected: {j['rejected']}" if j["rejected"] else ""
        click.echo(f"{j['job_id']:<16} {j['partition']:<12} {j['gpus']:>4}  {_span(j['start_p50_s']):>10} "
                   f"{_span(j['start_p90_s']):>10} {_span(j['end_p50_s']):>10}{note}")  # fmt: skip
    for p in doc["partitions"]:
        click.echo(f"partition {p['partition']}: {p['pending']} pending, drains in {_span(p['drain_p50_s'])} (p50), "
                   f"{_span(p['drain_p90_s'])} (p90)")  # fmt: skip
    for job_id, why in doc["left_out"]:
        click.echo(f"warning: running job {job_id} not held by the twin: {why}", err=True)
