"""`gputwin export kueue`: YAML on stdout or atomically into --out, notes on stderr, and a user's
mistake as one `error:` line with exit status 2 and --out untouched."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gputwin.cli.main import cli

SHARED_LAB = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "shared-lab.yaml"


def run(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(cli, ["export", "kueue", *args], catch_exceptions=False)
    return done.exit_code, done.stdout, done.stderr


def test_stdout_is_the_yaml_and_stderr_the_notes() -> None:
    status, out, err = run("--cluster", str(SHARED_LAB))
    assert status == 0, err
    kinds = [d["kind"] for d in yaml.safe_load_all(out)]
    assert kinds == ["ResourceFlavor", "Cohort", *["ClusterQueue"] * 3, *["LocalQueue"] * 3]
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert notes and len(notes) == len(err.splitlines())
    assert [
        f"note: {line.removeprefix('# note: ')}" for line in out.splitlines() if line.startswith("# note:")
    ] == notes


def test_out_file_is_written_whole(tmp_path: Path) -> None:
    out_file = tmp_path / "kueue.yaml"
    status, out, err = run("--cluster", str(SHARED_LAB), "--out", str(out_file), "--namespace", "ml")
    assert status == 0, err
    assert out == ""
    queues = [d for d in yaml.safe_load_all(out_file.read_text()) if d["kind"] == "LocalQueue"]
    assert {q["metadata"]["namespace"] for q in queues} == {"ml"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--namespace", "Bad.NS"), "error: --namespace: 'Bad.NS' is not a DNS-1123 label"),
        (("--cluster", "/nonexistent/c.yaml"), "error: /nonexistent/c.yaml"),
    ],
    ids=["bad-namespace", "missing-cluster"],
)
def test_a_mistake_is_one_line_and_leaves_out_as_it_was(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    out_file = tmp_path / "kueue.yaml"
    out_file.write_text("before\n")
    status, out, err = run("--cluster", str(SHARED_LAB), "--out", str(out_file), *args)
    assert status == 2
    assert len(err.splitlines()) == 1 and err.startswith(message), err
    assert out_file.read_text() == "before\n"
    assert list(tmp_path.iterdir()) == [out_file]  # no temporary file left beside it


def test_a_cluster_without_quotas_is_refused(tmp_path: Path) -> None:
    cluster = tmp_path / "c.yaml"
    cluster.write_text(_without_quotas())
    status, _, err = run("--cluster", str(cluster))
    assert status == 2 and err.startswith(
        f"error: {cluster}: spec.quotas: no GPUPartition declares quotas"
    ), err


def _without_quotas() -> str:
    docs = list(yaml.safe_load_all(SHARED_LAB.read_text()))
    for doc in docs:
        doc["spec"].pop("quotas", None)
        doc["spec"].pop("fairness", None)
    return yaml.safe_dump_all(docs)
