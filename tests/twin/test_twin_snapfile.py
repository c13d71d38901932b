"""Snapshot files: a snapshot survives the round trip, the file is versioned, and writes are whole."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from gputwin.twin import snapfile
from gputwin.twin.snapfile import SnapshotError, dump_snapshot, load_snapshot, save_snapshot
from gputwin.twin.snapshot import OutOfService, PendingJob, RunningJob, SnapPartition, Snapshot
from gputwin.core.model import NodeSpec, SwitchSpec, TopologySpec

DATA = Path(__file__).resolve().parent / "data"
TOPO = TopologySpec("t", (SwitchSpec("spine"), SwitchSpec("leaf", "spine")),
                    (NodeSpec("n1", 8, "leaf"), NodeSpec("n2", 4, "leaf")))  # fmt: skip
SNAP = Snapshot(
    1000.5, "test", TOPO, (SnapPartition("p", ("n1", "n2")), SnapPartition("q", ("n2",))),
    running=(RunningJob("r1", "p", 10.0, 20.0, (("n1", 8), ("n2", 2)), time_limit=3600.0, user="u", name="j"),),
    pending=(PendingJob("p1", "q", 30.0, 2, 1, 5, 60.0, 40.0, "v", "k"), PendingJob("p2", "p", 31.0, 1)),
    out_of_service=(OutOfService("n2", "drained"),),
)  # fmt: skip


def test_a_snapshot_survives_the_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    save_snapshot(SNAP, path)
    assert load_snapshot(path) == SNAP
    assert json.loads(path.read_text())["version"] == 1


def test_the_golden_fixture_loads_and_saves_to_the_same_bytes(tmp_path: Path) -> None:
    fixture = DATA / "philly-mix1-2vc.snapshot.json"
    save_snapshot(load_snapshot(fixture), tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == fixture.read_bytes()


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "snap.json"
    path.write_text("old")
    monkeypatch.setattr(snapfile.os, "replace", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left")))
    with pytest.raises(OSError):
        save_snapshot(SNAP, path)
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["snap.json"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["running"][0].update(slots=[["n9", 1]]), "running[0].slots"),
        (lambda d: d["running"][0].update(slots=[["n2", 5]]), "running[0].slots"),
        (lambda d: d["running"][0].update(slots=[]), "running[0].slots"),
        (lambda d: d["running"][0].update(start=2000.0), "running[0].start"),
        (lambda d: d["pending"][1].update(job_id="r1"), "pending[1].job_id"),
        (lambda d: d["pending"][0].update(time_limit=0), "pending[0].time_limit"),
        (lambda d: d["partitions"][1].update(nodes=["n3"]), "partitions[1].nodes"),
        (lambda d: d["out_of_service"][0].update(node="n3"), "out_of_service[0].node"),
        (lambda d: d["nodes"][0].update(switch="nope"), "nodes[0].switch"),
        (lambda d: d["switches"][1].update(parent="nope"), "switches[1].parent"),
        (lambda d: d["switches"][0].update(name="core"), "switches[1].parent"),
        (lambda d: d["switches"][0].update(parent="leaf"), "nodes[0].switch"),  # a cycle: "leaf" has a child
    ],
    ids=["unknown-node", "more-gpus-than-the-node", "no-slots", "start-after-now", "duplicate-id", "zero-limit",
         "partition-unknown-node", "out-of-service-unknown-node", "node-on-unknown-switch", "unknown-parent",
         "renamed-root", "cycle"],
)  # fmt: skip
def test_an_inconsistent_snapshot_names_the_field(tmp_path: Path, change, field: str) -> None:
    data = dump_snapshot(SNAP)
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SnapshotError, match="^" + re.escape(f"{path}: {field}: ")):
        load_snapshot(path)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("[]", "kind"),
        ('{"kind": "other", "version": 1}', "kind"),
        ('{"kind": "gputwin-snapshot", "version": 2}', "version"),
        ('{"kind": "gputwin-snapshot", "version": true}', "version"),  # JSON true is not 1
        ('{"kind": "gputwin-snapshot", "version": "1"}', "version"),
        ('{"kind": "gputwin-snapshot"', "document"),
    ],
    ids=["not-an-object", "other-kind", "newer-version", "true-version", "string-version", "cut-short"],
)  # fmt: skip
def test_a_file_of_another_kind_or_version_is_refused(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(SnapshotError, match=re.escape(f": {field}: ")):
        load_snapshot(path)


MIG = Snapshot(
    1000.5, "kube", TOPO, (SnapPartition("p", ("n1", "n2")),),
    running=(RunningJob("m1", "p", 10.0, 20.0, (("n1", 1),), gpu_milli=143, share_gpu=0, model="h100",
                        gpu_profile="1g.10gb"),),
    pending=(PendingJob("m2", "p", 30.0, 1, gpu_milli=429, model="h100", gpu_profile="3g.40gb"),),
)  # fmt: skip


def test_a_mig_profile_and_model_survive_the_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "mig.json"
    save_snapshot(MIG, path)
    assert load_snapshot(path) == MIG
    assert json.loads(path.read_text())["pending"][0]["gpu_profile"] == "3g.40gb"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["pending"][0].update(gpu_profile="1g.10gb; rm"), "pending[0].gpu_profile"),
        (lambda d: d["pending"][0].update(gpu_profile="2g.20gb"), "pending[0].gpu_milli"),
        (lambda d: d["pending"][0].update(gpus=2), "pending[0].gpu_milli"),
        (lambda d: d["running"][0].update(gpu_profile="9g.10gb"), "running[0].gpu_profile"),
    ],
    ids=["not-a-profile-name", "milli-not-the-profiles", "profile-of-two-gpus", "eight-plus-slices"],
)  # fmt: skip
def test_an_inconsistent_mig_job_names_the_field(tmp_path: Path, change, field: str) -> None:
    data = dump_snapshot(MIG)
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SnapshotError, match="^" + re.escape(f"{path}: {field}: ")):
        load_snapshot(path)
