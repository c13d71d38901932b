"""`gputwin.sim.tune` and `gputwin.sim.space`: the split in time, the space file, reproducible and
resumable optuna searches on a small cluster (real simulations, real SQLite studies)."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest
from cluster_builders import build_cluster, build_jobs

from gputwin.core.model import ClusterSpec, JobSpec, PolicySpec
from gputwin.sim import tune as tune_module
from gputwin.sim.run import RunError, run
from gputwin.sim.space import KNOBS, Choice, Range, SpaceError, Value, default_space, parse_space
from gputwin.sim.tune import STUDY_NAME, describe, evaluate, policy_from_params, split, tune

VOCABULARY = {"queue": ["fifo", "sjf", "srtf", "las", "qssf", "priority"],
              "placement": ["first-fit", "consolidate", "topology-aware"], "sizing": ["as-requested", "history"]}  # fmt: skip
SPACE = default_space(VOCABULARY)


@pytest.fixture(scope="module")
def cluster() -> ClusterSpec:
    return build_cluster({"s0": {"l0": [8, 8], "l1": [8, 8]}, "s1": {"l2": [8, 8]}})


@pytest.fixture(scope="module")
def jobs() -> list[JobSpec]:
    """300 jobs over ~10 hours, sizes 1-16 GPUs, long enough to queue on 48 GPUs."""
    rng = random.Random(7)
    rows = [(f"j{i}", rng.uniform(0, 36_000), rng.choice([60, 600, 3600, 7200]) * rng.uniform(0.5, 2),
             rng.choice([1, 1, 2, 4, 8, 16]), {"user": f"u{i % 5}", "name": f"m{i % 7}"}) for i in range(300)]  # fmt: skip
    return build_jobs(rows)


# --- split ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "submits,fraction,tune_ids,held_ids",
    [
        ([0, 10, 20, 30, 40, 50, 60, 70, 80, 90], 0.3, "0123456", "789"),
        ([0, 10, 20, 30, 40, 50, 60, 70, 80, 90], 0.05, "012345678", "9"),
        ([0, 10, 20, 30, 30, 30, 60, 70, 80, 90], 0.7, "012", "3456789"),  # ties at the cut held out together
        ([90, 80, 70, 60, 50, 40, 30, 20, 10, 0], 0.3, "9876543", "210"),  # by submit time, not file order
    ],
)
def test_split_holds_out_the_latest_jobs(
    submits: list[int], fraction: float, tune_ids: str, held_ids: str
) -> None:
    jobs = build_jobs((str(i), s, 60, 1) for i, s in enumerate(submits))
    parts = split(jobs, fraction)
    assert sorted(j.job_id for j in parts.tune) == sorted(tune_ids)
    assert sorted(j.job_id for j in parts.holdout) == sorted(held_ids)
    assert parts.cut is not None
    assert max(j.submit for j in parts.tune) < parts.cut <= min(j.submit for j in parts.holdout)


def test_split_without_holdout_keeps_every_job_and_refuses_an_empty_part() -> None:
    jobs = build_jobs((str(i), 5, 60, 1) for i in range(4))
    assert split(jobs, None).tune == tuple(jobs) and split(jobs, None).cut is None
    with pytest.raises(RunError, match="leaves no jobs to tune on"):
        split(jobs, 0.5)  # every job submitted at once: no cut in time separates them


# --- space ----------------------------------------------------------------------------------------


def test_space_file_overrides_knob_by_knob() -> None:
    space = parse_space({"queue": ["sjf", "las"], "backfill": True, "max_wait": {"low": 60, "high": 600, "step": 60},
                         "min_samples": [3, 5]}, "s.yaml", VOCABULARY)  # fmt: skip
    assert space.get("queue") == Choice(("sjf", "las"))
    assert space.get("backfill") == Choice((True,))
    assert space.get("max_wait") == Range(60.0, 600.0, False, 60.0)
    assert space.get("min_samples") == Choice((3, 5))
    assert space.get("placement") == SPACE.get("placement")  # left out: the default


@pytest.mark.parametrize(
    "data,message",
    [
        ([1, 2], "s.yaml: document: expected a mapping of knob names"),
        ({"qeueu": ["fifo"]}, "s.yaml: qeueu: unknown knob; known: queue, placement"),
        ({"queue": ["fifo", "nope"]}, "s.yaml: queue: unknown queue policy 'nope'; known: fifo"),
        ({"placement": "best-fit"}, "s.yaml: placement: unknown placement policy 'best-fit'"),
        ({"queue": []}, "s.yaml: queue: empty list"),
        ({"queue": {"low": 1, "high": 2}}, "s.yaml: queue: a range needs a numeric knob"),
        ({"backfill": ["yes"]}, "s.yaml: backfill: expected true or false, got 'yes'"),
        ({"max_wait": {"low": 10}}, "s.yaml: max_wait: a range needs low and high"),
        ({"max_wait": {"low": 10, "high": 5}}, "s.yaml: max_wait: low 10 is above high 5"),
        ({"max_wait": {"low": 0, "high": 5, "log": True}}, "s.yaml: max_wait: a log range needs low > 0"),
        ({"max_wait": {"low": 0, "high": 5, "by": 1}}, "s.yaml: max_wait: unknown range field 'by'"),
        ({"max_factor": {"low": 0.5, "high": 2}}, "s.yaml: max_factor: 0.5 is outside [1, 64]"),
        ({"min_samples": [2.5]}, "s.yaml: min_samples: expected a whole number, got 2.5"),
        ({"max_wait": ["soon"]}, "s.yaml: max_wait: expected a number, got 'soon'"),
        ({"qssf_prior": {"low": -5, "high": 60}}, "s.yaml: qssf_prior: -5 is outside [0, inf]"),
        (
            {"qssf_prior": {"low": 0, "high": 60, "log": True}},
            "s.yaml: qssf_prior: a log range needs low > 0",
        ),
    ],
)
def test_bad_space_names_file_knob_and_reason(data: object, message: str) -> None:
    with pytest.raises(SpaceError) as caught:
        parse_space(data, "s.yaml", VOCABULARY)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_trial_params_become_the_policy_the_core_reads() -> None:
    policy = policy_from_params({"queue": "las", "placement": "topology-aware", "sizing": "history",
                                 "max_wait": 123.456, "max_factor": 1.23456, "min_samples": 4,
                                 "las_first_threshold": 1000.4, "las_threshold_ratio": 3.0})  # fmt: skip
    assert policy == PolicySpec(
        "las",
        "topology-aware",
        "history",
        False,
        None,
        {
            "max_wait": 123.5,
            "allowed_gpus": (),
            "max_factor": 1.235,
            "min_samples": 4,
            "las_thresholds": "1000,3000",
        },
    )


@pytest.mark.parametrize(
    "params,knobs",
    [
        pytest.param({"queue": "qssf", "qssf_prior": 1234.6}, {"qssf_prior": 1235.0}, id="qssf-rounded"),
        pytest.param({"queue": "qssf"}, {}, id="qssf-unsampled-keeps-the-default"),
        pytest.param({"queue": "sjf", "qssf_prior": 900.0}, {}, id="only-qssf-reads-it"),
    ],
)
def test_the_qssf_prior_becomes_the_param_the_core_reads(
    params: dict[str, Value], knobs: dict[str, float]
) -> None:
    policy = policy_from_params({"placement": "first-fit", "sizing": "as-requested", **params})
    assert {k: v for k, v in policy.params.items() if k == "qssf_prior"} == knobs
    assert ("qssf_prior=" in describe(policy)) == bool(knobs)


def test_the_qssf_prior_applies_only_under_qssf_on_a_log_range() -> None:
    (knob,) = [k for k in KNOBS if k.name == "qssf_prior"]
    assert SPACE.get("qssf_prior") == Range(600.0, 36000.0, log=True)
    assert SPACE.applies(knob, {"queue": "qssf"}) and not SPACE.applies(knob, {"queue": "sjf"})


def test_the_qssf_prior_changes_what_is_simulated() -> None:
    # One 8-GPU node: F (5 s) finishes while A waits behind O, so A is predicted from nothing (the
    # prior) and B, arriving after F ended, from F's 5 s. A prior below 5 runs A first.
    one = build_cluster({"l0": [8]})
    rows = build_jobs([("F", 0, 5, 2), ("O", 0, 100, 6), ("A", 1, 100, 5), ("B", 6, 10, 5)])
    low, high = (evaluate(one, rows, policy_from_params({"queue": "qssf", "placement": "first-fit",
                  "sizing": "as-requested", "qssf_prior": prior}), seed=0) for prior in (1, 3600))  # fmt: skip
    assert low["avg_jct"] == (5 + 100 + 199 + 204) / 4  # A 100..200, B 200..210
    assert high["avg_jct"] == (5 + 100 + 209 + 104) / 4  # B 100..110, A 110..210


def test_a_qssf_search_samples_the_prior_in_its_range(cluster: ClusterSpec, jobs: list[JobSpec]) -> None:
    space = parse_space({"queue": "qssf", "placement": "first-fit", "backfill": False, "sizing": "as-requested"},
                        "s.yaml", VOCABULARY)  # fmt: skip
    result = tune(cluster, jobs, space, storage=None, budget=3, seed=1)
    priors = [t.policy.params["qssf_prior"] for t in result.trials]
    assert len(set(priors)) == 3 and all(600 <= float(str(p)) <= 36000 for p in priors)
    assert all(t.policy.params["qssf_prior"] == round(float(t.params["qssf_prior"])) for t in result.trials)


# --- search ---------------------------------------------------------------------------------------


def run_tune(
    cluster: ClusterSpec, jobs: list[JobSpec], storage: Path, **kw: object
) -> tune_module.TuneResult:
    return tune(cluster, jobs, SPACE, storage=storage, **{"budget": 6, "seed": 3, **kw})  # type: ignore[arg-type]


def test_same_seed_same_trials_and_best(cluster: ClusterSpec, jobs: list[JobSpec], tmp_path: Path) -> None:
    one = run_tune(cluster, jobs, tmp_path / "a.db")
    two = run_tune(cluster, jobs, tmp_path / "b.db")
    other = run_tune(cluster, jobs, tmp_path / "c.db", seed=4)
    assert [t.to_json() for t in one.trials] == [t.to_json() for t in two.trials]
    assert one.best.policy == two.best.policy
    assert [t.params for t in one.trials] != [t.params for t in other.trials]
    values = [t.value for t in one.trials]
    assert values == sorted(values) and one.best.value == one.best.metrics["avg_jct"]


def test_maximising_utilisation_ranks_highest_first(
    cluster: ClusterSpec, jobs: list[JobSpec], tmp_path: Path
) -> None:
    result = run_tune(cluster, jobs, tmp_path / "u.db", objective="gpu_utilization", budget=4)
    values = [t.value for t in result.trials]
    assert values == sorted(values, reverse=True)
    assert result.to_json()["direction"] == "maximize"


def test_resume_continues_to_the_budget_without_rerunning(cluster: ClusterSpec, jobs: list[JobSpec],
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    storage = tmp_path / "study.db"
    first = run_tune(cluster, jobs, storage, budget=3)
    # A process killed mid-trial leaves a RUNNING trial behind.
    optuna.load_study(study_name=STUDY_NAME, storage=f"sqlite:///{storage}").ask()
    simulated: list[str] = []
    real = tune_module.evaluate

    def counting(c: ClusterSpec, js: list[JobSpec], policy: PolicySpec | None, seed: int,
                 partition: str | None) -> dict[str, float]:  # fmt: skip
        simulated.append("baseline" if policy is None else policy.queue)
        return real(c, js, policy, seed, partition)

    monkeypatch.setattr(tune_module, "evaluate", counting)
    done: list[int] = []
    second = run_tune(cluster, jobs, storage, budget=6, progress=lambda n, _: done.append(n))
    assert done == [4, 5, 6]  # only the missing trials ran
    assert len(second.trials) == 6
    assert 1 <= len(simulated) - 1 <= 3  # 3 new trials at most (repeats reuse), plus the baseline
    old = {t.number: t.to_json() for t in first.trials}
    assert {t.number: t.to_json() for t in second.trials if t.number in old} == old
    study = optuna.load_study(study_name=STUDY_NAME, storage=f"sqlite:///{storage}")
    states = [t.state for t in study.trials]
    assert (
        states.count(optuna.trial.TrialState.FAIL) == 1
        and states.count(optuna.trial.TrialState.COMPLETE) == 6
    )


def test_a_study_made_for_another_objective_is_refused(cluster: ClusterSpec, jobs: list[JobSpec],
                                                       tmp_path: Path) -> None:  # fmt: skip
    run_tune(cluster, jobs, tmp_path / "s.db", budget=1)
    with pytest.raises(RunError, match="holds a tune with other objective"):
        run_tune(cluster, jobs, tmp_path / "s.db", budget=2, objective="p99_jct")


def test_repeated_policies_are_simulated_once(cluster: ClusterSpec, jobs: list[JobSpec], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    space = parse_space({"queue": "sjf", "placement": ["first-fit", "consolidate"], "backfill": False,
                         "sizing": "as-requested"}, "s.yaml", VOCABULARY)  # fmt: skip
    calls: list[PolicySpec | None] = []
    real: Callable[..., dict[str, float]] = tune_module.evaluate
    monkeypatch.setattr(
        tune_module, "evaluate", lambda c, js, p, s, part: calls.append(p) or real(c, js, p, s, part)
    )
    result = tune(cluster, jobs, space, storage=tmp_path / "r.db", budget=8, seed=1)
    assert len(result.trials) == 8
    assert len([p for p in calls if p is not None]) == len({t.policy.placement for t in result.trials}) <= 2


def test_holdout_numbers_are_computed_on_the_later_jobs(cluster: ClusterSpec, jobs: list[JobSpec],
                                                        tmp_path: Path) -> None:  # fmt: skip
    result = run_tune(cluster, jobs, tmp_path / "h.db", holdout=0.3, budget=4, workers=2)
    parts = result.split
    assert len(parts.tune) == 210 and len(parts.holdout) == 90
    assert result.best.metrics["jobs"] == 210
    assert result.holdout == evaluate(cluster, parts.holdout, result.best.policy, 0)
    assert result.baseline["holdout"] == evaluate(cluster, parts.holdout, None, 0)
    assert result.baseline["tune"] == evaluate(cluster, parts.tune, None, 0)
    data = result.to_json()
    assert data["best"]["holdout"] == result.holdout["avg_jct"] != data["best"]["tune"]
    assert data["baseline"]["holdout"] == result.baseline["holdout"]["avg_jct"]
    assert data["split"] == {"cut": parts.cut, "tune_jobs": 210, "holdout_jobs": 90}


# --- one partition, in-memory studies ---------------------------------------------------------------


@pytest.fixture(scope="module")
def two_partitions() -> ClusterSpec:
    """Partition "a" (task type a, 32 GPUs) beside a catch-all "b" (16 GPUs), both under fifo."""
    return build_cluster({"s0": {"l0": [8, 8], "l1": [8, 8]}, "s1": {"l2": [8, 8]}},
                         partitions=[("a", range(4), ("a",)), ("b", (4, 5), ("*",))])  # fmt: skip


@pytest.fixture(scope="module")
def mixed_jobs(jobs: list[JobSpec]) -> list[JobSpec]:
    """The 300 jobs, every third one of task type a (the rest go to the catch-all)."""
    return [dataclasses.replace(j, task_type="a" if j.seq % 3 == 0 else "x") for j in jobs]


def test_tuning_one_partition_changes_and_judges_only_that_partition(
    two_partitions: ClusterSpec, mixed_jobs: list[JobSpec], tmp_path: Path
) -> None:
    space = parse_space({"queue": ["sjf", "srtf"], "placement": "consolidate", "sizing": "as-requested"},
                        "s.yaml", VOCABULARY)  # fmt: skip
    result = tune(
        two_partitions, mixed_jobs, space, storage=tmp_path / "p.db", budget=3, seed=1, partition="a"
    )
    best = result.best.policy
    changed = tune_module.with_policy(two_partitions, best, "a")
    assert [p.policy.queue for p in changed.partitions] == [best.queue, "fifo"]
    assert result.best.metrics["jobs"] == 100  # partition a's jobs only
    assert result.best.metrics == evaluate(two_partitions, mixed_jobs, best, 0, "a")
    assert result.baseline["tune"] == evaluate(two_partitions, mixed_jobs, None, 0, "a")
    summary, outcome = run(changed, mixed_jobs)
    a_jobs = [j for j in outcome.finished if j.partition == "a"]
    makespan = max(j.end for j in a_jobs if j.end is not None) - min(j.spec.submit for j in a_jobs)
    assert result.best.metrics["makespan"] == round(makespan, 3) != summary["makespan"]
    # Partition b kept its own policy: its numbers are those of the cluster as declared.
    assert summary["partitions"]["b"] == run(two_partitions, mixed_jobs)[0]["partitions"]["b"]


def test_an_unknown_partition_or_another_partitions_study_is_refused(
    two_partitions: ClusterSpec, mixed_jobs: list[JobSpec], tmp_path: Path
) -> None:
    with pytest.raises(RunError, match=r"^--partition: unknown partition 'z'; known: a, b$"):
        tune(two_partitions, mixed_jobs, SPACE, storage=tmp_path / "z.db", budget=1, partition="z")
    assert not (tmp_path / "z.db").exists()
    tune(two_partitions, mixed_jobs, SPACE, storage=tmp_path / "s.db", budget=1, partition="a")
    with pytest.raises(RunError, match="holds a tune with other partition"):
        tune(two_partitions, mixed_jobs, SPACE, storage=tmp_path / "s.db", budget=2, partition="b")


def test_an_in_memory_study_gives_the_trials_of_a_file(
    cluster: ClusterSpec, jobs: list[JobSpec], tmp_path: Path
) -> None:
    in_memory = tune(cluster, jobs, SPACE, storage=None, budget=4, seed=3)
    on_disk = run_tune(cluster, jobs, tmp_path / "d.db", budget=4)
    assert [t.to_json() for t in in_memory.trials] == [t.to_json() for t in on_disk.trials]
    assert list(tmp_path.iterdir()) == [tmp_path / "d.db"]
