"""How good and how costly the learned run-time estimator is, next to the history's running mean.

Three parts (issue 14):

* **accuracy** - `gputwin estimator evaluate` in-process on the shared traces: the Philly-shaped
  ../shared/traces/philly_mix1 on its own 11-partition cluster, and the Alibaba pod list
  ../shared/traces/alibaba_openb on one 32-GPU partition (4 x 8-GPU nodes, a VC table written to a
  temporary folder: the pods keep ~16.6 GPUs busy on average, so QSSF has queues to order; the
  embedded 64-GPU demo cluster never queues them); and the SLURM test cluster's own sacct history
  (tests/estimators/data/sacct-testcluster-learn.txt, 360 jobs, see its README) on its 16 x 8-GPU
  `batch` partition, with the learned estimator's small-site settings (SMALL_SITE: the defaults
  fit no model within 360 jobs submitted in 31 s) and, beside it, the holdout figures of the model
  `gputwin estimator train --min-train 100` fits on the whole history. Per estimator: MAE, median
  APE, Spearman, p10-p90 coverage, QSSF average JCT.
* **overhead** - the QSSF replay of philly_mix1 with `history` and with `learned` (`--repeat`
  times each, alternated, fastest kept; process CPU time, since other work on a shared host
  stretches wall time; numpy and LightGBM imported before timing): what prediction and online
  retraining add to the simulation.
* **training** - one fit of the model on `--train-rows` rows (the Philly features repeated), one
  core; batch prediction of 100k rows and single-row prediction. With `--peer`, scikit-learn's
  HistGradientBoostingRegressor fits the same rows (same rounds and leaves) beside it, if installed.
* **instructions** (`--instructions`, instead of the rest) - the same overhead counted by callgrind,
  a figure the machine's load does not move: one QSSF replay of philly_mix1 (or its first `--jobs`)
  with `history` and one with `learned`, each minus a run that only loads the trace and the cluster
  and imports numpy and LightGBM (as `instructions.py` counts a replay; valgrind runs ~50x slower).

`--digest` (instead of the rest) prints a sha256 over every learned prediction (time, point, p10,
p90, median, in trace order) of one QSSF replay of each shared trace, with the fits made: a change
meant to leave the predictions as they are must leave these as they are (floats differ under
valgrind, whose CPU lacks some of the host's vector instructions: compare runs of one kind).

`--tie-noise N` (instead of the rest) replays QSSF N times per shared trace with `history` and with
`learned`: the plain replay, then N - 1 with each prediction times exp(0.01 z), z a standard normal
seeded by sha256 of (seed, job id): it only breaks ties and near-ties, and moves the average JCT by
far more than the issue's margins on the Alibaba trace (its mean, min and max are printed).

`--config JSON` (LearnedConfig fields, e.g. '{"max_rows": 3000, "rounds": 20}') builds the learned
estimator on the two shared traces with them, in the accuracy part and in `--instructions`: a
setting's cost and accuracy, measured the same way as the default's.

Prints the load average before and after; `--json` prints one JSON object as the last line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT / ".." / "shared" / "traces"
SACCT = ROOT / "tests" / "estimators" / "data" / "sacct-testcluster-learn.txt"
# The learned estimator on a 360-job history: a first fit after 100 finished jobs, a refit every
# 50, batches of 1 s (the history's submits span 31 s; the default 60 s batch predicts them all at 0).
SMALL_SITE = {"sacct_testcluster": {"min_train": 100, "retrain_jobs": 50, "window": 1.0}}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks/estimator.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=SHARED, help="the shared traces folder")
    parser.add_argument(
        "--repeat", type=int, default=3, help="replays per estimator for the overhead (default 3)"
    )
    parser.add_argument("--train-rows", type=int, default=1_000_000, help="rows of the training timing")
    parser.add_argument("--peer", action="store_true", help="also time scikit-learn's HistGradientBoosting")
    parser.add_argument("--skip-accuracy", action="store_true", help="only the overhead and training timings")
    parser.add_argument("--instructions", action="store_true",
                        help="only the overhead, in callgrind instructions (needs valgrind)")
    parser.add_argument("--jobs", type=int, default=0, help="with --instructions: the trace's first N jobs (0: all)")
    parser.add_argument("--digest", action="store_true", help="only the sha256 of every learned prediction")
    parser.add_argument("--tie-noise", type=int, default=0, metavar="N",
                        help="only the QSSF JCT of N replays with tie noise (the first plain)")
    parser.add_argument("--config", type=json.loads, default=None, metavar="JSON",
                        help="LearnedConfig fields of the learned estimator on the shared traces")
    parser.add_argument("--json", action="store_true", help="one JSON object as the last line")
    return parser.parse_args(argv)


def inputs(traces: Path, folder: Path) -> dict[str, tuple[Any, Any]]:
    from gputwin.adapters.traces import read_trace

    from gputwin.api.loader import load_cluster

    vc, testcluster = folder / "alibaba-32gpu.csv", folder / "testcluster-16x8.csv"
    vc.write_text("vc,num_nodes\ndefault,4\n")
    testcluster.write_text("vc,num_nodes\nbatch,16\n")  # scripts/slurm/start.sh's gpu[01-16], 8 GPUs each
    return {
        "philly_mix1": (load_cluster(traces / "philly_mix1" / "cluster.csv"),
                        read_trace(traces / "philly_mix1" / "jobs.csv")),
        "alibaba_openb": (load_cluster(vc), read_trace(traces / "alibaba_openb" / "openb_pod_list_default.csv")),
        "sacct_testcluster": (load_cluster(testcluster), read_trace(SACCT, "sacct")),
    }  # fmt: skip


def accuracy(data: dict[str, tuple[Any, Any]], overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    from gputwin.estimators.online import LearnedConfig
    from gputwin.sim.estimates import evaluate

    out = {}
    for name, (cluster, trace) in data.items():
        config = LearnedConfig(**SMALL_SITE[name]) if name in SMALL_SITE else None  # type: ignore[arg-type]
        config = LearnedConfig(**overrides) if overrides and name not in SMALL_SITE else config
        scores = evaluate(cluster, trace.jobs, origin=trace.origin, config=config)
        out[name] = {
            "jobs": scores["history"].jobs,
            "estimators": {n: s.to_json(n) for n, s in scores.items()},
        }
        print(f"\n{name}: {scores['history'].jobs} jobs, QSSF on every partition")
        print(
            f"{'estimator':<10}{'MAE s':>12}{'median APE':>12}{'Spearman':>10}{'p10-p90':>9}{'QSSF JCT s':>13}"
        )
        for est, s in scores.items():
            cov = "" if est != "learned" or math.isnan(s.coverage) else f"{100 * s.coverage:.1f}%"
            err = (
                ("", "", "")
                if est == "oracle"
                else (f"{s.mae_s:.1f}", f"{s.median_ape:.3f}", f"{s.spearman:.3f}")
            )
            print(f"{est:<10}{err[0]:>12}{err[1]:>12}{err[2]:>10}{cov:>9}{s.qssf_avg_jct:>13.1f}")
        if name in SMALL_SITE:
            out[name]["offline_holdout"] = offline_holdout(trace)
    return out


def offline_holdout(trace: Any) -> dict[str, float]:
    """The figures `gputwin estimator train --min-train 100` prints: a model fitted on the jobs that
    ended before the last 10 % were submitted (or, when those are unrepresentative, on every job
    submitted before them: `split`, see gputwin.estimators.model), scored on those."""
    from gputwin.estimators.model import train
    from gputwin.estimators.online import LearnedConfig

    started = time.perf_counter()
    trained = train(trace.jobs, LearnedConfig(min_train=100), origin=trace.origin)
    held: dict[str, float] = trained.metadata["holdout"]
    held["train_s"] = round(time.perf_counter() - started, 3)
    print(f"offline model (estimator train --min-train 100, {held['train_s']:.2f} s): last {held['jobs']} jobs "
          f"by a fit on {held['trained_on']} ({held['split']}): MAE {held['mae_s']:.1f} s, median APE {held['median_ape']:.3f}, "
          f"Spearman {held['spearman']:.3f}")  # fmt: skip
    return held


def overhead(cluster: Any, jobs: Any, repeat: int) -> dict[str, float]:
    import lightgbm  # noqa: F401  (imported before timing: the replay is measured, not the import)

    from gputwin.sim.run import Overrides, run_summary

    times: dict[str, list[float]] = {"history": [], "learned": []}
    for _ in range(repeat):  # alternated, so a change in the machine's load touches both alike
        for est, spent in times.items():
            started = time.process_time()
            run_summary(cluster, jobs, overrides=Overrides(queue="qssf"), estimator=est)
            spent.append(time.process_time() - started)
    best = {est: min(spent) for est, spent in times.items()}
    best["added_pct"] = round(100 * (best["learned"] / best["history"] - 1), 1)
    print(
        f"\noverhead (philly_mix1 QSSF replay, CPU time, best of {repeat}): history {best['history']:.3f} s, "
        f"learned {best['learned']:.3f} s, +{best['added_pct']}%"
    )
    return best


# The child `instructions` counts: load the inputs (and numpy, LightGBM), then replay QSSF once with
# the estimator named (unless it is "-": load only; with LearnedConfig fields in JSON, the learned
# estimator built with them) and print the average JCT.
CHILD = """
import sys
from pathlib import Path
from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.estimators.trees import lightgbm_module
from gputwin.sim.run import Overrides, run_summary
import json, numpy, gputwin.estimators.online
lightgbm_module()
d, estimator, first, config = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
cluster = load_cluster(d / "cluster.csv")
trace = read_trace(d / "jobs.csv")
jobs = trace.jobs[:first] if first else trace.jobs
if estimator != "-":
    if config:
        from gputwin.estimators import factory
        from gputwin.estimators.online import LearnedConfig
        estimator = factory(estimator, jobs, origin=trace.origin, config=LearnedConfig(**config))
    summary, _ = run_summary(cluster, jobs, overrides=Overrides(queue="qssf"), estimator=estimator, origin=trace.origin)
    print(summary.avg_jct)
