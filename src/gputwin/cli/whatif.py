"""`gputwin whatif`: fork the present, replay the current policy and each proposed one on the same draws.

The present and the cluster come as for `gputwin forecast` (`--slurm`, `--kube` or `--snapshot
FILE`, `--cluster`, `--history`, `--estimator`: the same options, `gputwin.cli.forecast`); `--drain`, `--add-nodes PARTITION:COUNTxGPUS` and
`--submit TRACE` (jobs queued now, their trace durations as the users' estimates) change the fork
every candidate runs on (`gputwin.twin.whatif`). The candidates are the current policy and each
`--policy QUEUE[/PLACEMENT]`. Each is summarised as compare's `Summary` over the fork's pending
jobs, mean over the samples: a job not ended by the horizon counts as ending there (censored) and
not in `jobs`; GPU utilisation, overhead and preemptions are not measured here (0). The table and
`--json` are compare's, ranked by `gputwin.sim.evaluation.rank` (best average JCT first);
`--out DIR` writes compare's report folder (`gputwin.cli.compare.write_folder`, swapped in whole).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from gputwin.cli.forecast import Source, _estimator, replay_options, source_options, with_latency
from gputwin.errors import InputError


@click.command()
@source_options
@click.option("--policy", "policies", multiple=True, metavar="QUEUE[/PLACEMENT]",
              help="A proposed policy for every partition (repeatable), e.g. qssf or sjf/consolidate.")
@click.option("--drain", "drain", multiple=True, metavar="NODE", help="Take NODE out of service now (repeatable).")
@click.option("--add-nodes", "add_nodes", multiple=True, metavar="PARTITION:COUNTxGPUS",
              help="Add COUNT nodes of GPUS GPUs to PARTITION (repeatable), e.g. gpu:4x8.")
@click.option("--submit", "submit_path", type=click.Path(path_type=Path),
              help="A trace of jobs to queue now (their durations as the users' estimates).")
@replay_options
@click.option("--out", "out_dir", type=click.Path(path_type=Path),
              help="Also write compare's report folder here: summary.json, summary.csv, the plots, index.html "
                   "(swapped in whole; an existing folder of other files is refused).")
@click.option("--plots/--no-plots", default=True, show_default=True, help="With --out: the PNGs and index.html.")
@click.option("--report-format", "report_format", default="html", show_default=True,
              type=click.Choice(("html", "md", "both")), help="With --out: index.html, report.md or both.")
@click.option("--json", "as_json", is_flag=True, help="Print the ranked list as one JSON object on stdout.")
def whatif(source: Source, policies: tuple[str, ...], drain: tuple[str, ...], add_nodes: tuple[str, ...],
           submit_path: Path | None, history_path: Path | None, estimator_name: str, model_path: Path | None,
           horizon: float, samples: int, seed: int, start_latency: float | None, out_dir: Path | None, plots: bool,
           report_format: str, as_json: bool) -> None:  # fmt: skip
    """Compare the current policy with proposed ones (and drains, added nodes, submissions) from now on."""
    from gputwin.cli.output import ranked_table
    from gputwin.sim.compare import CandidateResult, comparison
    from gputwin.sim.run import with_overrides
    from gputwin.twin.whatif import AddNodes, Change, fork, outcomes

    if model_path is not None and estimator_name != "learned":
        raise click.UsageError("--model needs --estimator learned")
    if out_dir is not None:
        from gputwin.sim.atomic import COMPARE, check

        check(out_dir, COMPARE)  # a folder that cannot take the report is refused before any work
    adds = tuple(AddNodes.parse(spec) for spec in add_nodes)
    snap, cluster = source.read()
    snap = with_latency(snap, start_latency)
    candidates = _candidates(cluster, policies)
    change = Change(tuple(drain), adds, _submitted(submit_path, snap) if submit_path is not None else ())
    forked, forked_cluster = fork(snap, cluster, change)
    estimator = _estimator(estimator_name, history_path, model_path, forked, seed)
    began = time.perf_counter()
    # The current policy is the cluster as it is (partitions may differ); each proposal overrides all.
    clusters = [forked_cluster] + [with_overrides(forked_cluster, c) for c in candidates[1:]]
    runs = outcomes(clusters, forked, estimator, samples=samples, seed=seed, horizon=horizon)
    wall = (time.perf_counter() - began) / len(candidates)
    results = [CandidateResult(c, _summary(forked, run.samples, horizon, wall, c.name),
                               _jcts(forked, run.samples, horizon)) for c, run in zip(candidates, runs)]  # fmt: skip
    report = comparison(results)
    extra = {"snapshot": {"taken_at": snap.taken_at, "source": snap.source, "pending": len(forked.pending)},
             "changes": change.label(), "samples": samples, "seed": seed, "horizon_s": horizon}  # fmt: skip
    written = [] if out_dir is None else _write(out_dir, report, extra, source, plots, report_format)
    if as_json:
        click.echo(json.dumps({**extra, **report.to_json()}, sort_keys=True))
        return
    title = f"gputwin whatif — {len(forked.pending):,} pending jobs, changes: {change.label()}, {samples} samples"
    ranked_table(report.to_json()["candidates"], report.skipped, title)
    if written:
        click.echo("wrote " + ", ".join(str(p) for p in written))


def _write(out_dir: Path, report: Any, extra: dict[str, Any], source: Source, plots: bool, fmt: str) -> list[Path]:
    """compare's folder; its provenance names the snapshot file (and cluster) when the present came from one."""
    from datetime import datetime, timezone

    from gputwin.cli.compare import write_folder
    from gputwin.cli.version import command_line, core_flavour
    from gputwin.sim.provenance import provenance

    origin = None
    if source.snapshot_path is not None:
        origin = provenance(source.snapshot_path, source.cluster_path or source.snapshot_path, core_flavour(),
                            datetime.now(timezone.utc), command_line())  # fmt: skip
    return write_folder(out_dir, report, extra, origin, plots, fmt, workers=1)


