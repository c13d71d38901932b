"""`gputwin compare` and `gputwin tune` on a cluster with tenants (manifests/examples/shared-lab.yaml,
the first 400 jobs of the embedded demo trace): Jain's index and fragmentation in the ranked table,
the tenants' plot in the report, the tenancy objectives, and their refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.cli.main import cli

SHARED_LAB = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "shared-lab.yaml"


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "demo-400.csv"
    path.write_text("".join(demo_trace_path().read_text().splitlines(keepends=True)[:401]))
    return path


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_compare_shows_jain_and_the_tenants_plot(trace: Path, tmp_path: Path) -> None:
    code, out, err = invoke("compare", "--trace", str(trace), "--cluster", str(SHARED_LAB), "--policies", "fifo,sjf",
                            "--placements", "consolidate", "--jobs", "1", "--out", str(tmp_path / "o"), "--quiet")  # fmt: skip
    assert code == 0, err
    assert "Jain" in out and "fragmented GPUs" in out
    assert (tmp_path / "o" / "tenant_quota.png").is_file()
    data = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert set(data["candidates"][0]["tenants"]) == {"vision", "speech", "others"}


def test_compare_without_tenants_has_no_tenancy_column(trace: Path, tmp_path: Path) -> None:
    code, out, err = invoke("compare", "--trace", str(trace), "--cluster", str(demo_cluster_path()), "--policies",
                            "fifo", "--placements", "consolidate", "--jobs", "1", "--no-plots", "--out",
                            str(tmp_path / "o"), "--quiet")  # fmt: skip
    assert code == 0, err
    assert "Jain" not in out and "fragmented" not in out


def test_tune_maximises_jain(trace: Path, tmp_path: Path) -> None:
    code, out, err = invoke("tune", "--trace", str(trace), "--cluster", str(SHARED_LAB), "--objective", "jain",
                            "--budget", "3", "--jobs", "1", "--out", str(tmp_path / "o"), "--quiet", "--json")  # fmt: skip
    assert code == 0, err
    data = json.loads(out.strip().splitlines()[-1])
    assert (data["objective"], data["direction"]) == ("jain", "maximize")
    assert 0 < data["best"]["tune"] == max(t["value"] for t in data["trials"]) <= 1  # maximised


REFUSALS = [
    ("no-tenants", "jain", str(demo_cluster_path()), (), "the cluster has no tenants"),
    ("frag-no-tenants", "fragmented_gpus", str(demo_cluster_path()), (), "the cluster has no tenants"),
    ("partition", "jain", str(SHARED_LAB), ("--partition", "shared"), "a whole-cluster metric"),
]


@pytest.mark.parametrize("objective,cluster,extra,reason", [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS])
def test_tune_refuses_a_tenancy_objective_it_cannot_measure(trace: Path, tmp_path: Path, objective: str,
                                                            cluster: str, extra: tuple[str, ...], reason: str) -> None:  # fmt: skip
    code, _, err = invoke("tune", "--trace", str(trace), "--cluster", cluster, "--objective", objective,
                          "--budget", "1", "--out", str(tmp_path / "o"), *extra)  # fmt: skip
    assert code == 2 and err.count("\n") == 1 and reason in err and f"--objective {objective}" in err
    assert not (tmp_path / "o").exists()
