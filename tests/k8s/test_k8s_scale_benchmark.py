"""benchmarks/kube_scale.py: its bookkeeping on hand-made watch events, and a tiny run on a real control plane.

The tiny run (20 KWOK nodes, 100 pods of 1-3 s) starts its own control plane through
scripts/k8s/start.sh, like the benchmark always does; it needs the binaries of scripts/k8s/build.sh
(the `k8s_bin` fixture skips, or fails under CI, without them). No timing is asserted: only the
JSON report's keys and the invariants (every pod bound, none over capacity, none twice, none lost).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gputwin.api.convert import cluster_spec
from gputwin.api.v1alpha1 import GPUPartition, SchedulingPolicy, SwitchTopology

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from kube_scale import cluster_objects, leaf_of, workload
from kube_scale_lib import Trace, Tracker, breakdown, percentile, read_trace

KEYS = {"gputwin_pods_per_s", "kube_scheduler_pods_per_s", "ratio", "p99_bind_s", "overallocated_gpus",
        "lost_jobs", "double_bound"}  # fmt: skip


def pod_event(kind: str, uid: str, gpus: int, node: str | None = None, phase: str = "Pending",
              job: str | None = None, rv: int = 1) -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {"containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if node:
        spec["nodeName"] = node
    labels = {"bench.gputwin.io/phase": "a", "bench.gputwin.io/job": job or uid}
    meta = {"uid": uid, "name": uid, "namespace": "ns", "labels": labels, "resourceVersion": str(rv)}
    return {"type": kind, "object": {"metadata": meta, "spec": spec, "status": {"phase": phase}}}


# (events as (type, uid, gpus, node, phase, job)), expected (overallocated, double bound, bound)
Event = tuple[str, str, int, "str | None", str, "str | None"]
CASES: dict[str, tuple[list[Event], tuple[int, int, int]]] = {
    "two 8-GPU pods on one node at once": (
        [("ADDED", "p1", 8, None, "Pending", None), ("ADDED", "p2", 8, None, "Pending", None),
         ("MODIFIED", "p1", 8, "n0", "Running", None), ("MODIFIED", "p2", 8, "n0", "Running", None)],
        (8, 0, 2)),
    "the second binds after the first finished": (
        [("ADDED", "p1", 8, None, "Pending", None), ("ADDED", "p2", 8, None, "Pending", None),
         ("MODIFIED", "p1", 8, "n0", "Running", None), ("MODIFIED", "p1", 8, "n0", "Succeeded", None),
         ("MODIFIED", "p2", 8, "n0", "Running", None)],
        (0, 0, 2)),
    "a deletion frees GPUs too": (
        [("ADDED", "p1", 4, "n0", "Running", None), ("DELETED", "p1", 4, "n0", "Running", None),
         ("ADDED", "p2", 8, "n0", "Running", None)],
        (0, 0, 2)),
    "a node changed under a bound pod": (
        [("ADDED", "p1", 1, "n0", "Running", None), ("MODIFIED", "p1", 1, "n1", "Running", None)],
        (0, 1, 1)),
    "one job bound under two pods": (
        [("ADDED", "p1", 1, "n0", "Running", "j"), ("ADDED", "p2", 1, "n1", "Running", "j")],
        (0, 1, 2)),
    "3 + 4 + 1 fill a node exactly": (
        [("ADDED", "p1", 3, "n0", "Running", None), ("ADDED", "p2", 4, "n0", "Running", None),
         ("ADDED", "p3", 1, "n0", "Running", None)],
        (0, 0, 3)),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_tracker_counts_overallocation_and_double_binding(name: str) -> None:
    events, (overallocated, double, bound) = CASES[name]
    tracker = Tracker({"n0": 8, "n1": 8})
    for i, (kind, uid, gpus, node, phase, job) in enumerate(events):
        tracker.feed(pod_event(kind, uid, gpus, node, phase, job, rv=i + 1), now=float(i))
    view = tracker.phase_view("a")
    assert (tracker.overallocated_gpus("a"), view.double_bound, len(view.latencies)) == (
        overallocated, double, bound)  # fmt: skip


def test_tracker_tells_its_own_overallocation_from_other_pods() -> None:
    tracker = Tracker({"n0": 8})
    tracker.feed(pod_event("ADDED", "other", 6, "n0", "Running"), now=0.0)  # phase a's pod still runs
    mine = pod_event("ADDED", "mine", 4, "n0", "Running")
    mine["object"]["metadata"]["labels"]["bench.gputwin.io/phase"] = "b"
    tracker.feed(mine, now=1.0)
    assert (tracker.overallocated_gpus("b"), tracker.overallocated_gpus("b", own=True)) == (2, 0)
    assert tracker.overallocated_gpus("a") == 0  # phase a's binding did not overfill the node


def test_tracker_latency_room_and_lost() -> None:
    tracker = Tracker({"n0": 8})
    tracker.feed(pod_event("ADDED", "big", 8), now=0.0)
    tracker.feed(pod_event("ADDED", "small", 1), now=0.5)
    tracker.feed(pod_event("MODIFIED", "big", 8, "n0", "Running"), now=2.0)  # room since the start
    tracker.feed(pod_event("ADDED", "late", 1), now=3.0)
    view = tracker.phase_view("a")
    assert view.latencies == [2.0] and view.after_room == [2.0]
    assert view.lost == 0  # unbound, but no node has room for them now
    tracker.feed(pod_event("MODIFIED", "big", 8, "n0", "Succeeded"), now=10.0)  # room from t=10
    assert tracker.phase_view("a").lost == 2  # room now, still unbound
    tracker.feed(pod_event("MODIFIED", "small", 1, "n0", "Running"), now=10.5)
    view = tracker.phase_view("a")
    assert view.latencies == [2.0, 10.0] and view.after_room == [2.0, 0.5]
    assert view.after_freed == [0.5]  # only "small" waited for capacity to free (room from t=10)
    assert tracker.bound_count("a") == 2 and tracker.live_count("a") == 3 and view.lost == 1


def test_ready_and_bound_names_the_event_a_scheduler_had_to_see() -> None:
    tracker = Tracker({"n0": 8})
    tracker.feed(pod_event("ADDED", "big", 8, rv=3), now=0.0)
    tracker.feed(pod_event("ADDED", "small", 1, rv=4), now=0.5)
    tracker.feed(pod_event("ADDED", "late", 1, rv=5), now=0.6)
    tracker.feed(pod_event("MODIFIED", "big", 8, "n0", "Running", rv=6), now=2.0)
    tracker.feed(pod_event("MODIFIED", "big", 8, "n0", "Succeeded", rv=9), now=10.0)  # room from here
    tracker.feed(pod_event("MODIFIED", "small", 1, "n0", "Running", rv=12), now=10.5)
    ready = {name.removeprefix("ns/"): r for name, r in tracker.ready_and_bound("a").items()}
    assert ready["big"] == (0.0, 2.0, False, 3)  # room from the start: its own ADDED is what counts
    assert ready["small"] == (10.0, 10.5, True, 9)  # room came with big's end, rv 9


def test_workload_is_seeded_and_in_range() -> None:
    first, again = workload(500, 7, (5, 30)), workload(500, 7, (5, 30))
    assert first == again and first != workload(500, 8, (5, 30))
    assert {j.gpus for j in first} == {1, 2, 4, 8}
    assert all(5 <= j.seconds <= 30 for j in first)


@pytest.mark.parametrize("nodes", [20, 100, 1000])
def test_cluster_objects_cover_every_node_under_16_leaves(nodes: int) -> None:
    objs = {o["kind"]: o for o in cluster_objects(nodes)}
    spec = cluster_spec(SwitchTopology.model_validate(objs["SwitchTopology"]),
                        [GPUPartition.model_validate(objs["GPUPartition"])],
                        [SchedulingPolicy.model_validate(objs["SchedulingPolicy"])])  # fmt: skip
    assert sorted(n.name for n in spec.topology.nodes) == sorted(f"bench-node-{i}" for i in range(nodes))
    assert {n.switch for n in spec.topology.nodes} == {f"leaf{leaf_of(i, nodes)}" for i in range(nodes)}
    assert len({n.switch for n in spec.topology.nodes}) == min(16, nodes)
    assert len(spec.partitions[0].nodes) == nodes


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (50.0, 99.0, 100.0)
    assert percentile([], 50) is None


def test_tiny_run_on_a_real_control_plane(k8s_bin: Path) -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "kube_scale.py"), "--nodes", "20", "--pods", "100",
               "--durations", "1-3", "--stall", "30", "--restart", "--json"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert KEYS <= set(report), KEYS - set(report)
    assert (report["overallocated_gpus"], report["lost_jobs"], report["double_bound"]) == (0, 0, 0), report
    a = report["phases"]["kube-scheduler"]
    assert a["bound"] == 100 and a["ended"] == "all bound" and report["kube_scheduler_pods_per_s"] > 0
    if report["gputwin_available"]:
        b = report["phases"]["gputwin"]
        assert b["bound"] == 100 and b["ended"] == "all bound" and b["restarts"] == 1, b
        assert report["ratio"] == pytest.approx(report["gputwin_pods_per_s"] / report["kube_scheduler_pods_per_s"],
                                                rel=0.01)  # fmt: skip
        assert b["scheduler_requests_per_job"] > 0 and b["peak_rss_mb"] > 0
    else:  # the backend is missing: phase B says why instead of inventing figures
        assert report["gputwin_note"] and report["gputwin_pods_per_s"] is None and report["ratio"] is None
    assert "pods bound per second" in done.stderr  # the table goes to stderr with --json


# pod -> (ready, binding seen, waited for capacity, resourceVersion of the event that gave it room), its
# trace record (snap, decided, bound), expected parts. Snapshots at 1, 2, 3, 5 s held rvs 10, 20, 30, 50.
BREAKDOWN = {
    "ns/first-pass-after-room": ((1.5, 3.3, True, 15), (2.0, 2.1, 3.2),
                                 {"loop": 0.5, "copy": 0.0, "policy": 0.0, "pass": 0.1, "bind": 1.1, "watch": 0.1,
                                  "scheduler": 1.7}),
    "ns/passed-over-by-the-policy": ((0.5, 5.6, False, 5), (5.0, 5.2, 5.5),
                                     {"loop": 0.5, "copy": 0.0, "policy": 4.0, "pass": 0.2, "bind": 0.3, "watch": 0.1,
                                      "scheduler": 1.0}),
    "ns/the-operators-copy-lagged": ((0.5, 5.6, True, 25), (5.0, 5.2, 5.5),
                                     {"loop": 0.5, "copy": 2.0, "policy": 2.0, "pass": 0.2, "bind": 0.3, "watch": 0.1,
                                      "scheduler": 3.0}),
    "ns/decided-before-the-benchmark-saw-room": ((4.0, 4.5, True, 45), (3.0, 3.1, 4.4),
                                                 {"loop": 0.0, "copy": 0.0, "policy": 0.0, "pass": 0.1, "bind": 1.3,
                                                  "watch": 0.1, "scheduler": 1.4}),
}  # fmt: skip


@pytest.mark.parametrize("name", list(BREAKDOWN))
def test_breakdown_splits_the_wait_once_the_node_had_room(name: str) -> None:
    ready, (snap, decided, bound), expected = BREAKDOWN[name]
    record = {"pod": name, "snap": snap, "decided": decided, "bound": bound, "ok": True}
    parts = breakdown({name: ready}, Trace([1.0, 2.0, 3.0, 5.0], [10, 20, 30, 50], {name: record}))
    assert {p: v[0] for p, v in parts.items()} == pytest.approx(expected)
    waited = breakdown({name: ready}, Trace([1.0], [10], {name: record}), waited_only=True)["scheduler"]
    assert len(waited) == int(ready[2])


def test_a_trace_without_resource_versions_counts_no_copy_lag() -> None:
    record = {"pod": "ns/a", "snap": 5.0, "decided": 5.2, "bound": 5.5, "ok": True}
    parts = breakdown({"ns/a": (0.5, 5.6, True, 25)}, Trace([1.0, 2.0, 3.0, 5.0], [0, 0, 0, 0], {"ns/a": record}))
    assert parts["copy"] == [0.0] and parts["policy"] == [4.0]


def test_read_trace_keeps_successful_binds_and_skips_a_torn_line(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    lines = [{"snap": 2.0, "rv": 7}, {"snap": 1.0}, {"pod": "ns/a", "snap": 1.0, "decided": 1.1, "bound": 1.2, "ok": False},
             {"pod": "ns/a", "snap": 2.0, "decided": 2.1, "bound": 2.2, "ok": True}]  # fmt: skip
    trace.write_text("\n".join(json.dumps(line) for line in lines) + '\n{"pod": "ns/b", "sn')
    found = read_trace(trace)
    assert found.snaps == [1.0, 2.0] and found.rvs == [0, 7] and list(found.binds) == ["ns/a"] and found.binds["ns/a"]["snap"] == 2.0
