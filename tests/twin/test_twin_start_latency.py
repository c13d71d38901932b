"""The live scheduler's start latency in a forecast (`Snapshot.start_latency_s`, issue 15 item 5).

A chain of FIFO jobs that each need the whole cluster: each one's room appears when the one before
ends, so with latency L the k-th pending job (0-based) starts (k + 1) * L later than with none, and
ends that much later too. 0 must reproduce the instant starts exactly. The latency also travels
through a snapshot file and is refused out of range.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gputwin.core.model import NodeSpec, SwitchSpec, TopologySpec
from gputwin.twin.forecast import forecast
from gputwin.twin.seed import default_cluster
from gputwin.twin.snapfile import SnapshotError, dump_snapshot, load_snapshot, save_snapshot
from gputwin.twin.snapshot import PendingJob, RunningJob, SnapPartition, Snapshot

NOW = 1000.0
RUN = (100.0, 40.0, 250.0, 10.0)  # the chain's run times, known exactly (estimates, sigma 0)


def chain(latency: float) -> Snapshot:
    """One 8-GPU node busy until NOW + 50; four 8-GPU jobs queued behind it, FIFO."""
    topo = TopologySpec("t", (SwitchSpec("s"),), (NodeSpec("n1", 8, "s"),))
    running = (RunningJob("r", "p", 0.0, NOW - 10.0, (("n1", 8),), estimate=60.0),)
    pending = tuple(PendingJob(f"j{k}", "p", NOW - 5.0 + k, 8, estimate=run) for k, run in enumerate(RUN))
    return Snapshot(NOW, "test", topo, (SnapPartition("p", ("n1",)),), running, pending, start_latency_s=latency)


def predicted(snap: Snapshot) -> list[float | None]:
    """Start then end, per pending job in queue order, flattened."""
    result = forecast(default_cluster(snap), snap, samples=1, sigma=0.0, horizon=1e5)
    return [t for j in result.jobs for t in (j.start_p50, j.end_p50)]


# With no latency: r ends at NOW + 50, then each job starts when the one before ends.
INSTANT = [(1050.0, 1150.0), (1150.0, 1190.0), (1190.0, 1440.0), (1440.0, 1450.0)]


@pytest.mark.parametrize(
    ("latency", "shifts"),
    [
        pytest.param(0.0, [0.0, 0.0, 0.0, 0.0], id="zero-is-todays-instant-start"),
        pytest.param(0.5, [0.5, 1.0, 1.5, 2.0], id="half-a-second-per-link"),
        pytest.param(2.0, [2.0, 4.0, 6.0, 8.0], id="two-seconds-per-link"),
    ],
)
def test_latency_delays_each_start_in_a_fifo_chain(latency: float, shifts: list[float]) -> None:
    got = predicted(chain(latency))
    want = [t + d for (start, end), d in zip(INSTANT, shifts) for t in (start, end)]
    assert got == pytest.approx(want, abs=1e-9)


def test_latency_half_a_second_moves_starts_by_exactly_that_per_link() -> None:
    base, late = predicted(chain(0.0)), predicted(chain(0.5))
    gaps = [b - a for a, b in zip(base[::2], late[::2])]  # type: ignore[operator]
    assert gaps == pytest.approx([0.5, 1.0, 1.5, 2.0], abs=1e-9)


def test_latency_survives_a_snapshot_file(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    save_snapshot(chain(0.47), path)
    assert load_snapshot(path).start_latency_s == 0.47


def test_a_file_without_the_latency_reads_as_zero(tmp_path: Path) -> None:
    data = dump_snapshot(chain(0.47))
    del data["start_latency_s"]
    assert "start_latency_s" not in dump_snapshot(chain(0.0))  # 0 is left out: older files stay byte-identical
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    assert load_snapshot(path).start_latency_s == 0.0


@pytest.mark.parametrize(
    ("value", "reason"),
    [pytest.param(-0.1, "greater than or equal", id="negative"),
     pytest.param(7200.0, "must be in [0, 3600] seconds", id="over-an-hour")],
)  # fmt: skip
def test_out_of_range_latency_is_one_line(tmp_path: Path, value: float, reason: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**dump_snapshot(chain(0.0)), "start_latency_s": value}))
    with pytest.raises(SnapshotError, match=r"start_latency_s: .*") as caught:
        load_snapshot(path)
    assert reason in str(caught.value) and "\n" not in str(caught.value)


def test_problems_name_the_field() -> None:
    assert dataclasses.replace(chain(0.0), start_latency_s=-1.0).problems() == [
        ("start_latency_s", "must be in [0, 3600] seconds")]  # fmt: skip
