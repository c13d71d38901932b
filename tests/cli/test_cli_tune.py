"""`gputwin tune` on the embedded demo trace and cluster: hold-out report, files, resume, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gputwin.api.convert import policy_spec
from gputwin.api.loader import read_documents
from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.api.v1alpha1 import SchedulingPolicy
from gputwin.cli.main import cli
from gputwin.cli.tune import default_name
from gputwin.sim.tune import policy_from_params


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["tune", *args])
    return result.exit_code, result.stdout, result.stderr


def demo_args(out: Path, *extra: str) -> list[str]:
    return [
        "--trace",
        str(demo_trace_path()),
        "--cluster",
        str(demo_cluster_path()),
        "--out",
        str(out),
        *extra,
    ]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """5 trials on the first 70 % of the demo trace, two worker processes, as --json."""
    out = tmp_path_factory.mktemp("tune")
    code, stdout, stderr = invoke(*demo_args(out, "--budget", "5", "--seed", "2", "--holdout", "0.3",
                                             "--jobs", "2", "--json"))  # fmt: skip
    assert code == 0, stderr
    return out, json.loads(stdout.splitlines()[-1])


def test_json_reports_best_and_baseline_on_both_parts(tuned: tuple[Path, dict]) -> None:
    out, data = tuned
    assert data == json.loads((out / "tune.json").read_text())
    split = data["split"]
    assert split["tune_jobs"] + split["holdout_jobs"] == data["trace"]["jobs"] == 3375
    assert abs(split["holdout_jobs"] - 0.3 * 3375) < 50  # ties at the cut go to the hold-out
    assert len(data["trials"]) == 5 and data["objective"] == "avg_jct" and data["direction"] == "minimize"
    best, base = data["best"], data["baseline"]
    assert best["tune"] == min(t["value"] for t in data["trials"]) == best["metrics"]["avg_jct"]
    assert best["metrics"]["jobs"] == split["tune_jobs"]
    assert best["holdout_metrics"]["jobs"] == base["metrics"]["holdout"]["jobs"] == split["holdout_jobs"]
    assert best["holdout"] == best["holdout_metrics"]["avg_jct"]
    assert base["tune"] == base["metrics"]["tune"]["avg_jct"] and base["holdout"] > 0
    # The demo cluster's own policies are beaten on the tuning part by some candidate among 5.
    assert best["tune"] < base["tune"]


def test_report_md_is_tune_jsons_verdict_for_a_person(tuned: tuple[Path, dict]) -> None:
    from gputwin.sim.tunereport import tune_markdown

    out, data = tuned
    text = (out / "report.md").read_text()
    assert text.startswith("## gputwin tune\n\n- **trace**: ") and "- **command**: `" in text  # provenance first
    body = text.split("\n\n", 2)[2].split("```yaml")[0]  # the part made from tune.json alone
    assert body == tune_markdown(data, None).split("\n\n", 1)[1].split("```yaml")[0]
    block = text.split("```yaml\n")[1].split("```")[0]  # tune.json sorts keys; the YAML keeps manifest order
    assert yaml.safe_load(block) == yaml.safe_load((out / "schedulingpolicy.yaml").read_text())
    assert f"the winner `{data['best']['policy']}`" in text and "On the hold-out" in text


def test_schedulingpolicy_yaml_validates_and_is_the_best_policy(tuned: tuple[Path, dict]) -> None:
    out, data = tuned
    path = out / "schedulingpolicy.yaml"
    (document,) = read_documents(path)  # the loader's full validation: pydantic models, no problems
    assert isinstance(document.resource, SchedulingPolicy)
    assert document.resource.metadata.name == "tuned"
    assert policy_spec(document.resource) == policy_from_params(data["best"]["params"])
    raw = yaml.safe_load(path.read_text())
    assert list(raw) == ["apiVersion", "kind", "metadata", "spec"] and raw == data["schedulingpolicy"]


def test_table_output_shows_ranked_policies_and_holdout(tmp_path: Path) -> None:
    code, stdout, stderr = invoke(*demo_args(tmp_path, "--budget", "3", "--holdout", "0.5", "--jobs", "1",
                                             "--quiet", "--name", "train-tuned"))  # fmt: skip
    assert code == 0, stderr
    assert "gputwin tune" in stdout and "avg JCT (s)" in stdout
    assert "avg_jct (minimize): best" in stdout and "avg_jct on the hold-out" in stdout
    assert "wrote" not in stdout  # --quiet
    assert "name: train-tuned" in (tmp_path / "schedulingpolicy.yaml").read_text()


def test_same_seed_same_best_and_resume_to_a_bigger_budget(tmp_path: Path) -> None:
    runs = []
    for out, budget in ((tmp_path / "a", "3"), (tmp_path / "b", "3"), (tmp_path / "a", "5")):
        code, stdout, stderr = invoke(*demo_args(out, "--budget", budget, "--jobs", "1", "--json", "--space",
                                                 str(space_file(tmp_path))))  # fmt: skip
        assert code == 0, stderr
        runs.append(json.loads(stdout))
    first, again, resumed = runs
    assert first["trials"] == again["trials"] and first["best"] == again["best"]
    assert [t["trial"] for t in resumed["trials"]] == [0, 1, 2, 3, 4]
    assert resumed["trials"][:3] == first["trials"]  # kept, not re-run


def space_file(tmp_path: Path) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text("queue: [fifo, sjf, qssf]\nplacement: [consolidate, topology-aware]\nsizing: as-requested\n"
                    "max_wait: {low: 0, high: 900, step: 60}\n")  # fmt: skip
    return path


@pytest.mark.parametrize(
    "text,message",
    [
        ("queue: [fifo, lottery]\n", ": queue: unknown queue policy 'lottery'; known: fifo, sjf"),
        ("colour: blue\n", ": colour: unknown knob; known: queue, placement, backfill"),
        ("max_wait: {low: 10, high: 1}\n", ": max_wait: low 10 is above high 1"),
        ("queue: [fifo\n", ": line 2, column 1: did not find expected"),
        ("- fifo\n", ": document: expected a mapping of knob names"),
    ],
)
def test_bad_space_file_is_a_one_line_error(tmp_path: Path, text: str, message: str) -> None:
    space = tmp_path / "space.yaml"
    space.write_text(text)
    code, stdout, stderr = invoke(*demo_args(tmp_path / "out", "--space", str(space)))
    assert code == 2
    assert stdout == ""
    assert stderr.count("\n") == 1 and stderr.startswith(f"error: {space}{message}"), stderr
    assert not (tmp_path / "out").exists()


def test_resuming_with_another_objective_is_a_one_line_error(tmp_path: Path) -> None:
    code, _, stderr = invoke(*demo_args(tmp_path, "--budget", "1", "--jobs", "1", "--quiet"))
    assert code == 0, stderr
    code, stdout, stderr = invoke(*demo_args(tmp_path, "--budget", "2", "--objective", "p99_queue"))
    assert code == 2 and stdout == ""
    assert (
        stderr
        == f"error: {tmp_path / 'study.db'}: holds a tune with other objective; use another --out or the same settings\n"
    )


def test_bad_policy_name_is_a_one_line_error_before_searching(tmp_path: Path) -> None:
    code, stdout, stderr = invoke(*demo_args(tmp_path / "out", "--name", "Not_A_Name"))
    assert code == 2 and stdout == ""
    assert stderr.count("\n") == 1 and stderr.startswith("error: SchedulingPolicy: metadata.name: ")
    assert not (tmp_path / "out").exists()


def test_one_partition_is_tuned_and_its_own_policy_written(tmp_path: Path) -> None:
    code, stdout, stderr = invoke(*demo_args(tmp_path, "--partition", "train", "--budget", "2", "--jobs", "1",
                                             "--json"))  # fmt: skip
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["partition"] == "train"
    train_jobs = data["baseline"]["metrics"]["tune"]["jobs"]
    assert 0 < train_jobs < data["trace"]["jobs"]  # judged on the train partition's jobs alone
    assert {t["metrics"]["jobs"] for t in data["trials"]} == {train_jobs}
    (document,) = read_documents(tmp_path / "schedulingpolicy.yaml")
    assert isinstance(document.resource, SchedulingPolicy)
    # The policy only train references: applying the YAML retunes train and no other partition.
    assert document.resource.metadata.name == "sjf-topology"
    assert policy_spec(document.resource) == policy_from_params(data["best"]["params"])
    code, stdout, stderr = invoke(*demo_args(tmp_path / "table", "--partition", "train", "--budget", "1",
                                             "--jobs", "1", "--quiet"))  # fmt: skip
    assert code == 0, stderr
    assert "partition train, 1 trials" in stdout
    assert f"on the tuning part ({train_jobs:,} jobs of partition train)" in stdout


@pytest.mark.parametrize(
    ("edit", "partition", "name"),
    [
        ({}, None, "tuned"),
        ({}, "dev", "fifo-first-fit"),
        ({"dev": "fifo-consolidate"}, "dev", "dev-tuned"),  # shared with infer: a policy of its own
        ({"dev": None}, "dev", "dev-tuned"),  # dev runs the built-in default
    ],
)
def test_the_default_policy_name_with_a_partition(
    tmp_path: Path, edit: dict[str, str | None], partition: str | None, name: str
) -> None:
    docs = [d for d in yaml.safe_load_all(demo_cluster_path().read_text()) if d]
    for doc in docs:
        if doc["kind"] == "GPUPartition" and doc["metadata"]["name"] in edit:
            doc["spec"]["policy"] = edit[doc["metadata"]["name"]]
            doc["spec"] = {k: v for k, v in doc["spec"].items() if v is not None}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert default_name(path, partition) == name
    assert default_name(tmp_path / "vc.csv", "dev") == "dev-tuned"  # a VC table names no policies


def test_an_unknown_partition_is_a_one_line_error_before_searching(tmp_path: Path) -> None:
    code, stdout, stderr = invoke(*demo_args(tmp_path / "out", "--partition", "gpu"))
    assert code == 2 and stdout == ""
    assert stderr == "error: --partition: unknown partition 'gpu'; known: train, dev, infer\n"
    assert not (tmp_path / "out").exists()
