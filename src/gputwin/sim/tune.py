"""Searching policy settings on one trace (`gputwin tune`), with an optional hold-out split.

`tune` asks optuna's TPE sampler for trials in batches of `workers`, simulates each trial's policy
(on every partition, in worker processes when asked) and tells optuna the objective. The study
lives in an SQLite file, so an interrupted tune resumes: `budget` counts finished trials in the
file, trials left running by a killed process are marked failed, and a trial whose policy was
already simulated reuses that result. Same seed and `workers`, same trials (the sampler is seeded
with `seed + finished trials`, so a resumed run does not replay the first run's random picks).

With a hold-out fraction the trace is split in time (`split`): trials run on the earlier jobs,
then the best policy and the baseline (the cluster's own policies) run on the later ones, so a
winner that only fits the tuning part shows. Each part replays from an empty cluster with no
history, for the baseline as for the winner, so the two are judged alike. The search space is
`gputwin.sim.space`.

With `partition` only that partition's policy changes and only its jobs are measured (the
others' numbers do not depend on it). Without `storage` the study lives in memory: a
TraceReplay's search (`operator/replay.py`) runs once per generation and keeps nothing on disk.
A storage file that is no optuna study, or cannot be written, is one RunError naming it
(`storage_errors`): the study is the user's work, so it is never deleted or replaced here.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.exceptions import StorageInternalError
from optuna.trial import TrialState
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError

from gputwin.core.model import ClusterSpec, JobSpec, PolicySpec, policy_label
from gputwin.sim.run import RunError, run_summary
from gputwin.sim.evaluation import OBJECTIVES, Scores, rank
from gputwin.sim.space import KNOBS, Choice, Space, Value

STUDY_NAME = "gputwin-tune"
# SQLite's words for a study file that is fine but cannot be written (else it is not a study).
CANNOT_WRITE = ("readonly", "read-only", "unable to open", "disk i/o", "full", "locked", "permission")
Metrics = Scores  # every metric of `gputwin.sim.evaluation.METRICS`


@dataclass(frozen=True, slots=True)
class Split:
    """The trace cut in time: jobs submitted before `cut` tune, the rest are held out."""

    tune: tuple[JobSpec, ...]
    holdout: tuple[JobSpec, ...]
    cut: float | None  # None: no hold-out, every job tunes


def split(jobs: Sequence[JobSpec], holdout: float | None) -> Split:
    """Hold out the last `holdout` fraction of the jobs by submit time (ties stay together)."""
    ordered = tuple(sorted(jobs, key=lambda j: (j.submit, j.seq)))
    if holdout is None:
        return Split(ordered, (), None)
    if not 0.0 < holdout < 1.0:
        raise RunError(f"--holdout must be between 0 and 1, not {holdout}")
    index = min(len(ordered) - 1, max(0, len(ordered) - math.ceil(len(ordered) * holdout)))
    cut = ordered[index].submit if ordered else 0.0
    tune, held = tuple(j for j in ordered if j.submit < cut), tuple(j for j in ordered if j.submit >= cut)
    if not tune or not held:
        raise RunError(f"--holdout {holdout} leaves no jobs to {'tune on' if not tune else 'hold out'}")
    return Split(tune, held, cut)


def sample(trial: optuna.Trial, space: Space) -> dict[str, Value]:
    """The trial's settings: every knob that applies to what was chosen before it."""
    chosen: dict[str, Value] = {}
    for knob in KNOBS:
        if not space.applies(knob, chosen):
            continue
        dim = space.get(knob.name)
        if isinstance(dim, Choice):
            picked = trial.suggest_categorical(knob.name, dim.values)
            assert picked is not None  # a space never offers None
            chosen[knob.name] = picked
        elif knob.kind == "int":
            step = int(dim.step or 1)
            chosen[knob.name] = trial.suggest_int(
                knob.name, int(dim.low), int(dim.high), step=step, log=dim.log
            )
        else:
            chosen[knob.name] = trial.suggest_float(knob.name, dim.low, dim.high, step=dim.step, log=dim.log)
    return chosen


