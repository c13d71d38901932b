"""Hostile manifests through the three commands that read a cluster: each is one line, exit 2.

Every case is a bad manifest file (or folder) and the FIELD its error must name; it goes through
`gputwin simulate --cluster`, `gputwin apply -f` (into an empty emulator state, which must stay
empty) and `gputwin slurm render --cluster`, in-process. A few cases whose danger is a hang or
unbounded memory also run as a subprocess under a timeout and an address-space limit.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from budget import REFUSAL_CPU_SECONDS, timed  # tests/budget.py
from click.testing import CliRunner

from gputwin.api.resources import demo_trace_path
from gputwin.api.yamlfiles import MAX_FILE_BYTES, MAX_FILES, MAX_TOTAL_BYTES
from gputwin.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = (ROOT / "manifests" / "samples" / "two-leaf.yaml").read_text()
JOB = """\
apiVersion: gputwin.io/v1alpha1
kind: GPUJob
metadata: {name: j, namespace: default}
spec: {taskType: train, gpus: 4, durationSeconds: 60}
"""
PARTITION = """\
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: extra}
spec: {topology: two-leaf, taskTypes: [extra], nodes: "gpu[07-08]"}
"""
POLICY = """\
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: p}
spec: {queue: {policy: qssf}}
"""

Make = Callable[[Path], Path]


def text(content: str | bytes) -> Make:
    """A case written as one file, cluster.yaml."""

    def make(tmp: Path) -> Path:
        path = tmp / "cluster.yaml"
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return path

    return make


def job(old: str, new: str) -> Make:
    assert old in JOB
    return text(CLUSTER + "---\n" + JOB.replace(old, new))


def cluster(old: str, new: str) -> Make:
    assert old in CLUSTER
    return text(CLUSTER.replace(old, new, 1))


def policy(spec: str) -> Make:
    return text(CLUSTER + "---\n" + POLICY.replace("{queue: {policy: qssf}}", spec))


def task_types(value: str) -> Make:
    return cluster("taskTypes: [train]", f"taskTypes: {value}")


def partition_with(types: str, train: str = "[train]") -> Make:
    """A sixth document, partition `extra` serving `types` on gpu08 (taken from infer)."""
    base = CLUSTER.replace("nodes: gpu[07-08]", "nodes: gpu07")
    base = base.replace("taskTypes: [train]", f"taskTypes: {train}")
    return text(base + "---\n" + PARTITION.replace("[extra]", types).replace("gpu[07-08]", "gpu08"))


def quotas(flow: str) -> Make:
    """The infer partition (16 GPUs) with `spec.quotas: flow`."""
    return cluster("maxGPUsPerJob: 8", "maxGPUsPerJob: 8\n  quotas: " + flow)


def fifo(tmp: Path) -> Path:
    path = tmp / "cluster.yaml"
    os.mkfifo(path)
    return path


def device(tmp: Path) -> Path:
    path = tmp / "cluster.yaml"
    path.symlink_to("/dev/zero")
    return path


def huge(tmp: Path) -> Path:
    path = tmp / "cluster.yaml"
    with path.open("w") as out:
        out.write(CLUSTER + "---\n")
        line = "# " + "x" * 1022 + "\n"
        for _ in range(MAX_FILE_BYTES // len(line) + 1):
            out.write(line)
    return path


def a_mib_of_jobs(tmp: Path) -> Path:
    """Just under the size cap, valid up to its last document: the slowest refusal there is."""
    path, docs, size = tmp / "cluster.yaml", [CLUSTER], len(CLUSTER)
    while size < MAX_TOTAL_BYTES - 1000:
        docs.append(JOB.replace("name: j,", f"name: j{len(docs)},"))
        size += len(docs[-1]) + 4
    path.write_text("---\n".join([*docs, JOB.replace("gpus: 4", "gpus: 0")]))
    return path


def many_files(tmp: Path) -> Path:
    folder = tmp / "cluster"
    folder.mkdir()
    (folder / "a.yaml").write_text(CLUSTER)
    for i in range(MAX_FILES):
        (folder / f"job{i:04d}.yaml").write_text(JOB.replace("name: j,", f"name: j{i},"))
    return folder


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8)
)

# id -> (how to make the bad input, the FIELD the error must name)
CASES: dict[str, tuple[Make, str]] = {
    # numbers beyond the schema's bounds
    "duration-of-318913-years": (
        job("durationSeconds: 60", "durationSeconds: 10000000000000"),
        "spec.durationSeconds",
    ),
    "duration-of-400-digits": (
        job("durationSeconds: 60", "durationSeconds: " + "9" * 400),
        "spec.durationSeconds",
    ),
    "gpus-of-5000-digits": (job("gpus: 4", "gpus: " + "9" * 5000), "spec.gpus"),
    "gpus-beyond-any-job": (job("gpus: 4", "gpus: 100000"), "spec.gpus"),
    "priority-beyond-int32": (
        job("durationSeconds: 60", "durationSeconds: 60, priority: 99999999999"),
        "spec.priority",
    ),
    "user-name-of-10k-characters": (job("gpus: 4", "gpus: 4, user: " + "u" * 10_000), "spec.user"),
    "gpus-per-node-1000": (cluster("gpusPerNode: 8", "gpusPerNode: 1000"), "spec.nodeGroups[0].gpusPerNode"),
    "max-gpus-per-job-a-million": (
        cluster("maxGPUsPerJob: 8", "maxGPUsPerJob: 1000000"),
        "spec.maxGPUsPerJob",
    ),
    "priority-tier-beyond-slurm": (cluster("priorityTier: 1", "priorityTier: 70000"), "spec.priorityTier"),
    "max-wait-of-31-years": (
        cluster("maxWaitSeconds: 300", "maxWaitSeconds: 1000000000"),
        "spec.placement.maxWaitSeconds",
    ),
    "checkpoint-of-a-century": (
        policy("{preemption: {checkpointSeconds: 3153600000}}"),
        "spec.preemption.checkpointSeconds",
    ),
    "allowed-gpus-a-million": (
        policy("{sizing: {policy: history, allowedGPUs: [1000000]}}"),
        "spec.sizing.allowedGPUs[0]",
    ),
    # tenants' quotas
    "quota-gpus-of-5000-digits": (quotas("[{tenant: a, gpus: " + "9" * 5000 + "}]"), "spec.quotas[0].gpus"),
    "quotas-beyond-the-partition": (quotas("[{tenant: a, gpus: 12}, {tenant: b, gpus: 12}]"), "spec.quotas"),
    "quota-of-5000-users": (
        quotas("[{tenant: a, gpus: 1, users: [" + ", ".join(f"u{i}" for i in range(5000)) + "]}]"),
        "spec.quotas[0].users",
    ),
    "quota-user-of-10k-characters": (quotas("[{tenant: a, gpus: 1, users: [" + "u" * 10_000 + "]}]"),
                                     "spec.quotas[0].users[0]"),  # fmt: skip
    "quota-lends-more-than-it-has": (quotas("[{tenant: a, gpus: 1, cohort: c, lendingLimit: 2}]"), "spec.quotas[0]"),
    # policy params
    "param-typo": (policy("{queue: {policy: qssf}, params: {qssf_priorr: 100}}"), "spec.params"),
    "param-reserved": (policy("{params: {max_wait: 100}}"), "spec.params"),
    "qssf-prior-of-a-century": (
        policy("{queue: {policy: qssf}, params: {qssf_prior: 3153600000}}"),
        "spec.params",
    ),
    "las-thresholds-not-numbers": (
        policy("{queue: {policy: las}, params: {las_thresholds: 'a,b'}}"),
        "spec.params",
    ),
    "las-thresholds-100-levels": (
        policy("{queue: {policy: las}, params: {las_thresholds: '" + ",".join(["9"] * 100) + "'}}"),
        "spec.params",
    ),
    "min-samples-negative": (policy("{sizing: {policy: history}, params: {min_samples: -1}}"), "spec.params"),
    # task types: what the SLURM renderer could not write is refused by the model too
    "task-type-newline": (task_types('["a\\nPartitionName=evil"]'), "spec.taskTypes[0]"),
    "task-type-hash": (task_types('["#x"]'), "spec.taskTypes[0]"),
    "task-type-lua-long-bracket": (task_types('["a]]..os.exit()--[["]'), "spec.taskTypes[0]"),
    "task-type-quote": (task_types("['x\"y']"), "spec.taskTypes[0]"),
    "task-type-space": (task_types('["a b"]'), "spec.taskTypes[0]"),
    "task-type-star-prefix": (task_types('["*train"]'), "spec.taskTypes[0]"),
    "task-type-65-characters": (task_types("[" + "t" * 65 + "]"), "spec.taskTypes[0]"),
    "job-task-type-newline": (job("taskType: train", 'taskType: "train\\n"'), "spec.taskType"),
    "two-partitions-one-task-type": (partition_with("[train]"), "spec.taskTypes[0]"),
    "two-catch-alls": (partition_with('[extra, "*"]', train='["*"]'), "spec.taskTypes[1]"),
    "partition-name-of-64-characters": (cluster("name: train", "name: " + "t" * 64), "metadata.name"),
    # files that must not hang, exhaust memory or raise
    "fifo": (fifo, "path"),
    "dev-zero": (device, "path"),
    "larger-than-the-cap": (huge, "path"),
    "a-mib-of-jobs-the-last-bad": (a_mib_of_jobs, "spec.gpus"),
    f"folder-of-{MAX_FILES + 1}-files": (many_files, "path"),
    "100k-deep-flow": (text("[" * 100_000), "line 1, column"),
    "200-deep-mappings": (text("a: " + "{a: " * 200 + "1" + "}" * 200 + "\n"), "line 1, column"),
    "billion-laughs": (text(LAUGHS), "line "),
    "nul-byte": (text(CLUSTER.replace("name: spine", "name: sp\0ine")), "line 13, column 15"),
    "not-utf8": (text(CLUSTER.encode().replace(b"spine", b"sp\xffine", 1)), "encoding"),
    "duplicate-key": (
        text(CLUSTER.replace("  name: two-leaf\n", "  name: two-leaf\n  name: other\n")),
        "line 11, column 3",
    ),
}


def run(*args: str) -> tuple[int, str, str, float]:
    """Exit code, stdout, stderr and the CPU seconds the command took (tests/budget.py)."""
    result, seconds = timed(lambda: CliRunner().invoke(cli, list(args)))
    return result.exit_code, result.stdout, result.stderr, seconds


def commands(bad: Path, state: Path) -> dict[str, list[str]]:
    return {
        "simulate": ["simulate", "--cluster", str(bad), "--trace", str(demo_trace_path())],
        "apply": ["apply", "-f", str(bad), "--state", str(state)],
        "render": ["slurm", "render", "--cluster", str(bad)],
    }


def assert_one_line(code: int, out: str, err: str, bad: Path, field: str, status: int = 2) -> None:
    assert "Traceback" not in err + out
    lines = err.splitlines()
    assert (code, len(lines)) == (status, 1), err[:2000]
    assert lines[0].startswith(f"error: {bad}"), lines[0][:300]
    assert field in lines[0], lines[0][:300]
    assert len(lines[0]) < 1000


@pytest.mark.parametrize("command", ["simulate", "apply", "render"])
@pytest.mark.parametrize(("make", "field"), CASES.values(), ids=CASES.keys())
def test_a_hostile_manifest_is_one_line_naming_file_and_field(
    tmp_path: Path, make: Make, field: str, command: str
) -> None:
    bad, state = make(tmp_path), tmp_path / "state"
    code, out, err, seconds = run(*commands(bad, state)[command])
    assert_one_line(code, out, err, bad, field, 1 if command == "apply" else 2)  # apply exits as kubectl
    assert seconds < REFUSAL_CPU_SECONDS
    assert [p.name for p in state.rglob("*.json") if p.name != "clock.json"] == []  # no object stored


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 25


@pytest.mark.parametrize("command", ["simulate", "apply", "render"])
@pytest.mark.parametrize("types", ["[train]", '["*"]'], ids=["task-type", "catch-all"])
def test_two_partitions_serving_one_task_type_are_both_named(
    tmp_path: Path, command: str, types: str
) -> None:
    bad = partition_with(types, train=types)(tmp_path)
    _, _, err, _ = run(*commands(bad, tmp_path / "state")[command])
    what = "the catch-all '*'" if types == '["*"]' else "task type 'train'"
    reason = f"{what} is served by GPUPartition 'extra' here and by GPUPartition 'train' ({bad}:doc2)"
    assert err.startswith(f"error: {bad}:doc6: ") and f"spec.taskTypes[0]: {reason}" in err.replace(
        f'Invalid value: "{types.strip("[]").strip(chr(34))}": ', ""
    ), err


BOUNDED = [
    "fifo",
    "dev-zero",
    "larger-than-the-cap",
    "100k-deep-flow",
    "billion-laughs",
    "gpus-of-5000-digits",
]


@pytest.mark.parametrize("case", BOUNDED)
def test_a_hostile_manifest_is_refused_in_bounded_time_and_memory(tmp_path: Path, case: str) -> None:
    """As a separate process: a hang would hit the timeout, unbounded memory the 1 GiB limit."""
    bad = CASES[case][0](tmp_path)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    result = subprocess.run(
        [sys.executable, "-m", "gputwin", "slurm", "render", "--cluster", str(bad)],
        capture_output=True, text=True, timeout=30, preexec_fn=limit, check=False,
    )  # fmt: skip
    assert_one_line(result.returncode, result.stdout, result.stderr, bad, CASES[case][1])
