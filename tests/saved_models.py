"""A small learned model saved as `gputwin estimator train` saves it, for the tests that load one.

Source: a synthetic history (no file needed) in which the user decides the run time: `slow` runs
take about 10,000 s and `fast` ones about 10 s, 1,000 jobs each, one a minute on the `infer` task
type, with 1 to 8 GPUs. A model that learned anything predicts `fast` shorter with no live
history at all, where the running mean gives every job the same prior: the two estimators order
a QSSF queue differently. Trained with a small configuration (200-job minimum, 20 rounds), about
a second; `write_model(folder)` writes model.txt and model.json there, `write_trace` the history
as a Helios CSV (for `slurm render --history`). `write_sacct_model(folder)` instead trains on real
sacct history of the SLURM test cluster (tests/estimators/data/sacct-testcluster-learn.txt, its README).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from gputwin.core.model import JobSpec

USERS = {"slow": 10_000.0, "fast": 10.0}


def history(count: int = 2000, user: str | None = None) -> list[JobSpec]:
    """The synthetic history, in submit order (deterministic); `user`: every job is that user's
    (as on the SLURM test cluster, where root submits), and only the job name tells speeds apart."""
    jobs = []
    for i in range(count):
        speed = ("slow", "fast")[i % 2]
        duration = USERS[speed] * (1 + (i % 7) / 10)
        jobs.append(
            JobSpec(f"j{i}", 60.0 * i, duration, 2 ** (i % 4), "infer", user or speed, f"{speed}-job", seq=i)
        )
    return jobs


@cache
def _trained(user: str | None) -> object:
    from gputwin.estimators.model import train
    from gputwin.estimators.online import LearnedConfig

    return train(history(user=user), LearnedConfig(min_train=200, rounds=20))


def write_model(folder: Path, user: str | None = None) -> Path:
    """Train (once per process and `user`) and save into `folder` (created); the folder."""
    from gputwin.estimators.model import Trained, save

    trained = _trained(user)
    assert isinstance(trained, Trained)
    folder.mkdir(parents=True, exist_ok=True)
    save(trained, folder)
    return folder


def write_trace(path: Path, user: str | None = None) -> Path:
    """The history as a Helios CSV (job_id,user,vc,jobname,gpu_num,state,submit_time,duration), the
    format `gputwin slurm history --out` writes sacct's jobs in."""
    lines = ["job_id,user,vc,jobname,gpu_num,state,submit_time,duration"]
    lines += [f"{j.seq},{j.user},{j.task_type},{j.name},{j.gpus},COMPLETED,{int(j.submit)},{int(j.duration)}"
              for j in history(user=user)]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


SACCT_FIXTURE = Path(__file__).parent / "estimators" / "data" / "sacct-testcluster-learn.txt"
# The fixture holds 360 jobs: below the command's default minimum (2 x 1000), as a small site's is.
SACCT_MIN_TRAIN = 100


def sacct_train_args(out: Path) -> list[str]:
    """`gputwin estimator train`'s arguments for the sacct fixture (tests/estimators/data/README.md)."""
    return ["estimator", "train", "--trace", str(SACCT_FIXTURE), "--format", "sacct",
            "--min-train", str(SACCT_MIN_TRAIN), "--out", str(out)]  # fmt: skip


def write_sacct_model(folder: Path) -> Path:
    """Train on the SLURM test cluster's sacct history (SACCT_FIXTURE) by running
    `gputwin estimator train --trace FIXTURE --format sacct` and save the model into `folder`
    (created; absent or empty); the folder. Jobs are root's, named fast-learn (1-3 s),
    mid-learn (6-10 s) and slow-learn (15-28 s), in partition (task type) `batch`."""
    from click.testing import CliRunner

    from gputwin.cli.main import cli

    done = CliRunner().invoke(cli, sacct_train_args(folder))
    if done.exit_code != 0:
        raise AssertionError(f"gputwin estimator train failed ({done.exit_code}): {done.output}")
    return folder
