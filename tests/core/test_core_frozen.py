"""The core's frozen values pickle and copy in both builds (gputwin.core.frozen).

Compiled by mypyc, a frozen dataclass unpickled field by field raised `FrozenInstanceError` in
every worker of `gputwin tune --holdout` (a broken process pool). These round-trips run on the
compiled wheel in CI as well as here.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import pickle
import pkgutil

import pytest
from cluster_builders import build_cluster, build_jobs

import gputwin.core
from gputwin.core.decision import Decision, Preempt, Reject, Resize, Start
from gputwin.core.frozen import Frozen
from gputwin.core.history import TableEstimator
from gputwin.core.model import Candidate, OverheadModel, Placement, PolicySpec, QuotaSpec
from gputwin.core.options import SchedulerOptions
from gputwin.core.quota import TenantUsage
from gputwin.core.sizing import SizeChoice
from gputwin.core.topology import Span

CLUSTER = build_cluster({"s0": {"l0": [8, 8], "l1": [8]}}, partitions=[("a", (0, 1), ("*",)), ("b", (2,), ("x",))])
VALUES = [
    build_jobs([("j1", 0.0, 60.0, 2, {"user": "u1"})])[0],
    CLUSTER,  # its topology, switches, nodes, partitions and their policies inside
    PolicySpec(queue="qssf", placement="topology-aware", backfill=True, params={"max_wait": 30.0},
               fairness="fairshare", weights={"t1": 2.0}),  # fmt: skip
    Candidate("sjf", "consolidate", "as-requested", True),
    QuotaSpec("team-a", 8),
    OverheadModel(),
    Placement(((0, 2), (1, 2)), 1, 0),
    Preempt("j1", "a", 30.0),
    Resize("j1", 4, 2),
    Reject("j1", "too big"),
    TableEstimator({"train": 60.0}),
    SchedulerOptions(release_lag=1.0),
    TenantUsage("team-a", "a", 8, 1.0, 2.0, 3.0, 4.0),
    SizeChoice(4, 120.0),
    Span(2, 1),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_a_frozen_value_survives_pickle_and_copy(value: object) -> None:
    for back in (pickle.loads(pickle.dumps(value)), copy.copy(value), copy.deepcopy(value)):
        assert type(back) is type(value)
        assert dataclasses.astuple(back) == dataclasses.astuple(value)  # type: ignore[call-overload]


START = Start("j1", "a", ((0, 2), (1, 2)), 60.0, 0.05, 1, 0, 3)


@pytest.mark.parametrize("value", [START, Decision((START,), (Preempt("j2", "a", 30.0),), wakes=((5.0, "a"),))],
                         ids=["Start", "Decision"])  # fmt: skip
def test_a_decision_survives_pickle_and_copy(value: object) -> None:
    """The plain value classes of gputwin.core.decision (compiled, a default pickle called the
    constructor with no arguments)."""
    for back in (pickle.loads(pickle.dumps(value)), copy.copy(value), copy.deepcopy(value)):
        assert type(back) is type(value) and back == value


def test_the_cluster_survives_with_every_field() -> None:
    assert pickle.loads(pickle.dumps(CLUSTER)) == CLUSTER


def _frozen_dataclasses() -> list[type]:
    found: list[type] = []
    for info in pkgutil.iter_modules(gputwin.core.__path__):
        module = importlib.import_module(f"gputwin.core.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__ and dataclasses.is_dataclass(value):
                if value.__dataclass_params__.frozen:  # type: ignore[attr-defined]
                    found.append(value)
    return found


def test_every_frozen_dataclass_of_the_core_is_a_frozen_value() -> None:
    """A new frozen dataclass that forgot the base would pickle interpreted and break compiled."""
    found = _frozen_dataclasses()
    assert len(found) >= 15
    assert [c.__name__ for c in found if not issubclass(c, Frozen)] == []
    # rebuilt positionally: a keyword-only field would need `rebuild` to pass names
    assert [c.__name__ for c in found if any(f.kw_only for f in dataclasses.fields(c))] == []


def test_every_tested_kind_is_listed() -> None:
    """Each frozen value kind has a round-trip above (so a new one gets one too)."""
    assert {c.__name__ for c in _frozen_dataclasses()} - {type(v).__name__ for v in VALUES} <= {
        "SwitchSpec", "NodeSpec", "TopologySpec", "PartitionSpec"}  # fmt: skip  (inside CLUSTER)
