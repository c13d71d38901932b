"""Every problem of a bad manifest is its own `error:` line, whichever command reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gputwin.api.problems import ClusterError, Problem
from gputwin.cli.errors import error_lines
from gputwin.cli.main import cli

SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"

# Two partitions that are each wrong in their own way: one unknown policy, one unknown topology.
TWO_PROBLEMS = """\
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: t}
spec:
  switches: [{name: leaf}]
  nodeGroups: [{switch: leaf, nodes: "n[1-2]", gpusPerNode: 8}]
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: a}
spec: {topology: t, taskTypes: [train], nodes: n1, policy: nope}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: b}
spec: {topology: other, taskTypes: [infer], nodes: n2}
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--trace", str(SAMPLES / "demo-trace.csv"), "--cluster", "{cluster}"],
        ["slurm", "render", "--cluster", "{cluster}", "--out", "{tmp}/conf"],
    ],
    ids=["simulate", "slurm-render"],
)
def test_each_problem_is_one_error_line(tmp_path: Path, argv: list[str]) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(TWO_PROBLEMS)
    args = [a.format(cluster=cluster, tmp=tmp_path) for a in argv]
    result = CliRunner().invoke(cli, args)
    lines = result.stderr.splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 2 and all(line.startswith(f"error: {cluster}:doc") for line in lines), lines
    assert ": spec.policy: " in lines[0] and ": spec.topology: " in lines[1]


@pytest.mark.parametrize(
    ("exc", "lines"),
    [
        (ClusterError([Problem("f.yaml:doc1", "spec.a", "bad"), Problem("f.yaml:doc2", "spec.b", "worse")]),
         ["error: f.yaml:doc1: spec.a: bad", "error: f.yaml:doc2: spec.b: worse"]),
        (ValueError("f.csv:3: gpus: not\nan integer"), ["error: f.csv:3: gpus: not an integer"]),
        (FileNotFoundError(2, "No such file or directory", "x.csv"), ["error: x.csv: no such file or directory"]),
    ],
    ids=["cluster-error-per-problem", "newline-folded", "os-error-names-file"],
)
def test_error_lines(exc: Exception, lines: list[str]) -> None:
    assert error_lines(exc) == lines
