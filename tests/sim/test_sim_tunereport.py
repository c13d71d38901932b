"""`gputwin tune`'s report.md (gputwin.sim.tunereport), made from tune.json's object alone."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gputwin.sim.provenance import InputFile, Provenance
from gputwin.sim.tunereport import distinct, tune_markdown

POLICY = {"apiVersion": "gputwin.io/v1alpha1", "kind": "SchedulingPolicy", "metadata": {"name": "tuned"},
          "spec": {"queue": {"policy": "sjf"}}}  # fmt: skip


def trial(number: int, policy: str, value: float | None, **metrics: float) -> dict[str, Any]:
    return {"trial": number, "policy": policy, "params": {}, "value": value,
            "metrics": {"jobs": 100, "avg_jct": value, **metrics}}  # fmt: skip


def data(direction: str = "minimize", holdout: float | None = None, **extra: Any) -> dict[str, Any]:
    trials = [trial(0, "fifo/first-fit", 900.0), trial(1, "sjf/first-fit", 300.0), trial(2, "sjf/first-fit", 300.0),
              trial(3, "qssf/consolidate", 450.5), trial(4, "las/random", None)]  # fmt: skip
    return {"objective": "avg_jct", "direction": direction, "partition": None,
            "split": {"cut": 13_459.0, "tune_jobs": 21_508, "holdout_jobs": 9_248},
            "best": {"policy": "sjf/first-fit", "tune": 300.0, "holdout": holdout},
            "baseline": {"tune": 750.0, "holdout": 500.0 if holdout is not None else None},
            "trials": trials, "schedulingpolicy": POLICY, **extra}  # fmt: skip


@pytest.mark.parametrize(
    ("direction", "order"),
    [
        ("minimize", ["sjf/first-fit", "qssf/consolidate", "fifo/first-fit"]),
        ("maximize", ["fifo/first-fit", "qssf/consolidate", "sjf/first-fit"]),
    ],
    ids=["minimised", "maximised"],
)
def test_distinct_keeps_each_policys_best_trial_best_first_and_drops_unfinished(direction: str,
                                                                                order: list[str]) -> None:  # fmt: skip
    rows = distinct(data()["trials"], direction)
    assert [r["policy"] for r in rows] == order
    assert next(r for r in rows if r["policy"] == "sjf/first-fit")["trial"] == 1  # the tie: lower trial number


def test_the_report_states_the_verdict_with_units_and_the_change_against_the_baseline() -> None:
    text = tune_markdown(data(holdout=250.0), None)
    assert text.startswith("## gputwin tune\n\n**avg JCT (s)**, minimized: the winner `sjf/first-fit` reaches 300.0 "
                           "against the cluster's own policies' 750.0 (-60.0%) on the tuning part, 21,508 jobs.")
    assert "On the hold-out (9,248 jobs submitted from 13,459 s): 250.0 against 500.0 (-50.0%)." in text
    assert "| 1 | sjf/first-fit | 100 | 300.0 |" in text and "| 3 | fifo/first-fit | 100 | 900.0 |" in text
    assert "The 3 best distinct policies of 5 trials" in text


def test_without_a_holdout_there_is_no_holdout_sentence() -> None:
    assert "hold-out" not in tune_markdown(data(), None)


def test_the_written_policy_is_in_the_report_as_yaml_that_reads_back() -> None:
    text = tune_markdown(data(), None)
    block = text.split("```yaml\n")[1].split("```")[0]
    assert yaml.safe_load(block) == POLICY


def test_provenance_heads_the_report_and_a_pipe_cannot_break_the_table() -> None:
    origin = Provenance(InputFile("jobs|x.csv", "ab" * 32, 10), InputFile("c.yaml", "cd" * 32, 5), "0.1.0",
                        "pure Python core", "2026-12-01T00:00:00Z", "gputwin tune --trace 'jobs|x.csv'")  # fmt: skip
    odd = data()
    odd["trials"] = [trial(0, "a|b", 10.0)]
    text = tune_markdown(odd, origin)
    assert "- **command**: `gputwin tune --trace 'jobs\\|x.csv'`" in text
    assert "| 1 | a\\|b |" in text