def policy_from_params(params: Mapping[str, Any]) -> PolicySpec:
    """The core policy a trial's settings mean, with `params` as `gputwin.api.convert` builds them
    (so the SchedulingPolicy written for it converts back to exactly this). Rounded to whole or
    tenth seconds: the YAML then says what was simulated."""
    queue = str(params["queue"])
    knobs: dict[str, object] = {
        "max_wait": round(float(params.get("max_wait", 300.0)), 1), "allowed_gpus": (),
        "max_factor": round(float(params.get("max_factor", 2.0)), 3),
    }  # fmt: skip
    if "min_samples" in params:
        knobs["min_samples"] = int(params["min_samples"])
    if queue == "las" and "las_first_threshold" in params:
        first = round(float(params["las_first_threshold"]))
        knobs["las_thresholds"] = f"{first},{round(first * float(params['las_threshold_ratio']))}"
    if queue == "qssf" and "qssf_prior" in params:
        knobs["qssf_prior"] = float(round(float(params["qssf_prior"])))
    return PolicySpec(queue=queue, placement=str(params["placement"]), sizing=str(params["sizing"]),
                      backfill=bool(params.get("backfill", False)), params=knobs)  # fmt: skip


def describe(policy: PolicySpec) -> str:
    """`queue/placement/sizing[+backfill]` plus the knobs that apply, e.g. `… max_wait=120.0`."""
    label = policy_label(policy.queue, policy.placement, policy.sizing, policy.backfill)
    shown = {"max_wait": policy.placement == "topology-aware", "max_factor": policy.sizing == "history",
             "min_samples": policy.sizing == "history", "las_thresholds": policy.queue == "las",
             "qssf_prior": policy.queue == "qssf"}  # fmt: skip
    extra = [f"{k}={policy.params[k]}" for k, show in shown.items() if show and k in policy.params]
    return " ".join([label, *extra])


def with_policy(cluster: ClusterSpec, policy: PolicySpec | None, partition: str | None = None) -> ClusterSpec:
    """Every partition (only `partition`, when given) under `policy` (None: as declared); each keeps
    its own checkpoint cost."""
    if policy is None:
        return cluster
    parts = tuple(
        dataclasses.replace(
            p, policy=dataclasses.replace(policy, checkpoint_seconds=p.policy.checkpoint_seconds)
        )
        if partition is None or p.name == partition
        else p
        for p in cluster.partitions
    )
    return dataclasses.replace(cluster, partitions=parts)


def check_partition(cluster: ClusterSpec, partition: str | None) -> None:
    """RunError unless `partition` is None or one of the cluster's partitions."""
    names = [p.name for p in cluster.partitions]
    if partition is not None and partition not in names:
        raise RunError(f"--partition: unknown partition {partition!r}; known: {', '.join(names)}")


def evaluate(
    cluster: ClusterSpec,
    jobs: Sequence[JobSpec],
    policy: PolicySpec | None,
    seed: int,
    partition: str | None = None,
) -> Metrics:
    """Every metric of the run (`evaluation.METRICS`): the whole cluster's, or `partition`'s alone
    (the policy changed only there; the other partitions' numbers do not depend on it and would only
    blur a p99 or a makespan)."""
    summary, outcome = run_summary(with_policy(cluster, policy, partition), jobs, seed=seed)
    if partition is None:
        return summary.scores()
    # The run summary's per-partition metrics have no makespan: computed the same way from its jobs.
    ran = [j for j in outcome.finished if j.partition == partition]
    first = min((j.spec.submit for j in ran), default=0.0)
    last = max((j.end for j in ran if j.end is not None), default=first)
    return summary.partition_scores(partition, round(last - first, 3))


# Worker-process state, set once per worker: the trace parts travel once, not once per trial.
_WORKER: dict[str, Any] = {}


def _init_worker(
    cluster: ClusterSpec, parts: Mapping[str, Sequence[JobSpec]], seed: int, partition: str | None
) -> None:
    _WORKER.update(cluster=cluster, parts=parts, seed=seed, partition=partition)