"""


def child_argv(trace_dir: Path, estimator: str, first: int, config: dict[str, Any] | None) -> list[str]:
    """The command line of one CHILD run (what `instructions` counts under callgrind)."""
    return [sys.executable, "-c", CHILD, str(trace_dir), estimator, str(first), json.dumps(config or {})]


def instructions(trace_dir: Path, first: int, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """callgrind's instruction counts of the QSSF replay with each estimator, the load-only run
    subtracted; `config`: LearnedConfig fields the learned one is built with (default: its own)."""
    import re
    import shutil
    import subprocess

    if shutil.which("valgrind") is None:
        raise SystemExit("error: valgrind is not installed (apt-get install valgrind)")
    counts: dict[str, int] = {}
    jcts: dict[str, float] = {}
    for est in ("-", "history", "learned"):
        print(f"  callgrind: {'load only' if est == '-' else est} ...", file=sys.stderr, flush=True)
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
               *child_argv(trace_dir, est, first, config if est == "learned" else None)]  # fmt: skip
        # A fixed string hash seed: dict and set layouts (and so the counts) repeat run to run.
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise SystemExit(f"error: the {est} run failed: {done.stderr.strip().splitlines()[-3:]}")
        counts[est] = int(found.group(1))
        if est != "-":
            jcts[est] = float(done.stdout.strip().splitlines()[-1])
    base = counts.pop("-")
    out: dict[str, Any] = {"jobs": first or None, "load_only": base, "config": config or {}}
    for est, total in counts.items():
        out[est] = total - base
        out[f"{est}_avg_jct"] = jcts[est]
    out["added_pct"] = round(100 * (out["learned"] / out["history"] - 1), 1)
    print(f"\ninstructions (philly_mix1{f' first {first}' if first else ''} QSSF replay, callgrind, load-only "
          f"{base / 1e9:.3f} G subtracted): history {out['history'] / 1e9:.3f} G, learned "
          f"{out['learned'] / 1e9:.3f} G, {out['added_pct']:+.1f} %")  # fmt: skip
    return out


def digest(data: dict[str, tuple[Any, Any]], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """sha256 of every learned prediction of one QSSF replay per shared trace (see the docstring)."""
    import hashlib
    import struct

    from gputwin.estimators import factory
    from gputwin.estimators.online import LearnedConfig
    from gputwin.sim.run import Overrides, run_summary

    out = {}
    for name in ("philly_mix1", "alibaba_openb"):
        cluster, trace = data[name]
        made: list[Any] = []
        build = factory("learned", trace.jobs, origin=trace.origin, record=True, config=LearnedConfig(**(overrides or {})))
        summary, _ = run_summary(cluster, trace.jobs, overrides=Overrides(queue="qssf"), origin=trace.origin,
                                 estimator=lambda: made.append(build()) or made[-1])  # fmt: skip
        sha = hashlib.sha256()
        for job in trace.jobs:
            got = made[0].prediction(job.job_id)
            if got is not None:
                sha.update(struct.pack("5d", got.at, got.seconds, got.low, got.high, got.median))
        out[name] = {"sha256": sha.hexdigest(), "fits": made[0].fits, "qssf_avg_jct": summary.avg_jct}
        print(f"{name}: sha256 {out[name]['sha256']} ({made[0].fits} fits, QSSF JCT {summary.avg_jct:.3f} s)")
    return out


class _TieNoise:
    """An estimator's predictions times exp(0.01 z), z seeded per (seed, job id); seed 0: as they are."""

    def __init__(self, inner: Any, seed: int) -> None:
        self.inner, self.seed = inner, seed

    def predict(self, job: Any) -> float:
        value: float = self.inner.predict(job)
        if self.seed == 0 or not value > 0:  # NaN (UNKNOWN) and 0 stay as they are
            return value
        import hashlib

        bits = hashlib.sha256(f"{self.seed}:{job.job_id}".encode()).digest()
        u1, u2 = (int.from_bytes(bits[:8], "big") + 0.5) / 2**64, int.from_bytes(bits[8:16], "big") / 2**64
        return value * math.exp(0.01 * math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2))

    def observe(self, job: Any, run_seconds: float) -> None:
        self.inner.observe(job, run_seconds)


