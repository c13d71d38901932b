"""On the real SLURM test cluster: a model trained on the cluster's own sacct history drives
job_submit.lua's estimate table, and slurmctld's QSSF priorities follow its predictions.

History: this test runs a workload whose run time is known at submit (`workload`: the job name
decides it, and the GPU count for `slow-*`), waits for every job to finish, reads the jobs back
with `gputwin slurm history --out` (sacct) and trains on them with `gputwin estimator train
--min-train 100`. Its jobs are told apart from other tests' by a name tag unique to the run.
360 jobs on 16 x 8 GPUs: 69-78 s of wall time at load ~7 on 2 cores (benchmarks/README.md).
The same workload, captured once as raw `sacct -P` output, is
tests/estimators/data/sacct-testcluster-learn.txt (its README; `capture` below is how).
Needs a running cluster (conftest).
"""

from __future__ import annotations

import json
import re
import secrets
import string
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from gputwin.adapters.slurm import sacct_history
from gputwin.adapters.slurm.checks import ENDED_STATES
from gputwin.adapters.slurm.render import PRIORITY_MAX
from slurm_testcluster import Cluster

from gputwin.adapters.traces import read_trace
from gputwin.cli.main import cli
from gputwin.estimators.saved import read

KINDS = ("fast", "mid", "slow")
WORKLOAD_JOBS = 360
WAVE = 60
# The test cluster as it starts (scripts/slurm/start.sh: gpu[01-16], 8 fake h100 each), its
# `batch` partition - where the workload ran, so sacct's jobs carry it as their task type - on QSSF
# with the model trained on them.
LEARNED_CLUSTER = """\
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: testcluster}
spec:
  switches: [{name: spine}, {name: leaf1, parent: spine}, {name: leaf2, parent: spine}]
  nodeGroups:
    - {switch: leaf1, nodes: "gpu[01-08]", gpusPerNode: 8, model: h100}
    - {switch: leaf2, nodes: "gpu[09-16]", gpusPerNode: 8, model: h100}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: batch}
spec: {topology: testcluster, taskTypes: [batch], nodes: "gpu[01-16]", policy: qssf-learned}
---
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: qssf-learned}
spec:
  queue: {policy: qssf}
  estimator: {type: learned, model: sacct-live}
"""


def workload(tag: str, count: int = WORKLOAD_JOBS) -> Iterator[tuple[str, int, int]]:
    """(job name, GPUs, sleep seconds) per job, in submit order, deterministic: `fast-TAG` sleeps
    1-3 s, `mid-TAG` 6-10 s, `slow-TAG` 15-20 s on one GPU and 8 s more on two."""
    for i in range(count):
        kind, turn = KINDS[i % 3], i // 3
        gpus = 1 + turn % 2
        seconds = {"fast": 1 + turn % 3, "mid": 6 + turn % 5, "slow": 15 + turn % 6 + 8 * (gpus - 1)}
        yield f"{kind}-{tag}", gpus, seconds[kind]


def run_workload(cluster: Cluster, tag: str, count: int = WORKLOAD_JOBS, timeout: float = 900) -> str:
    """Submit the workload in waves of WAVE jobs, each once half the jobs before it have ended (so the
    history spans time and the queue never empties: a wave asks ~90 GPUs of 128), poll until sacct
    shows every job finished under its name; the sacct window start (UTC, a second before)."""
    start = cluster.run("date", "-u", "-d", "now-1seconds", "+%Y-%m-%dT%H:%M:%S").stdout.strip()
    ids: list[str] = []
    jobs = list(workload(tag, count))
    for first in range(0, count, WAVE):
        _wait_ended(cluster, ids, len(ids) // 2, timeout)
        ids += [cluster.submit("--partition=batch", f"--gres=gpu:{gpus}", f"--job-name={name}",
                               command=f"sleep {seconds}")
                for name, gpus, seconds in jobs[first : first + WAVE]]  # fmt: skip
    cluster.wait_done(ids, len(ids), timeout=timeout)
    deadline = time.monotonic() + 60
    # slurmdbd settles a finished job's name a moment after sacct first shows it (see wait_in_history).
    while sum(j.name.endswith(f"-{tag}") for j in sacct_history(start, "now", states=["CD"]).jobs) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"the {count} jobs tagged {tag} not settled in sacct within 60 s")
        time.sleep(0.5)
    return start