def _candidates(cluster: Any, policies: tuple[str, ...]) -> list[Any]:
    """The current policy (named by the first partition's) first, then each proposed one not equal to it."""
    from gputwin.core.model import Candidate
    from gputwin.sim.compare import grid

    now = cluster.partitions[0].policy
    out = [Candidate(now.queue, now.placement, now.sizing, now.backfill)]
    for name in policies:
        queue, _, placement = name.partition("/")
        grid([queue], [placement or now.placement])  # unknown names: one line (RunError)
        candidate = Candidate(queue, placement or now.placement, now.sizing, now.backfill)
        if candidate not in out:
            out.append(candidate)
    return out


def _submitted(path: Path, snap: Any) -> tuple[Any, ...]:
    from gputwin.adapters.traces import read_trace
    from gputwin.twin.snapshot import PendingJob

    taken = {j.job_id for j in (*snap.running, *snap.pending)}
    jobs = []
    for job in read_trace(path).jobs:
        if job.job_id in taken:
            raise InputError(f"{path}: job {job.job_id}: job_id: already in the snapshot")
        taken.add(job.job_id)
        jobs.append(PendingJob(job.job_id, job.task_type, snap.taken_at, job.gpus, job.num_nodes, job.priority,
                               None, job.duration if job.duration > 0 else None, job.user, job.name))  # fmt: skip
    return tuple(jobs)


def _jcts(snap: Any, samples: tuple[Any, ...], horizon: float) -> list[float]:
    """The JCTs of the pending jobs ended by the horizon, over all samples: the report's CDF."""
    until = snap.taken_at + horizon
    return [end - job.submit for _, ends, _, _ in samples for job, end in zip(snap.pending, ends) if end <= until]


def _summary(snap: Any, samples: tuple[Any, ...], horizon: float, wall: float, label: str) -> Any:
    """Compare's `Summary` of one candidate: each metric the mean over samples (see the module)."""
    from gputwin.sim.evaluation import Summary
    from gputwin.sim.metrics import horizon_figures

    mean = horizon_figures(snap.taken_at, [j.submit for j in snap.pending], samples, horizon)

    def m(key: str) -> float:
        return mean.get(key, 0.0)

    return Summary(jobs=round(m("jobs")), avg_jct=m("avg_jct"), avg_queue=m("avg_queue"), p50_jct=m("p50_jct"),
                   p95_jct=m("p95_jct"), p99_jct=m("p99_jct"), p99_queue=m("p99_queue"), makespan=m("makespan"),
                   wall_seconds=round(wall, 3), policies={"all": label})  # fmt: skip
