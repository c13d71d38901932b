"""`gputwin whatif --out DIR` and `--kube`'s usage, without services: compare's report folder on the
golden snapshot, whole or absent, and the source options shared with `forecast`, refused in one line.
Fixture: tests/twin/data/philly-mix1-2vc.snapshot.json (two VCs of the Philly-shaped trace at
t = 10,000 s; tests/twin/data/make_snapshot.py made it)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gputwin.cli.main import cli

SNAPSHOT = str(Path(__file__).resolve().parents[1] / "twin" / "data" / "philly-mix1-2vc.snapshot.json")
QUICK = ("--snapshot", SNAPSHOT, "--samples", "2", "--horizon", "1d")


def run(command: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [command, *args], env={"KUBECONFIG": ""})
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("command", ["whatif", "forecast"])
@pytest.mark.parametrize(
    ("args", "message"),
    [(("--kube", "--snapshot", SNAPSHOT), "give exactly one of --slurm, --kube and --snapshot FILE"),
     (("--slurm", "--kube"), "give exactly one of --slurm, --kube and --snapshot FILE"),
     (("--snapshot", SNAPSHOT, "--context", "c"), "--kubeconfig, --context and --namespace need --kube"),
     (("--slurm", "--namespace", "ns"), "--kubeconfig, --context and --namespace need --kube"),
     (("--kube", "--kubeconfig", "/nonexistent/kubeconfig"), "error: /nonexistent/kubeconfig: kubeconfig: ")],
    ids=["kube-and-snapshot", "slurm-and-kube", "context-without-kube", "namespace-without-kube", "no-kubeconfig"],
)  # fmt: skip
def test_the_source_options_are_forecasts_and_refuse_in_one_line(command: str, args: tuple[str, ...],
                                                                 message: str) -> None:  # fmt: skip
    status, out, err = run(command, *args)
    assert status == 2 and message in err and "Traceback" not in err and out == ""


def test_out_writes_compares_folder_with_the_ranked_list(tmp_path: Path) -> None:
    out = tmp_path / "report"
    status, stdout, err = run("whatif", *QUICK, "--policy", "sjf", "--out", str(out), "--report-format", "both")
    assert status == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["index.html", "jct_cdf.png", "report.md", "summary.csv",
                                                     "summary.json"]  # fmt: skip
    doc = json.loads((out / "summary.json").read_text())
    table = json.loads(run("whatif", *QUICK, "--policy", "sjf", "--json")[1].splitlines()[-1])
    # the folder's summary is the --json document (bar the measured wall times), ranked the same
    assert [c["candidate"] for c in doc["candidates"]] == [c["candidate"] for c in table["candidates"]]
    assert [c["avg_jct"] for c in doc["candidates"]] == [c["avg_jct"] for c in table["candidates"]]
    assert doc["snapshot"]["pending"] == 474 and doc["changes"] == "none"
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [r["candidate"] for r in rows] == [c["candidate"] for c in doc["candidates"]]
    assert SNAPSHOT in (out / "report.md").read_text()  # its provenance names the snapshot it forked
    assert f"wrote {out}/summary.json" in stdout


def test_out_replaces_its_own_folder_and_refuses_a_foreign_one_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert run("whatif", *QUICK, "--out", str(out), "--no-plots")[0] == 0
    status, _, err = run("whatif", *QUICK, "--policy", "sjf", "--out", str(out), "--no-plots")
    assert status == 0, err  # a folder of whatif's (compare's) own files is swapped
    assert len(json.loads((out / "summary.json").read_text())["candidates"]) == 2
    (out / "notes.txt").write_text("mine")
    status, stdout, err = run("whatif", "--snapshot", "/nonexistent.json", "--out", str(out))
    assert status == 2 and stdout == "" and "notes.txt" in err and err.count("\n") == 1  # before the snapshot


def test_a_failed_report_leaves_no_folder_mocked_plots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plots fail (a mock raising OSError, as a full disk would) after summary.json is written:
    no DIR, no half-written folder beside it; an existing DIR is left as it was."""
    import gputwin.sim.plots

    def full_disk_mock(*args: object, **kwargs: object) -> list[Path]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(gputwin.sim.plots, "write_plots", full_disk_mock)
    out = tmp_path / "report"
    status, _, _ = run("whatif", *QUICK, "--out", str(out))
    assert status != 0 and not out.exists() and list(tmp_path.iterdir()) == []
    assert run("whatif", *QUICK, "--out", str(out), "--no-plots")[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    status, _, _ = run("whatif", *QUICK, "--policy", "sjf", "--out", str(out))
    assert status != 0 and {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]
