"""`gputwin estimator evaluate` and `gputwin simulate --estimator` (issue 14).

Fixture: the first 3,000 jobs of the shared Philly-shaped trace (`../shared/traces/philly_mix1/jobs.csv`,
see ../shared/traces/README.md) with its own 11-partition cluster table.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gputwin.cli.main import cli

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "philly_mix1"
pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason=f"shared traces not found at {TRACES}")
CLUSTER = str(TRACES / "cluster.csv")


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def excerpt(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("estimator") / "philly-3000.csv"
    with (TRACES / "jobs.csv").open() as src:
        path.write_text("".join(itertools.islice(src, 3001)))
    return str(path)


def test_evaluate_json_last_line_has_the_documented_shape(excerpt: str) -> None:
    code, out, err = invoke("estimator", "evaluate", "--trace", excerpt, "--cluster", CLUSTER, "--json")
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["jobs"] == 3000
    keys = {name: set(values) for name, values in result["estimators"].items()}
    assert keys == {"history": {"mae_s", "median_ape", "spearman", "qssf_avg_jct"},
                    "learned": {"mae_s", "median_ape", "spearman", "qssf_avg_jct", "coverage"},
                    "oracle": {"qssf_avg_jct"}}  # fmt: skip
    learned = result["estimators"]["learned"]
    assert 0.0 < learned["coverage"] < 1.0 and -1.0 <= learned["spearman"] <= 1.0
    # Perfect knowledge of run times is never worse for QSSF on this excerpt than either estimate.
    oracle = result["estimators"]["oracle"]["qssf_avg_jct"]
    assert oracle <= min(result["estimators"][n]["qssf_avg_jct"] for n in ("history", "learned"))


def test_evaluate_prints_one_row_per_estimator(excerpt: str) -> None:
    code, out, err = invoke("estimator", "evaluate", "--trace", excerpt, "--cluster", CLUSTER)
    assert code == 0, err
    rows = [line.split()[0] for line in out.splitlines()[2:]]
    assert rows == ["history", "learned", "oracle"]
    assert "%" in out.splitlines()[3]  # the learned row has the p10-p90 coverage


@pytest.mark.parametrize("estimator", ["history", "learned", "oracle"])
def test_simulate_takes_an_estimator(excerpt: str, estimator: str) -> None:
    code, out, err = invoke("simulate", "--trace", excerpt, "--cluster", CLUSTER, "--policy", "qssf",
                            "--estimator", estimator, "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["jobs"] == 3000


def test_simulate_default_estimator_is_the_history() -> None:
    # The golden QSSF number on the whole trace (tests/sim/test_sim_golden.py pins the others).
    code, out, err = invoke("simulate", "--trace", str(TRACES / "jobs.csv"), "--cluster", CLUSTER,
                            "--policy", "qssf", "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["avg_jct"] == 353.299


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param(
            ["--trace", "/nonexistent/jobs.csv"],
            "error: /nonexistent/jobs.csv: file: no such file",
            id="missing-trace",
        ),
        pytest.param(["--trace", "{bad}"], "error: {bad}:3: ", id="bad-trace-line"),
        pytest.param(
            ["--trace", "{excerpt}", "--cluster", "/nonexistent/cluster.csv"],
            "error: /nonexistent/cluster.csv",
            id="missing-cluster",
        ),
    ],
)
def test_evaluate_refuses_bad_input_in_one_line(
    tmp_path: Path, excerpt: str, args: list[str], message: str
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,user,vc,jobname,gpu_num,state,submit_time,duration\n1,u,v,j,1,COMPLETED,0,5\n"
                   "2,u,v,j,many,COMPLETED,1,5\n")  # fmt: skip
    argv = [a.format(bad=bad, excerpt=excerpt) for a in args]
    code, out, err = invoke("estimator", "evaluate", *argv)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message.format(bad=bad)), err


def test_simulate_refuses_an_unknown_estimator(excerpt: str) -> None:
    code, _, err = invoke("simulate", "--trace", excerpt, "--cluster", CLUSTER, "--estimator", "magic")
    assert code == 2 and "'magic' is not one of 'history', 'learned', 'oracle'" in err


def test_train_writes_the_model_and_its_metadata(tmp_path: Path, excerpt: str) -> None:
    out = tmp_path / "model"
    code, _, err = invoke("estimator", "train", "--trace", excerpt, "--out", str(out))
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["model.json", "model.txt"]
    meta = json.loads((out / "model.json").read_text())
    assert meta["jobs"] == 3000 and meta["features"][0] == "user" and meta["holdout"]["jobs"] == 300
    assert meta["window"]["first_submit"] <= meta["window"]["last_submit"]
    assert set(meta["holdout"]) >= {"mae_s", "median_ape", "spearman", "trained_on"}
    from gputwin.adapters.traces import read_trace

    from gputwin.estimators.model import load

    jobs = read_trace(excerpt).jobs
    estimator = load(out)
    forecast = estimator.forecast(jobs[0])  # no live history yet: the offline model answers
    assert forecast.seconds > 0 and 0 <= forecast.low <= forecast.high
    # Training again replaces the folder whole.
    code, _, err = invoke("estimator", "train", "--trace", excerpt, "--out", str(out), "--seed", "1")
    assert code == 0, err
    assert json.loads((out / "model.json").read_text())["config"]["seed"] == 1


@pytest.mark.parametrize(
    "setup, message",
    [
        pytest.param("foreign", "not something gputwin estimator train writes", id="folder-of-other-files"),
        pytest.param("short", ": jobs: 5 in the history; training needs at least 2000", id="too-short"),
        pytest.param("missing", ": file: no such file", id="missing-trace"),
    ],
)
def test_train_refuses_in_one_line_and_writes_nothing(tmp_path: Path, excerpt: str, setup: str,
                                                       message: str) -> None:  # fmt: skip
    out, trace = tmp_path / "model", excerpt
    if setup == "foreign":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    elif setup == "short":
        trace = str(tmp_path / "short.csv")
        Path(trace).write_text("".join(Path(excerpt).read_text().splitlines(keepends=True)[:6]))
    else:
        trace = str(tmp_path / "absent.csv")
    code, stdout, err = invoke("estimator", "train", "--trace", trace, "--out", str(out))
    assert code == 2 and stdout == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not out.exists() or [p.name for p in out.iterdir()] == ["notes.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".model.new-")]
