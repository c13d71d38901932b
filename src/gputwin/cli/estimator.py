"""`gputwin estimator`: measure run-time estimators on a trace (evaluate) and train one for live use.

`evaluate` replays the trace once per estimator (history, learned, oracle) with QSSF on every
partition and prints each one's errors and the average JCT QSSF reaches with it
(`gputwin.sim.estimates`); `train` fits the learned model on a whole history and writes it with
its metadata (`gputwin.estimators.model`). Both load numpy and LightGBM, so neither is on the
simulate path.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import click

from gputwin.adapters.traces import FORMATS, read_trace

# LearnedConfig.min_train's default, repeated here so --help needs no import of the estimators.
LEARNED_MIN_TRAIN = 1000

TRACE = click.option("--trace", "trace_path", required=True, type=click.Path(path_type=Path),
                     help="Job history: any format `gputwin simulate` reads (sacct included).")  # fmt: skip
FORMAT = click.option("--format", "fmt", default="auto", show_default=True, type=click.Choice(("auto",) + FORMATS),
                      help="Trace format; auto sniffs it from the file.")  # fmt: skip
SKIP = click.option(
    "--skip-invalid", is_flag=True, help="Skip malformed trace records (counted) instead of stopping."
)


@click.group()
def estimator() -> None:
    """Measure run-time estimators on a trace, or train the learned one for live use."""


@estimator.command()
@TRACE
@FORMAT
@click.option(
    "--cluster",
    "cluster_path",
    type=click.Path(path_type=Path),
    help="Cluster to replay on (as for simulate); default: the embedded demo cluster.",
)
@click.option(
    "--gpus-per-node",
    default=8,
    show_default=True,
    type=click.IntRange(1, 1024),
    help="GPUs per node when --cluster is a VC table CSV.",
)
@SKIP
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the model and the placers.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the figures as one JSON object on the last line."
)
def evaluate(trace_path: Path, fmt: str, cluster_path: Path | None, gpus_per_node: int, skip_invalid: bool,
             seed: int, as_json: bool) -> None:  # fmt: skip
    """Replay a trace under QSSF once per estimator (history, learned, oracle) and compare their errors."""
    from gputwin.api.loader import load_cluster
    from gputwin.api.resources import demo_cluster_path
    from gputwin.sim.estimates import evaluate as run_all

    cluster = load_cluster(cluster_path or demo_cluster_path(), gpus_per_node=gpus_per_node)
    trace = read_trace(trace_path, fmt, skip_invalid=skip_invalid)
    scores = run_all(cluster, trace.jobs, seed=seed, origin=trace.origin)
    jobs = scores["history"].jobs
    if as_json:
        click.echo(json.dumps({"jobs": jobs, "estimators": {n: s.to_json(n) for n, s in scores.items()}}))
        return
    click.echo(f"{jobs} finished jobs of {len(trace.jobs)}, QSSF on every partition")
    click.echo(f"{'estimator':<10}{'MAE s':>10}{'median APE':>12}{'Spearman':>10}{'p10-p90':>9}{'QSSF JCT s':>12}"
               f"{'wall s':>8}")  # fmt: skip
    for name, s in scores.items():
        errors = (
            ("", "", "") if name == "oracle" else (f"{s.mae_s:.1f}", f"{s.median_ape:.3f}", _num(s.spearman))
        )
        click.echo(f"{name:<10}{errors[0]:>10}{errors[1]:>12}{errors[2]:>10}{_pct(s.coverage):>9}"
                   f"{s.qssf_avg_jct:>12.1f}{s.wall_s:>8.2f}")  # fmt: skip


def _num(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.3f}"


def _pct(value: float) -> str:
    return "" if math.isnan(value) else f"{100 * value:.1f}%"


@estimator.command()
@TRACE
@FORMAT
@SKIP
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Folder to write model.txt (LightGBM) and model.json (features, window, metrics) into.",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the model.")
@click.option("--min-train", default=LEARNED_MIN_TRAIN, show_default=True, type=click.IntRange(20, 10**9),
              help="Jobs the model needs before it predicts; training needs twice as many "
                   "(lower it for a small site's history).")  # fmt: skip
def train(trace_path: Path, fmt: str, skip_invalid: bool, out_dir: Path, seed: int, min_train: int) -> None:
    """Fit the learned estimator on a whole job history and write it with its metadata, atomically."""
    from gputwin.estimators.model import META, MODEL, TrainError, save
    from gputwin.estimators.model import train as fit_model
    from gputwin.estimators.online import LearnedConfig
    from gputwin.sim.atomic import Layout, atomic_folder, check

    layout = Layout("estimator train", (MODEL, META))
    check(out_dir, layout)  # refused before the work, not after
    trace = read_trace(trace_path, fmt, skip_invalid=skip_invalid)
    try:
        trained = fit_model(trace.jobs, LearnedConfig(seed=seed, min_train=min_train), origin=trace.origin)
    except TrainError as exc:
        raise TrainError(f"{trace_path}: {exc}") from None
    trained.metadata["trace"] = {
        "path": str(trace_path),
        "format": trace.format,
        "skipped": dict(trace.skipped),
    }
    with atomic_folder(out_dir, layout) as folder:
        save(trained, folder)
    hold = trained.metadata["holdout"]
    click.echo(f"trained on {len(trace.jobs)} jobs; last {hold['jobs']} held out: "
               f"MAE {hold['mae_s']:.1f} s, median APE {hold['median_ape']:.3f}, Spearman {hold['spearman']:.3f}; "
               f"wrote {out_dir}/{MODEL} and {META}")  # fmt: skip