def _wait_ended(cluster: Cluster, ids: list[str], wanted: int, timeout: float) -> None:
    """Poll sacct until at least `wanted` of `ids` have ended."""
    deadline = time.monotonic() + timeout
    while wanted > 0:
        out = cluster.run("sacct", "-n", "-P", "-X", "-j", ",".join(ids), "-o", "State").stdout
        if sum(line.split()[0] in ENDED_STATES for line in out.splitlines() if line.strip()) >= wanted:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{wanted} of {len(ids)} jobs not ended within {timeout:g} s")
        time.sleep(0.5)


def capture(cluster: Cluster, out: Path, tag: str = "learn") -> Path:
    """Run the workload and write sacct's raw `-P` output of it to `out` (the fixture's recipe)."""
    from gputwin.adapters.slurm.history import sacct_command

    start = run_workload(cluster, tag)
    end = cluster.run("date", "-u", "+%Y-%m-%dT%H:%M:%S").stdout.strip()
    out.write_text(cluster.run(*sacct_command(start, end, states=["CD"])).stdout)
    return out


@pytest.fixture
def learned(slurm_cluster: Cluster, tmp_path: Path) -> tuple[Path, Path, Path, str]:
    """(cluster YAML with batch on qssf-learned, the sacct history file, the model folder, the tag)."""
    tag = "".join(secrets.choice(string.ascii_lowercase) for _ in range(6))
    began = time.monotonic()
    start = run_workload(slurm_cluster, tag)
    print(f"workload of {WORKLOAD_JOBS} jobs ran in {time.monotonic() - began:.0f} s")
    trace, models = tmp_path / "sacct-history.csv", tmp_path / "models"
    runner = CliRunner()
    out = runner.invoke(cli, ["slurm", "history", "--start", start, "--end", "now", "--job-state", "CD",
                              "--out", str(trace)])  # fmt: skip
    assert out.exit_code == 0, out.output
    models.mkdir()
    out = runner.invoke(cli, ["estimator", "train", "--trace", str(trace), "--min-train", "100",
                              "--out", str(models / "sacct-live")])  # fmt: skip
    assert out.exit_code == 0, out.output
    cluster = tmp_path / "learned.yaml"
    cluster.write_text(LEARNED_CLUSTER)
    return cluster, trace, models, tag


def _priority(cluster: Cluster, job_id: str) -> int:
    match = re.search(r"\bPriority=(\d+)", cluster.run("scontrol", "show", "job", job_id).stdout)
    assert match is not None
    return int(match.group(1))


def test_a_model_trained_on_live_sacct_history_sets_qssf_priorities(
    slurm_cluster: Cluster, conf_dir: Path, learned: tuple[Path, Path, Path, str]
) -> None:
    cluster, trace, models, tag = learned
    history = read_trace(trace)
    jobs = history.jobs
    assert sum(j.name.endswith(f"-{tag}") for j in jobs) == WORKLOAD_JOBS  # every job of the run, read back
    out = CliRunner(env={"GPUTWIN_MODEL_DIR": str(models)}).invoke(
        cli, ["slurm", "apply", "--cluster", str(cluster), "--history", str(trace)]
    )
    assert out.exit_code == 0, out.output
    predicted = read(models / "sacct-live").table(jobs, history.origin)
    fast, mid, slow = (round(predicted[("root", f"{kind}-{tag}")]) for kind in KINDS)
    # fast sleeps 1-3 s and mid 6-10 s; sacct adds the launch cost to both (1-2 s on a loaded machine)
    assert fast * 2 < mid < slow  # the model learned the names apart from sacct's records
    lua = (conf_dir / "job_submit.lua").read_text()
    assert all(f'["{kind}-{tag}"] = {seconds},' in lua for kind, seconds in zip(KINDS, (fast, mid, slow)))
    # Held back by --begin so slurmctld's priorities can be read; cancelled below (and by the fixture).
    held = {kind: slurm_cluster.submit("--comment=task:batch", "--gres=gpu:2", f"--job-name={kind}-{tag}",
                                       "--begin=now+3600") for kind in KINDS}  # fmt: skip
    priorities = {kind: _priority(slurm_cluster, job_id) for kind, job_id in held.items()}
    slurm_cluster.run("scancel", *held.values())
    # qssf: PRIORITY_MAX - seconds x GPUs, so the job predicted shortest goes first.
    assert priorities == {kind: PRIORITY_MAX - s * 2 for kind, s in zip(KINDS, (fast, mid, slow))}
    assert priorities["fast"] > priorities["mid"] > priorities["slow"]
    summary = re.search(r"history: (\{.*\})", out.stderr)
    names = {(j.user, j.name) for j in jobs}
    assert summary is not None and json.loads(summary.group(1))["estimates"] == len(names)
