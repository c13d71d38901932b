"""GPU shares in a snapshot (a live cluster's fractional jobs, e.g. SLURM GRES shards): a GPU held by
shares is not free to a forecast, shares stay on the GPU the live cluster put them on, and the
snapshot file keeps `gpu_milli` / `share_gpu`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gputwin.core.model import NodeSpec, SwitchSpec, TopologySpec
from gputwin.twin.forecast import forecast
from gputwin.twin.seed import default_cluster
from gputwin.twin.snapfile import load_snapshot, save_snapshot
from gputwin.twin.snapshot import PendingJob, RunningJob, SnapPartition, Snapshot

NOW = 1000.0
ENDS_AT = 1600.0  # the shares' time limit runs out then: the earliest a whole GPU can be free


def two_gpus(running: tuple[RunningJob, ...], pending: tuple[PendingJob, ...] = ()) -> Snapshot:
    """One node with 2 GPUs in partition `p`, at t = NOW."""
    topo = TopologySpec("t", (SwitchSpec("s"),), (NodeSpec("n1", 2, "s"),))
    return Snapshot(NOW, "test", topo, (SnapPartition("p", ("n1",)),), running, pending)


def shares(*gpus: int) -> tuple[RunningJob, ...]:
    """A 250-milli share on each device index given (as SLURM's gres_detail `shard:1(IDX:i)` says)."""
    return tuple(RunningJob(f"s{k}", "p", 0.0, 400.0, (("n1", 1),), time_limit=ENDS_AT - 400.0, gpu_milli=250,
                            share_gpu=gpu) for k, gpu in enumerate(gpus))  # fmt: skip


WHOLE = (PendingJob("w", "p", 900.0, 1, num_nodes=1, time_limit=60.0),)


def start_of_whole_job(running: tuple[RunningJob, ...]) -> float | None:
    snap = two_gpus(running, WHOLE)
    result = forecast(default_cluster(snap), snap, samples=4, seed=1, horizon=3600.0)
    assert not result.left_out, result.left_out
    return result.jobs[0].start_p50


def test_shares_on_both_gpus_leave_no_gpu_free() -> None:
    # Shares on GPUs 0 and 1: the whole-GPU job waits for one of them to end (by their time limit).
    start = start_of_whole_job(shares(0, 1))
    assert start is not None and NOW < start <= ENDS_AT
    # The same shares without their devices are packed onto one GPU, which leaves the other free:
    # what the live cluster did not do, so the device index is what keeps the forecast true.
    assert start_of_whole_job(shares(-1, -1)) == NOW
    # Two shares on one GPU hold just that one.
    assert start_of_whole_job(shares(0, 0)) == NOW


def test_a_pending_share_fits_beside_running_ones() -> None:
    share = (PendingJob("q", "p", 900.0, 1, num_nodes=1, time_limit=60.0, gpu_milli=500),)
    snap = two_gpus(shares(0, 1), share)
    result = forecast(default_cluster(snap), snap, samples=2, seed=1, horizon=3600.0)
    assert result.jobs[0].start_p50 == NOW  # 250 + 500 <= 1000 on either GPU


def test_shares_over_one_gpu_are_left_out_by_name() -> None:
    # Five quarter shares on GPU 0 do not fit on it: the fifth cannot be held, and says so.
    snap = two_gpus(shares(0, 0, 0, 0, 0))
    result = forecast(default_cluster(snap), snap, samples=1, horizon=60.0)
    assert [job for job, _ in result.left_out] == ["s4"]
    assert "no room for 250 more" in dict(result.left_out)["s4"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"gpu_milli": 0}, "gpu_milli"),
        ({"gpu_milli": 1001}, "gpu_milli"),
        ({"slots": (("n1", 2),)}, "gpu_milli"),  # a share is of one GPU
        ({"share_gpu": -2}, "share_gpu"),
        ({"gpu_milli": 1000}, "share_gpu"),  # a device index names a share's GPU only
    ],
)
def test_bad_shares_are_problems(change: dict[str, object], field: str) -> None:
    run = dataclasses.replace(shares(0)[0], **change)  # type: ignore[arg-type]
    assert [f for f, _ in two_gpus((run,)).problems()] == [f"running[0].{field}"]


def test_the_snapshot_file_keeps_shares(tmp_path: Path) -> None:
    snap = two_gpus(shares(0, 1), (dataclasses.replace(WHOLE[0], gpu_milli=125),))
    path = tmp_path / "snap.json"
    save_snapshot(snap, path)
    assert load_snapshot(path) == snap
