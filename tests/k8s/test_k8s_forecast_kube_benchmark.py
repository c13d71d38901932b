"""benchmarks/forecast_kube.py offline: its start-latency waves' bookkeeping on hand-made watch events,
its GPUJobs, its options. (The run itself needs a control plane: `python benchmarks/forecast_kube.py`;
benchmarks/README.md has its figures.) These also keep the script importable: its imports from the
kube_scale modules broke once, unnoticed, when those were split.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from gputwin.api.v1alpha1 import GPUJob

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from forecast_accuracy import Job  # noqa: E402
from forecast_kube import gpujob, parse_args, room_gaps, room_job  # noqa: E402
from kube_scale_watch import Tracker  # noqa: E402


def event(kind: str, uid: str, node: str | None, phase: str, wave: str = "room") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "8"}}}]}
    if node:
        spec["nodeName"] = node
    meta = {"uid": uid, "name": uid, "namespace": "fcast-room", "resourceVersion": "1",
            "labels": {"bench.gputwin.io/phase": wave, "bench.gputwin.io/job": uid}}  # fmt: skip
    return {"type": kind, "object": {"metadata": meta, "spec": spec, "status": {"phase": phase}}}


# (seconds as the watch saw it, event), expected gaps: only pods whose node's room began at an end
WAVES: dict[str, tuple[list[tuple[float, dict[str, Any]]], list[float]]] = {
    "two nodes, two waves": (
        [(1.0, event("ADDED", "a", None, "Pending")), (1.0, event("ADDED", "b", None, "Pending")),
         (1.2, event("MODIFIED", "a", "n0", "Pending")), (1.3, event("MODIFIED", "b", "n1", "Pending")),
         (4.0, event("MODIFIED", "a", "n0", "Succeeded")), (4.5, event("ADDED", "c", None, "Pending")),
         (4.75, event("MODIFIED", "c", "n0", "Pending")), (5.0, event("MODIFIED", "b", "n1", "Succeeded")),
         (5.25, event("ADDED", "d", "n1", "Pending"))],  # a pod made bound: created and bound at once
        [0.75, 0.25]),
    "a first wave alone measures nothing": (
        [(1.0, event("ADDED", "a", "n0", "Pending")), (3.0, event("MODIFIED", "a", "n0", "Succeeded"))], []),
    "another phase's pods are not the waves'": (
        [(1.0, event("ADDED", "a", "n0", "Pending", "x")), (3.0, event("MODIFIED", "a", "n0", "Succeeded", "x")),
         (3.5, event("ADDED", "b", "n0", "Pending", "x"))], []),
}  # fmt: skip


@pytest.mark.parametrize("name", list(WAVES))
def test_room_gaps_are_from_the_end_that_made_room_to_the_next_binding(name: str) -> None:
    events, expected = WAVES[name]
    tracker = Tracker({"n0": 8, "n1": 8})
    for at, ev in events:
        tracker.feed(ev, now=at)
    assert sorted(room_gaps(tracker)) == pytest.approx(sorted(expected))


def test_room_job_is_a_whole_node_gpujob_the_watch_sees() -> None:
    body = room_job(3, 2)
    job = GPUJob.model_validate(body)
    assert (job.spec.gpus, job.spec.duration_seconds, job.metadata.name) == (8, 2, "room3")
    labels = body["spec"]["podTemplate"]["metadata"]["labels"]
    assert labels["bench.gputwin.io/run"] == "1" and labels["bench.gputwin.io/phase"] == "room"
    assert GPUJob.model_validate(gpujob(0, Job(0.0, 2, 5, "u1-7"))).spec.gpus == 2  # the comparison's, too


@pytest.mark.parametrize(
    "argv,latency",
    [([], None), (["--start-latency", "0"], 0.0), (["--start-latency", "0.4"], 0.4)],
    ids=["measured", "off", "given"],
)
def test_start_latency_option(argv: list[str], latency: float | None) -> None:
    assert parse_args(argv).start_latency == latency


@pytest.mark.parametrize("argv", [["--start-latency", "-1"], ["--start-latency", "4000"]], ids=["negative", "too-big"])
def test_bad_start_latency_option_is_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        parse_args(argv)
    assert caught.value.code == 2