def _evaluate_in_worker(task: tuple[str, PolicySpec | None]) -> Metrics:
    part, policy = task
    return evaluate(_WORKER["cluster"], _WORKER["parts"][part], policy, _WORKER["seed"], _WORKER["partition"])


@dataclass(frozen=True, slots=True)
class TrialRow:
    number: int
    policy: PolicySpec
    params: Mapping[str, Value]
    value: float
    metrics: Metrics

    def score(self, objective: str) -> float:
        return self.metrics[objective]

    @property
    def tiebreak(self) -> int:
        return self.number

    def to_json(self) -> dict[str, Any]:
        return {"trial": self.number, "policy": describe(self.policy), "params": dict(self.params),
                "value": self.value, "metrics": self.metrics}  # fmt: skip


@dataclass(frozen=True, slots=True)
class TuneResult:
    objective: str
    trials: tuple[TrialRow, ...]  # finished trials, best first (ties: lower trial number)
    baseline: Mapping[str, Metrics]  # "tune" (and "holdout") -> the cluster's own policies' metrics
    holdout: Metrics | None  # the best policy on the held-out jobs
    split: Split

    @property
    def best(self) -> TrialRow:
        return self.trials[0]

    def to_json(self) -> dict[str, Any]:
        o, s, held = self.objective, self.split, self.holdout
        return {
            "objective": o, "direction": OBJECTIVES[o],
            "split": {"cut": s.cut, "tune_jobs": len(s.tune), "holdout_jobs": len(s.holdout)},
            "best": {**self.best.to_json(), "tune": self.best.value, "holdout": None if held is None else held[o],
                     "holdout_metrics": held},
            "baseline": {"tune": self.baseline["tune"][o], "holdout": self.baseline.get("holdout", {}).get(o),
                         "metrics": dict(self.baseline)},
            "trials": [t.to_json() for t in sorted(self.trials, key=lambda t: t.number)],
        }  # fmt: skip


class Evaluator:
    """Runs (part, policy) tasks in order, inline or in a pool of worker processes."""

    def __init__(self, cluster: ClusterSpec, parts: Mapping[str, Sequence[JobSpec]], seed: int, workers: int,
                 partition: str | None = None):  # fmt: skip
        self.cluster, self.parts, self.seed, self.partition = cluster, parts, seed, partition
        initargs = (cluster, parts, seed, partition)
        self.pool = (
            ProcessPoolExecutor(workers, initializer=_init_worker, initargs=initargs) if workers > 1 else None
        )

    def __call__(self, tasks: Sequence[tuple[str, PolicySpec | None]]) -> list[Metrics]:
        if self.pool is None:
            return [evaluate(self.cluster, self.parts[part], policy, self.seed, self.partition)
                    for part, policy in tasks]  # fmt: skip
        return list(self.pool.map(_evaluate_in_worker, tasks))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def open_study(storage: Path | None, objective: str, config: Mapping[str, Any]) -> optuna.Study:
    """The study in `storage` (created if new; None: in memory, gone when done); RunError if it was
    made for another tune."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = None if storage is None else f"sqlite:///{storage}"
    study = optuna.create_study(storage=url, study_name=STUDY_NAME, direction=OBJECTIVES[objective],
                                load_if_exists=True)  # fmt: skip
    saved = study.user_attrs.get("gputwin")
    if saved is None:
        study.set_user_attr("gputwin", dict(config))
    elif saved != dict(config):
        differs = sorted(k for k in config if saved.get(k) != config[k])
        raise RunError(
            f"{storage}: holds a tune with other {', '.join(differs)}; use another --out or the same settings"
        )
    for stale in study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING)):
        study.tell(stale.number, state=TrialState.FAIL)  # its process died: the trial never finished
    return study


@contextmanager
def storage_errors(storage: Path | None) -> Iterator[None]:
    """The study file's database errors as one RunError line naming the file (never its content)."""
    try:
        yield
    except (SQLAlchemyError, StorageInternalError) as exc:
        cause = exc.__cause__ if isinstance(exc.__cause__, SQLAlchemyError) else exc  # optuna wraps commits
        reason = str(cause.orig) if isinstance(cause, DBAPIError) else type(cause).__name__
        if isinstance(cause, OperationalError) and any(w in reason.lower() for w in CANNOT_WRITE):
            raise RunError(f"{storage}: cannot write the study there ({reason})") from None
        raise RunError(
            f"{storage}: not an optuna study database ({reason}); delete it to start the tune over"
        ) from None


