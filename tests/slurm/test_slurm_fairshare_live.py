"""Fair-share order on the real test cluster: the account that used the GPUs waits, the other starts.

The shared-lab spec (tests/slurm/data/shared-lab-live.yaml: vision shares 2, speech 1, half-life one
hour, partition `shared` = gpu[01-04], 32 GPUs) goes live through `gputwin slurm apply`, as in
test_slurm_tenancy_live.py (its fixture pattern and clean-up). vision, the heavy user, runs 16 GPUs
while root's account fills the other 16; once slurmctld's decay pass has counted vision's usage
(every PriorityCalcPeriod: scripts/slurm/start.sh sets 1 minute, SLURM's minimum, instead of the
default 5), vision and then speech queue one 8-GPU job each and 8 GPUs are freed: speech's job,
submitted second, must start and vision's wait. gputwin's own fairshare (core.fairness, same
weights and half-life) is asked the same question and must answer the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner
from gputwin.adapters.slurm.accounts import SlurmAccountsError, default_runner, read_live
from gputwin.adapters.slurm.apply_all import apply_everything
from gputwin.adapters.slurm.errors import SlurmCommandError
from gputwin.adapters.slurm.render import render
from polling import wait_for  # tests/polling.py
from slurm_testcluster import Cluster, managed_snapshot
from test_slurm_tenancy_live import LAB, _remove_ours

from gputwin.api.loader import load_cluster
from gputwin.cli.main import cli
from gputwin.core.fairness import Fairness
from gputwin.core.model import JobSpec
from gputwin.core.state import JobState

EIGHT = ("-p", "shared", "-N1", "-n1", "--gres=gpu:h100:8")  # one whole node of the partition
USER = {"vision": "root", "speech": "daemon"}  # the lab's users; root submits as daemon with --uid
USAGE_TIMEOUT = 200.0  # 16 GPU-minutes take at most two decay passes (60 s apart); slack for a loaded host


@pytest.fixture(scope="module")
def lab(slurm_cluster: Cluster, conf_dir: Path) -> Iterator[Path]:
    """The shared-lab setup applied with the CLI; our jobs, accounts and QOS removed afterwards."""
    _remove_ours(slurm_cluster)
    try:
        # One apply from the cluster's own Fair Tree (conf_dir put the files back): 22.05 normalizes
        # an association's shares when it is loaded, by the PriorityFlags of that moment, so apply
        # must leave Fair Tree before it adds the accounts. It used to add them first: the users kept
        # Fair Tree's per-level NormShares (1.0) and this test failed (a second apply was its workaround).
        assert _live_flags(slurm_cluster) == "", "the test cluster's base slurm.conf should be on Fair Tree"
        _apply(conf_dir)
        yield conf_dir
    finally:
        slurm_cluster.cancel_submitted()
        _remove_ours(slurm_cluster)


def _live_flags(cluster: Cluster) -> str:
    found = re.search(r"^PriorityFlags\s*=\s*(\S*)$", cluster.run("scontrol", "show", "config").stdout, re.MULTILINE)
    assert found is not None
    return found.group(1)


def test_accounts_failing_after_the_flags_changed_restore_the_files(slurm_cluster: Cluster, conf_dir: Path) -> None:
    """Leaving Fair Tree, apply writes the files first; when the accounts then fail (an injected
    failure of the last sacctmgr command, the runner is real otherwise), the accounts are undone
    and the files restored and live again (Fair Tree back). Runs before `lab` is set up."""
    _remove_ours(slurm_cluster)
    files, accounts = managed_snapshot(conf_dir), read_live("gputwin")
    assert _live_flags(slurm_cluster) == ""

    def failing_last(argv: Sequence[str]) -> str:
        if list(argv[2:5]) == ["add", "user", "daemon"]:
            raise SlurmCommandError("sacctmgr exited with status 1: injected failure")
        return default_runner(argv)

    with pytest.raises(SlurmAccountsError, match="rolled back: 5 sacctmgr command.*files rolled back"):
        apply_everything(render(load_cluster(LAB)), conf_dir, runner=failing_last)
    assert managed_snapshot(conf_dir) == files and read_live("gputwin") == accounts
    assert _live_flags(slurm_cluster) == ""


def _apply(conf_dir: Path) -> None:
    done = CliRunner().invoke(cli, ["slurm", "apply", "--cluster", str(LAB), "--conf-dir", str(conf_dir)])
    assert done.exit_code == 0, done.output


def _states(cluster: Cluster, jobs: list[str]) -> dict[str, str]:
    out = cluster.run("squeue", "-h", "-j", ",".join(jobs), "-o", "%i|%T").stdout
    return dict(line.split("|", 1) for line in out.split())


def _all_in(cluster: Cluster, jobs: list[str], state: str) -> dict[str, str] | None:
    states = _states(cluster, jobs)
    return states if len(states) == len(jobs) and set(states.values()) == {state} else None


def _shares(cluster: Cluster) -> dict[str, dict[str, float]]:
    """sshare's user rows of our two accounts: NormShares, RawUsage, EffectvUsage, FairShare, and
    from GrpTRESRaw the decayed usage per TRES of cpu and gres/gpu (whole TRES-minutes)."""
    out = cluster.run("sshare", "-P", "-n", "-a", "-A", "vision,speech",
                      "-o", "Account,User,NormShares,RawUsage,EffectvUsage,FairShare,GrpTRESRaw").stdout  # fmt: skip
    rows = (line.split("|") for line in out.splitlines())
    names = ("norm", "raw", "effective", "factor")
    return {f"{r[0].strip()}/{r[1]}": {**dict(zip(names, map(float, r[2:6]))), **_tres(r[6])}
            for r in rows if len(r) == 7}  # fmt: skip


def _tres(raw: str) -> dict[str, float]:
    pairs = dict(item.split("=", 1) for item in raw.split(",") if "=" in item)
    return {"cpu_min": float(pairs.get("cpu", 0)), "gpu_min": float(pairs.get("gres/gpu", 0))}


def _vision_usage_counted(cluster: Cluster) -> dict[str, dict[str, float]] | None:
    """Once decay passes counted vision's 16 GPUs for a minute or more (GrpTRESRaw is in whole
    minutes: 16 of them, so that a CPU weight of 1 would show as 2 more, beyond rounding)."""
    shares = _shares(cluster)
    vision = shares.get("vision/root", {})
    return shares if vision.get("factor", 1.0) < 1.0 and vision.get("gpu_min", 0.0) >= 16 else None


def _sprio(cluster: Cluster, jobs: list[str]) -> dict[str, tuple[float, int]]:
    """Per pending job: (normalized fair-share factor, job priority)."""
    out = cluster.run("sprio", "-h", "-j", ",".join(jobs), "-o", "%i|%f|%Y").stdout
    return {r[0].strip(): (float(r[1]), int(r[2])) for r in (line.split("|") for line in out.split())}


def _twin_order(busy_seconds: float) -> list[str]:
    """gputwin's fairshare order for the same situation: vision held 16 GPUs for `busy_seconds`,
    speech nothing; same weights and half-life as the lab (its SchedulingPolicy)."""
    fair = Fairness("fairshare", 32, half_life=3600.0, weights={"vision": 2.0, "speech": 1.0},
                    tenant_of=lambda job: job.spec.user)  # fmt: skip
    spec = JobSpec("heavy", 0.0, busy_seconds, 16, "train", user="vision")
    heavy = JobState(spec, "shared", 16, busy_seconds, 0.0)
    fair.change(0.0, heavy, 16)
    fair.change(busy_seconds, heavy, -16)
    fair.at(busy_seconds)
    return sorted(("vision", "speech"), key=fair.key)


def test_light_account_starts_before_heavy_one(slurm_cluster: Cluster, lab: Path) -> None:
    """Fails when fair share does not order: with PriorityWeightFairshare=0 (fairness none) both
    queued jobs have the same priority and vision's, submitted first, starts (checked by hand);
    with the weights swapped (vision 1, speech 2) the NormShares ratio check fails."""
    config = slurm_cluster.run("scontrol", "show", "config").stdout
    assert re.search(r"^PriorityCalcPeriod\s*=\s*00:01:00$", config, re.MULTILINE), (
        "the test cluster's slurm.conf must set PriorityCalcPeriod=1 (scripts/slurm/start.sh; restart it)"
    )
    heavy = [slurm_cluster.submit("-A", "vision", *EIGHT, command="sleep 600") for _ in range(2)]
    filler = [slurm_cluster.submit("-A", "root", *EIGHT, command="sleep 600") for _ in range(2)]
    wait_for("the partition full (2 vision + 2 root jobs running)",
             lambda: _all_in(slurm_cluster, heavy + filler, "RUNNING"), timeout=60, interval=0.5)  # fmt: skip
    shares = wait_for("a decay pass counting vision's usage (FairShare < 1, 16 GPU-minutes)",
                      lambda: _vision_usage_counted(slurm_cluster), timeout=USAGE_TIMEOUT, interval=2,
                      on_timeout=lambda: repr(_shares(slurm_cluster)))  # fmt: skip
    vision, speech = shares["vision/root"], shares["speech/daemon"]
    assert speech["raw"] == 0.0 and speech["factor"] == 1.0  # the light account used nothing
    own = shares["vision/"]  # the account's row
    assert own["norm"] == pytest.approx(2 * shares["speech/"]["norm"], rel=1e-3)  # the lab's 2:1 weights
    assert vision["norm"] == own["norm"]  # vision's one user carries its account's shares
    # Usage in GPU-seconds, as the twin counts it (TRESBillingWeights=GRES/gpu=1.0; SLURM's default
    # bills CPUs, 1 per job here, which made RawUsage an eighth of the GPU-seconds).
    # RawUsage (seconds) is the GPU-minutes' 60 times, and CPU-minutes (2 CPUs) do not add to it.
    assert vision["raw"] / 60 == pytest.approx(vision["gpu_min"], abs=1.0), shares
    # NO_FAIR_TREE's classic factor, the one the twin orders by: F = 2^(-EffectvUsage / NormShares).
    assert vision["factor"] == pytest.approx(2 ** (-vision["effective"] / own["norm"]), abs=2e-3)

    queued = [slurm_cluster.submit("-A", account, f"--uid={USER[account]}", *EIGHT, command="sleep 600")
              for account in ("vision", "speech")]  # fmt: skip
    wait_for("both queued jobs pending", lambda: _all_in(slurm_cluster, queued, "PENDING"), timeout=30)
    around = [_shares(slurm_cluster)["vision/root"]["factor"]]  # a decay pass may fall in between
    prio = _sprio(slurm_cluster, queued)
    around.append(_shares(slurm_cluster)["vision/root"]["factor"])
    assert prio[queued[1]][0] > prio[queued[0]][0] and prio[queued[1]][1] > prio[queued[0]][1], prio
    # the job carries its user's factor
    assert any(prio[queued[0]][0] == pytest.approx(f, abs=2e-3) for f in around), (prio, around)

    slurm_cluster.run("scancel", heavy[0])  # frees exactly one node: room for one of the two
    started = wait_for("one queued job running",
                       lambda: [j for j, s in _states(slurm_cluster, queued).items() if s == "RUNNING"],
                       timeout=60, interval=0.3)  # fmt: skip
    assert started == [queued[1]], f"speech's job should start first: {_states(slurm_cluster, queued)}"
    assert _states(slurm_cluster, queued)[queued[0]] == "PENDING"  # vision's waits for more room
    assert _twin_order(busy_seconds=120.0) == ["speech", "vision"]  # gputwin orders the same way
