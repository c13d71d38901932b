"""`gputwin describe`: every kind, conditions and events, and why a waiting GPUJob waits."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gputwin.cli.main import cli
from gputwin.cli.pending import Placement, Waiting, why_waiting

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "manifests" / "samples"
CLUSTER, JOBS = str(SAMPLES / "two-leaf.yaml"), str(SAMPLES / "gpujobs.yaml")
# Two jobs the sample cluster's train partition (48 GPUs, 28 free after the samples start) cannot
# start at once: under its sjf policy the shorter one is first in the queue.
WAITERS = """\
apiVersion: gputwin.io/v1alpha1
kind: GPUJob
metadata: {name: big, namespace: default, labels: {team: cv}}
spec: {taskType: train, gpus: 32, user: dave, durationSeconds: 600}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUJob
metadata: {name: small, namespace: default}
spec: {taskType: train, gpus: 30, user: erin, durationSeconds: 60}
"""


def gputwin(state: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [*args, "--state", str(state)], input=stdin)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    assert gputwin(state, "apply", "-f", CLUSTER, "-f", JOBS)[0] == 0
    assert gputwin(state, "apply", "-f", "-", stdin=WAITERS)[0] == 0
    return state


def job(name: str, submit: float, gpus: int, duration: float = 60.0, priority: int = 0) -> Waiting:
    return Waiting(f"default/{name}", submit, duration, priority, gpus)


QUEUE = [
    job("a", 0, 8, duration=900),
    job("b", 10, 4, duration=60, priority=5),
    job("c", 20, 2, duration=300),
]

NONE, TOPO = Placement(), Placement("topology-aware", max_wait=300, waited=120)
WHY = [
    # (job, queue, policy, free, total, placement) -> (position, queued, order, reason)
    ("c", QUEUE, "fifo", 1, 48, NONE,
     (3, 3, "submit time", "waits for 2 GPUs; partition p has 1 of 48 free, and 2 jobs ahead")),
    ("b", QUEUE, "sjf", 1, 48, NONE, (1, 3, "duration", "waits for 4 GPUs; partition p has 1 of 48 free")),
    ("c", QUEUE, "sjf", 1, 48, NONE,
     (2, 3, "duration", "waits for 2 GPUs; partition p has 1 of 48 free, and 1 job ahead")),
    ("b", QUEUE, "priority", 4, 48, Placement("consolidate"),
     (1, 3, "priority, then submit time",
      "4 GPUs free cover its 4; waits for consolidate placement to place it at the next scheduling pass")),
    ("a", QUEUE, "fifo", 8, 48, NONE,
     (1, 3, "submit time", ("8 GPUs free cover its 8; waits for the placement policy to place it at the next "
      "scheduling pass"))),
    ("a", QUEUE, "fifo", 8, 48, TOPO,
     (1, 3, "submit time", ("8 GPUs free cover its 8; topology-aware placement waits for them under one leaf "
      "switch, 180 s more of its 300 s, then spreads"))),
    ("c", QUEUE, "fifo", 16, 48, TOPO, (3, 3, "submit time", "16 GPUs free cover its 2; waits behind 2 jobs ahead")),
    ("a", QUEUE, "fifo", 0, 4, NONE, (1, 3, "submit time", "requests 8 GPUs; partition p has only 4")),
    ("c", QUEUE, "las", 0, 48, NONE,
     (3, 3, "submit time (las's own order may differ)",
      "waits for 2 GPUs; partition p has 0 of 48 free, and 2 jobs ahead")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "queue", "policy", "free", "total", "placement", "expected"),
    WHY,
    ids=[
        "fifo-third",
        "sjf-shortest-first",
        "sjf-second",
        "priority-highest",
        "fits-head",
        "fits-head-topology-aware",
        "fits-behind",
        "larger-than-partition",
        "las-submit-order",
    ],
)
def test_why_a_job_waits(
    name: str,
    queue: list[Waiting],
    policy: str,
    free: int,
    total: int,
    placement: Placement,
    expected: tuple[int, int, str, str],
) -> None:
    why = why_waiting(f"default/{name}", queue, policy, "p", free, total, placement)
    assert (why.position, why.queued, why.order, why.reason) == expected


KINDS = [
    # (command-line target, the beginnings of lines the text must hold)
    (["switchtopology", "two-leaf"], ["Name:         two-leaf", "Kind:         SwitchTopology",
                                      "  Ready   True     Valid"]),
    (["gpup/train"], ["Kind:         GPUPartition", "  freeGPUs: 28", "  totalGPUs: 48"]),
    (["schedulingpolicy", "sjf-topology"], ["Kind:         SchedulingPolicy", "  queue:", "    policy: sjf"]),
    (["gpuj", "llm-finetune"], ["Namespace:    default", "Labels:       team=nlp", "  phase: Running",
                                "  Scheduled   True     Started"]),
    (["gpujob/big"], ["Labels:       team=cv", "  phase: Queued", "Queue:",
                      "  Partition:  train (queue policy sjf)", "  Position:   2 of 2 (by duration)",
                      "  Waiting:    waits for 32 GPUs; partition train has 28 of 48 free, and 1 job ahead"]),
    (["gpuj", "small"], ["  Position:   1 of 2 (by duration)",
                         "  Waiting:    waits for 30 GPUs; partition train has 28 of 48 free"]),
]  # fmt: skip


@pytest.mark.parametrize(("target", "lines"), KINDS, ids=["topology", "partition", "policy", "running", "queued-second",
                                                          "queued-first"])  # fmt: skip
def test_describe_shows_spec_status_and_conditions(state: Path, target: list[str], lines: list[str]) -> None:
    code, out, err = gputwin(state, "describe", *target)
    assert code == 0, err
    for line in lines:  # each expected line begins a line of the text (a condition row goes on)
        assert any(shown.startswith(line) for shown in out.splitlines()), line
    assert "Conditions:" in out and "  TYPE" in out and "LAST TRANSITION" in out


def test_describe_lists_the_objects_events(state: Path) -> None:
    assert gputwin(state, "run")[0] == 0
    code, out, _ = gputwin(state, "describe", "gpujob", "resnet50-4gpu")
    events = out.split("Events:\n", 1)[1].splitlines()
    assert code == 0 and events[0].split() == ["TIME", "TYPE", "REASON", "MESSAGE"]
    assert [e.split()[2] for e in events[1:]] == ["Scheduled", "Completed"]
    assert "Queue:" not in out  # only a waiting job says why it waits


def test_describe_a_trace_replay_has_its_conditions(tmp_path: Path) -> None:
    state = tmp_path / "state"
    replay = SAMPLES / "tracereplay.yaml"
    assert gputwin(state, "apply", "-f", CLUSTER, "-f", str(replay))[0] == 0
    code, out, err = gputwin(state, "describe", "trr")
    assert code == 0, err
    assert "Kind:         TraceReplay" in out and "Conditions:" in out


def test_describe_without_a_name_shows_every_object_of_the_kinds(state: Path) -> None:
    code, out, _ = gputwin(state, "describe", "gpup,swt")
    names = [line.split()[1] for line in out.splitlines() if line.startswith("Name:")]
    assert (code, names) == (0, ["infer", "train", "two-leaf"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["describe", "gpuj", "nope"], 'error: gpujobs.gputwin.io "nope" not found'),
        (["describe", "pods"], 'error: the server doesn\'t have a resource type "pods"'),
        (["describe", "gpuj,"], "error: 'gpuj,': an empty resource type in a comma-separated list"),
    ],
    ids=["missing", "unknown-kind", "empty-kind"],
)
def test_describe_mistakes_are_one_line_and_exit_1(state: Path, args: list[str], message: str) -> None:
    code, out, err = gputwin(state, *args)
    assert (code, out, err.strip()) == (1, "", message)


def test_describe_of_an_empty_namespace_says_so(state: Path) -> None:
    code, out, err = gputwin(state, "describe", "gpuj", "-n", "other")
    assert (code, out, err.strip()) == (0, "", "No resources found in other namespace.")
