"""Helpers around the real SLURM test cluster (scripts/slurm/*.sh); the fixtures are in conftest.py.

A module with its own name (not conftest) so test modules can import `Cluster` unambiguously.
conftest.py's fixtures:
- ``slurm_cluster`` (session): a running cluster. ``GPUTWIN_SLURM_STATE`` names one already started
  by ``scripts/slurm/start.sh`` (CI starts it first); otherwise the fixture starts one with 16 nodes
  x 8 fake GPUs under 2 leaf switches in a fresh folder and stops it at the end. When SLURM is not
  installed (or we are not root) the tests skip with the reason shown, except under CI (``CI``
  set), where that is a failure: CI installs SLURM, so its absence there is a broken setup.
  The fixture sets ``SLURM_CONF`` in this process for the session, so adapter calls reach it.
`Cluster.submit` / `Cluster.wait_done` submit short GPU jobs and poll sacct until they end;
`start_cluster` / `stop_cluster` run the scripts for a given state folder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from ci_rule import skip_or_fail  # tests/ci_rule.py
from gputwin.adapters.slurm.checks import ENDED_STATES

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "slurm"
NEEDED = ("slurmctld", "slurmd", "slurmdbd", "sacct", "sbatch", "munged", "mariadbd")
# 4 GRES shards per GPU besides the GPUs themselves: test_slurm_shards_live deploys fractions on them.
DEFAULT_LAYOUT = ("--nodes", "16", "--gpus", "8", "--leaves", "2", "--shards", "4")


def read_env_file(path: Path) -> dict[str, str]:
    """The `export NAME=VALUE` lines of a start.sh env.sh."""
    found = {}
    for line in path.read_text().splitlines():
        match = re.fullmatch(r"export ([A-Z_]+)=(.*)", line.strip())
        if match:
            found[match.group(1)] = match.group(2)
    return found


@dataclass
class Cluster:
    """A running test cluster: its state folder, client environment, and the jobs tests submitted."""

    state: Path
    env: dict[str, str]
    submitted: list[str] = field(default_factory=list)

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **self.env}, check=False)  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
        return done

    def submit(self, *args: str, command: str = "sleep 1") -> str:
        """sbatch a short job (output discarded) and return its job id."""
        out = self.run("sbatch", "--parsable", "--output=/dev/null", "--chdir=/tmp", *args, "--wrap", command)
        job_id = out.stdout.strip().split(";")[0]
        self.submitted.append(job_id)
        return job_id

    def wait_done(self, job_ids: list[str], expected_records: int, timeout: float = 90) -> dict[str, str]:
        """Poll sacct until `expected_records` allocations of these jobs are in a final state."""
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            out = self.run("sacct", "-n", "-P", "-X", "-D", "-j", ",".join(job_ids), "-o", "JobID,State")
            states = dict(line.split("|", 1) for line in out.stdout.splitlines() if "|" in line)
            finished = {
                job: state.split()[0] for job, state in states.items() if state.split()[0] in ENDED_STATES
            }
            if len(finished) >= expected_records and len(finished) == len(states):
                return finished
            time.sleep(0.3)
        raise AssertionError(f"jobs not finished within {timeout:g} s: {states}")

    def wait_in_history(self, job_id: str, name: str, timeout: float = 60) -> None:
        """Poll until sacct history shows the finished job as it will stay: slurmdbd settles a
        finished job's record a moment after sacct first shows it COMPLETED (its name reads
        "allocation" at first), and `--state` leaves out a job that ended in the second "now" names."""
        from gputwin.adapters.slurm import sacct_history

        deadline = time.monotonic() + timeout
        while not any(
            j.job_id == job_id and j.name == name
            for j in sacct_history("now-1hours", "now", states=["CD"]).jobs
        ):
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} not settled in sacct within {timeout:g} s")
            time.sleep(0.5)

    def cancel_submitted(self) -> None:
        if self.submitted:
            self.run("scancel", *self.submitted, check=False)


def start_cluster(state: Path, *extra: str) -> None:
    started = subprocess.run(
        ["bash", str(SCRIPTS / "start.sh"), "--state", str(state), *(extra or DEFAULT_LAYOUT)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if started.returncode != 0:
        pytest.fail(
            f"scripts/slurm/start.sh failed ({started.returncode}):\n{started.stderr[-3000:]}", pytrace=False
        )


def stop_cluster(state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPTS / "stop.sh"), "--state", str(state)],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def check_installed() -> None:
    missing = [name for name in NEEDED if shutil.which(name) is None]
    if missing:
        skip_or_fail(
            f"SLURM is not installed (missing {', '.join(missing)}): run `bash scripts/slurm/install.sh` as root"
        )
    if os.geteuid() != 0:
        skip_or_fail("the SLURM test cluster runs its daemons as root; run the tests as root")


def managed_snapshot(conf_dir: Path) -> dict[str, bytes | None]:
    """The bytes of every file gputwin manages in `conf_dir` (None: absent), to compare or restore."""
    from gputwin.adapters.slurm.render import MANAGED_FILES

    return {name: (conf_dir / name).read_bytes() if (conf_dir / name).exists() else None
            for name in MANAGED_FILES}  # fmt: skip