def fingerprint(value: object) -> str:
    return f"{zlib.crc32(repr(value).encode()):08x}"


def tune(
    cluster: ClusterSpec,
    jobs: Sequence[JobSpec],
    space: Space,
    *,
    storage: Path | None,
    objective: str = "avg_jct",
    budget: int = 30,
    seed: int = 0,
    holdout: float | None = None,
    workers: int = 1,
    partition: str | None = None,
    progress: Callable[[int, str], None] | None = None,
) -> TuneResult:
    """Search `space` for the policy with the best `objective` until `budget` trials have finished.

    `storage`: the study's SQLite file (None: an in-memory study, for one-shot searches such as a
    TraceReplay's). `partition`: trials change only that partition's policy and are judged on its
    jobs alone; the other partitions keep their own policies."""
    if objective not in OBJECTIVES:
        raise RunError(f"unknown objective {objective!r}; known: {', '.join(OBJECTIVES)}")
    check_partition(cluster, partition)
    parts = split(jobs, holdout)
    config = {"objective": objective, "holdout": holdout, "space": space.to_json(),
              "trace": fingerprint(parts.tune), "cluster": fingerprint(cluster)}  # fmt: skip
    if partition is not None:  # only then: studies written before --partition existed still resume
        config["partition"] = partition
    with storage_errors(storage):
        study = open_study(storage, objective, config)
    evaluator = Evaluator(cluster, {"tune": parts.tune, "holdout": parts.holdout}, seed, workers, partition)
    try:
        with storage_errors(storage):
            _search(study, space, evaluator, budget, seed, workers, progress)
            rows = _rows(study)
        tasks: list[tuple[str, PolicySpec | None]] = [("tune", None)]
        if parts.holdout:
            tasks += [("holdout", None), ("holdout", rows[0].policy)]
        runs = evaluator(tasks)
    finally:
        evaluator.close()
    baseline = {"tune": runs[0], **({"holdout": runs[1]} if parts.holdout else {})}
    return TuneResult(objective, tuple(rows), baseline, runs[2] if parts.holdout else None, parts)


def _search(study: optuna.Study, space: Space, evaluator: Evaluator, budget: int, seed: int, workers: int,
            progress: Callable[[int, str], None] | None) -> None:  # fmt: skip
    finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    cache = {repr(policy_from_params(t.params)): t.user_attrs["metrics"] for t in finished}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.sampler = optuna.samplers.TPESampler(seed=seed + len(finished))
    objective = study.user_attrs["gputwin"]["objective"]
    done = len(finished)
    while done < budget:
        # A batch is asked for, run, then told in trial order: the outcome does not depend on which
        # worker finishes first.
        batch = [study.ask() for _ in range(min(workers, budget - done))]
        policies = [policy_from_params(sample(trial, space)) for trial in batch]
        todo = list(dict.fromkeys(repr(p) for p in policies if repr(p) not in cache))
        by_key = {repr(p): p for p in policies}
        cache.update(zip(todo, evaluator([("tune", by_key[k]) for k in todo])))
        for trial, policy in zip(batch, policies):
            metrics = cache[repr(policy)]
            trial.set_user_attr("metrics", metrics)
            study.tell(trial, metrics[objective])
            done += 1
            if progress is not None:
                progress(done, describe(policy))


def _rows(study: optuna.Study) -> list[TrialRow]:
    rows = [
        TrialRow(
            t.number, policy_from_params(t.params), dict(t.params), float(t.value), t.user_attrs["metrics"]
        )
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if t.value is not None
    ]
    if not rows:
        raise RunError("no trial finished")
    return rank(rows, study.user_attrs["gputwin"]["objective"])