def tie_noise(data: dict[str, tuple[Any, Any]], overrides: dict[str, Any] | None, replays: int) -> dict[str, Any]:
    """QSSF average JCT of `replays` replays per shared trace and estimator (see the docstring)."""
    from gputwin.estimators import factory
    from gputwin.estimators.online import LearnedConfig
    from gputwin.sim.run import Overrides, run_summary

    out: dict[str, Any] = {}
    for name in ("philly_mix1", "alibaba_openb"):
        cluster, trace = data[name]
        for est in ("history", "learned"):
            config = LearnedConfig(**(overrides or {})) if est == "learned" else None
            build = factory(est, trace.jobs, origin=trace.origin, config=config)
            jcts = [run_summary(cluster, trace.jobs, overrides=Overrides(queue="qssf"), origin=trace.origin,
                                estimator=lambda seed=seed: _TieNoise(build(), seed))[0].avg_jct  # fmt: skip
                    for seed in range(replays)]  # fmt: skip
            got = {"plain": jcts[0], "mean": sum(jcts) / len(jcts), "min": min(jcts), "max": max(jcts)}
            out[f"{name}/{est}"] = {k: round(v, 3) for k, v in got.items()}
            print(f"{name} {est}: QSSF JCT plain {jcts[0]:.1f} s, mean of {replays} {got['mean']:.1f} "
                  f"({got['min']:.1f}-{got['max']:.1f})")  # fmt: skip
    return out


