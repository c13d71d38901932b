"""Sweep folders and the local executor: results as the simulator gives them, resume, errors."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputwin.adapters.sweeps import BadResults, SweepError, gather, pending, read_plan, run_sweep, write_plan
from gputwin.adapters.sweeps.local import LocalExecutor
from gputwin.adapters.sweeps.plan import load_inputs, read_result, result_path
from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.cli.main import cli
from gputwin.sim.atomic import FILE_MODE
from gputwin.core.model import Candidate
from gputwin.sim.compare import comparison, run_candidate, write_report

CANDIDATES = (Candidate("fifo", "consolidate"), Candidate("sjf", "first-fit", backfill=True),
              Candidate("las", "topology-aware"))  # fmt: skip


def new_sweep(folder: Path, candidates: tuple[Candidate, ...] = CANDIDATES, seed: int = 0) -> Path:
    write_plan(folder, demo_trace_path(), "helios", demo_cluster_path(), seed=seed, candidates=candidates)
    return folder


def test_plan_round_trips_and_inputs_are_copied(tmp_path: Path) -> None:
    folder = new_sweep(tmp_path / "s")
    plan = read_plan(folder)
    assert plan.candidates == CANDIDATES and plan.fmt == "helios"
    cluster, jobs = load_inputs(folder, plan)  # from the copies, not the originals
    assert len(jobs) == 3375 and cluster.partitions
    assert pending(folder, plan) == [0, 1, 2]


@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "two-processes"])
def test_local_results_equal_a_direct_run(tmp_path: Path, workers: int) -> None:
    folder = new_sweep(tmp_path / "s")
    done: list[int] = []
    results = run_sweep(folder, LocalExecutor(workers), done.append)
    assert sorted(done) == [0, 1, 2]
    cluster, jobs = load_inputs(folder, read_plan(folder))
    for candidate, result in zip(CANDIDATES, results):
        direct = run_candidate(cluster, jobs, candidate, 0)
        assert result.candidate == candidate
        assert {k: v for k, v in result.summary.to_json().items() if k != "wall_seconds"} == {
            k: v for k, v in direct.summary.to_json().items() if k != "wall_seconds"
        }
        assert result.jcts == direct.jcts and result.spans == direct.spans


def test_a_resumed_sweep_runs_only_what_is_missing(tmp_path: Path) -> None:
    folder = new_sweep(tmp_path / "s")
    run_sweep(folder, LocalExecutor(1))
    kept = result_path(folder, 0).read_bytes()
    result_path(folder, 1).unlink()
    done: list[int] = []
    new_sweep(folder)  # the same plan again: a resume, results kept
    run_sweep(folder, LocalExecutor(1), done.append)
    assert done == [1] and result_path(folder, 0).read_bytes() == kept


def test_another_plan_in_the_folder_starts_over(tmp_path: Path) -> None:
    folder = new_sweep(tmp_path / "s")
    run_sweep(folder, LocalExecutor(1))
    new_sweep(folder, CANDIDATES[:1], seed=7)
    assert pending(folder, read_plan(folder)) == [0]


def test_gather_names_the_tasks_without_result(tmp_path: Path) -> None:
    folder = new_sweep(tmp_path / "s")
    with pytest.raises(SweepError, match=r"3 task\(s\) left no result \(0, 1, 2\); see .*logs"):
        gather(folder, read_plan(folder))


def test_a_result_for_another_candidate_is_refused(tmp_path: Path) -> None:
    folder = new_sweep(tmp_path / "s")
    run_sweep(folder, LocalExecutor(1))
    swapped = json.loads(result_path(folder, 0).read_text())
    result_path(folder, 1).write_text(json.dumps(swapped))
    with pytest.raises(SweepError, match="holds fifo/consolidate"):
        gather(folder, read_plan(folder))


def test_sweep_task_reads_its_index_from_the_environment(tmp_path: Path) -> None:
    folder = new_sweep(tmp_path / "s")
    runner = CliRunner()
    out = runner.invoke(cli, ["sweep-task", str(folder)], env={"SLURM_ARRAY_TASK_ID": "2"})
    assert out.exit_code == 0, out.output
    assert pending(folder, read_plan(folder)) == [0, 1]
    out = runner.invoke(cli, ["sweep-task", str(folder)], env={"JOB_COMPLETION_INDEX": "0"})
    assert out.exit_code == 0 and pending(folder, read_plan(folder)) == [1]


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["9"], {}, "error: task index 9 is outside 0..2"),
        ([], {"SLURM_ARRAY_TASK_ID": "", "JOB_COMPLETION_INDEX": ""}, "error: no INDEX given"),
    ],
    ids=["index-out-of-range", "no-index"],
)
def test_sweep_task_errors_are_one_line(tmp_path: Path, args: list[str], env: dict[str, str], message: str) -> None:
    folder = new_sweep(tmp_path / "s")
    out = CliRunner().invoke(cli, ["sweep-task", str(folder), *args], env=env)
    assert out.exit_code == 2 and out.stderr.startswith(message) and len(out.stderr.splitlines()) == 1, out.stderr


def test_compare_resumes_from_its_sweep_folder(tmp_path: Path) -> None:
    args = ["compare", "--trace", str(demo_trace_path()), "--cluster", str(demo_cluster_path()),
            "--policies", "fifo,sjf", "--placements", "consolidate", "--jobs", "1", "--out", str(tmp_path),
            "--no-plots", "--json"]  # fmt: skip
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.stderr
    stamp = result_path(tmp_path / "sweep", 0).stat().st_mtime_ns
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0 and result_path(tmp_path / "sweep", 0).stat().st_mtime_ns == stamp
    assert ranking(first.stdout) == ranking(again.stdout)


def ranking(stdout: str) -> list[tuple[str, float]]:
    return [(r["candidate"], r["avg_jct"]) for r in json.loads(stdout)["candidates"]]


UNREADABLE = {
    "truncated": lambda text: text[: len(text) // 2],
    "not-json": lambda text: "\x00\xff garbage",
    "not-a-result": lambda text: json.dumps({"candidate": {"queue": "fifo"}}),
    "a-list": lambda text: "[1, 2, 3]",
}


@pytest.mark.parametrize("damage", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_unreadable_results_are_named_then_run_again(tmp_path: Path, damage: Callable[[str], str]) -> None:
    folder = new_sweep(tmp_path / "s")
    first = run_sweep(folder, LocalExecutor(1))
    for index in (0, 2):
        result_path(folder, index).write_text(damage(result_path(folder, index).read_text()))
    with pytest.raises(BadResults, match=rf"^{result_path(folder, 0)}: not .* \(and 1 more\)$") as raised:
        gather(folder, read_plan(folder))
    assert raised.value.indices == (0, 2)
    warnings: list[str] = []
    done: list[int] = []
    again = run_sweep(folder, LocalExecutor(1), done.append, warnings.append)
    assert done == [0, 2] and len(warnings) == 1 and warnings[0].endswith("running those candidates again")
    assert [r.summary.avg_jct for r in again] == [r.summary.avg_jct for r in first]


def test_a_plan_cut_short_while_starting_over_starts_over_again(tmp_path: Path) -> None:
    folder = new_sweep(tmp_path / "s")
    (folder / "plan.json").write_text('{"version": 1, "trace": ')
    with pytest.raises(SweepError, match=rf"^{folder / 'plan.json'}: not valid JSON \(line 1\)"):
        read_plan(folder)
    new_sweep(folder)
    assert read_plan(folder).candidates == CANDIDATES and pending(folder, read_plan(folder)) == [0, 1, 2]


def test_sweep_files_get_the_umask_mode_not_mkstemps_private_one(tmp_path: Path) -> None:
    folder = new_sweep(tmp_path / "s")
    run_sweep(folder, LocalExecutor(1))
    modes = {path.stat().st_mode & 0o777 for path in [folder / "plan.json", *(folder / "results").iterdir()]}
    assert modes == {FILE_MODE} and FILE_MODE & 0o044  # readable by whoever reads the report


PLAN_DAMAGE = {
    "seed-a-string": ({"seed": "x"}, "seed: want int"),
    "seed-a-bool": ({"seed": True}, "seed: want int"),
    "candidates-an-object": ({"candidates": {}}, "candidates: want list"),
    "candidate-a-number": ({"candidates": [1]}, r"candidates\[0\]: want an object"),
    "candidate-queue-a-number": ({"candidates": [{"queue": 5, "placement": "x", "sizing": None,
                                                  "backfill": None}]}, r"candidates\[0\]\.queue: want str"),
    "candidate-missing-placement": ({"candidates": [{"queue": "fifo", "sizing": None, "backfill": None}]},
                                    r"candidates\[0\]\.placement: missing"),
    "unknown-field": ({"extra": 1}, "extra: not a field of a sweep plan; known: trace, fmt"),
    "missing-field": ({"seed": None}, "seed: missing"),
}  # fmt: skip


@pytest.mark.parametrize(("change", "message"), PLAN_DAMAGE.values(), ids=PLAN_DAMAGE.keys())
def test_a_damaged_plan_is_one_line_naming_the_field(tmp_path: Path, change: dict, message: str) -> None:
    folder = new_sweep(tmp_path / "s")
    data = json.loads((folder / "plan.json").read_text())
    data.update(change)
    data = {k: v for k, v in data.items() if v is not None}
    (folder / "plan.json").write_text(json.dumps(data))
    with pytest.raises(SweepError, match=rf"^{folder / 'plan.json'}: {message}"):
        read_plan(folder)
    new_sweep(folder)  # compare starts such a sweep over
    assert read_plan(folder).candidates == CANDIDATES


@pytest.fixture(scope="module")
def real_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = new_sweep(tmp_path_factory.mktemp("fuzz") / "s", CANDIDATES[:1])
    run_sweep(folder, LocalExecutor(1))
    return folder


def mutated(data: bytes, flips: list[tuple[int, int]], cut: int | None) -> bytes:
    out = bytearray(data)
    for at, byte in flips:
        out[at % len(out)] = byte
    return bytes(out[:cut] if cut is not None else out)


MUTATIONS = st.tuples(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=8),
                      st.none() | st.integers(0, 10**6))  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=MUTATIONS, noise=st.none() | st.binary(max_size=300))
def test_damaged_plan_and_result_files_never_raise_anything_but_sweep_errors(
    real_sweep: Path, tmp_path: Path, mutation: tuple[list[tuple[int, int]], int | None], noise: bytes | None
) -> None:
    """Random bytes, and random byte flips and cuts of real files: a SweepError (one line) or a read."""
    folder = tmp_path / "s"
    if not folder.exists():
        shutil.copytree(real_sweep, folder)
    originals = {"plan.json": real_sweep / "plan.json", "results/0.json": result_path(real_sweep, 0)}
    for name, original in originals.items():
        data = noise if noise is not None else mutated(original.read_bytes(), *mutation)
        (folder / name).write_bytes(data)
    try:
        read_plan(folder)
    except SweepError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(str(folder / "plan.json"))
    try:
        read_result(folder, 0)
    except BadResults as exc:
        assert "\n" not in str(exc) and exc.indices == (0,)


SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
JSON_VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6)  # fmt: skip
RESULT_KEYS = ("candidate", "summary", "jcts", "spans", "summary.avg_jct", "summary.partitions",
               "summary.jobs")  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(RESULT_KEYS), value=JSON_VALUES | st.just("<deleted>"))
def test_a_result_read_back_is_one_the_report_can_use(real_sweep: Path, tmp_path: Path, key: str,
                                                      value: object) -> None:  # fmt: skip
    """A result with one field replaced by any JSON value (or deleted) is refused, or ranks and reports."""
    data = json.loads(result_path(real_sweep, 0).read_text())
    *parents, last = key.split(".")
    holder = data
    for name in parents:
        holder = holder[name]
    if value == "<deleted>":
        del holder[last]
    else:
        holder[last] = value
    folder = tmp_path / "s"
    if not folder.exists():
        shutil.copytree(real_sweep, folder)
    result_path(folder, 0).write_text(json.dumps(data))
    try:
        result = read_result(folder, 0)
    except BadResults:
        return
    write_report(tmp_path / "report", comparison([result]))