def training(jobs: Any, rows_wanted: int, peer: bool) -> dict[str, float]:
    import numpy as np

    from gputwin.estimators.features import FeatureState, log_seconds
    from gputwin.estimators.online import LearnedConfig
    from gputwin.estimators.trees import fit

    state, rows = FeatureState(), []
    for job in jobs:  # describe each job, then learn it (a simple stand-in for the replay's order)
        rows.append(state.row(job))
        state.observe(job, job.duration)
    x = np.tile(np.asarray(rows), (rows_wanted // len(rows) + 1, 1))[:rows_wanted]
    y = np.tile(np.asarray([log_seconds(j.duration) for j in jobs]), rows_wanted // len(rows) + 1)[
        :rows_wanted
    ]
    config = LearnedConfig()
    started = time.perf_counter()
    booster = fit(x, y, config)
    out = {"rows": float(rows_wanted), "fit_s": time.perf_counter() - started}
    started = time.perf_counter()
    booster.predict(x[:100_000], num_threads=1)
    out["predict_100k_s"] = time.perf_counter() - started
    started = time.perf_counter()
    for i in range(200):
        booster.predict(x[i : i + 1], num_threads=1)
    out["predict_one_us"] = (time.perf_counter() - started) / 200 * 1e6
    if peer:
        out.update(_peer(x, y, config))
    print(f"\ntraining: {rows_wanted:,} rows, {config.rounds} rounds of {config.leaves} leaves, one thread: "
          f"LightGBM fit {out['fit_s']:.2f} s, predict 100k rows {out['predict_100k_s']:.3f} s, "
          f"one row {out['predict_one_us']:.0f} us")  # fmt: skip
    if "peer_fit_s" in out:
        print(
            f"peer: scikit-learn HistGradientBoostingRegressor fit {out['peer_fit_s']:.2f} s, "
            f"one row {out['peer_predict_one_us']:.0f} us"
        )
    return {k: round(v, 4) for k, v in out.items()}


def _peer(x: Any, y: Any, config: Any) -> dict[str, float]:
    try:
        from sklearn.ensemble import HistGradientBoostingRegressor
    except ImportError:
        print("peer: scikit-learn is not installed", file=sys.stderr)
        return {}
    import numpy as np

    keep = [i for i in range(x.shape[1]) if len(np.unique(x[:, i])) > 1]  # it refuses constant columns
    model = HistGradientBoostingRegressor(max_iter=config.rounds, max_leaf_nodes=config.leaves, early_stopping=False,
                                          categorical_features=[k for k in keep if k < 3], random_state=0)  # fmt: skip
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    started = time.perf_counter()
    model.fit(x[:, keep], y)
    fit_s = time.perf_counter() - started
    started = time.perf_counter()
    for i in range(50):
        model.predict(x[i : i + 1, keep])
    return {"peer_fit_s": fit_s, "peer_predict_one_us": (time.perf_counter() - started) / 50 * 1e6}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    load = [os.getloadavg()]
    print(f"{time.strftime('%Y-%m-%d %H:%M')} load {load[0][0]:.2f} {load[0][1]:.2f} {load[0][2]:.2f}")
    if args.instructions:
        result: dict[str, Any] = {"instructions": instructions(args.traces / "philly_mix1", args.jobs, args.config)}
        _finish(result, load, args.json)
        return
    with tempfile.TemporaryDirectory() as folder:
        data = inputs(args.traces, Path(folder))
    if args.tie_noise:
        _finish({"tie_noise": tie_noise(data, args.config, args.tie_noise)}, load, args.json)
        return
    if args.digest:
        _finish({"digest": digest(data, args.config)}, load, args.json)
        return
    result = {}
    if not args.skip_accuracy:
        result["accuracy"] = accuracy(data, args.config)
    cluster, trace = data["philly_mix1"]
    result["overhead"] = overhead(cluster, trace.jobs, args.repeat)
    result["training"] = training(trace.jobs, args.train_rows, args.peer)
    _finish(result, load, args.json)


def _finish(result: dict[str, Any], load: list[tuple[float, float, float]], as_json: bool) -> None:
    load.append(os.getloadavg())
    result["load"] = [round(v, 2) for v in load[0] + load[1]]
    print(f"load after {load[1][0]:.2f} {load[1][1]:.2f} {load[1][2]:.2f}")
    if as_json:
        print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
