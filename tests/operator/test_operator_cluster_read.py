"""read_cluster remembers: the same declarations give back the same view, any declared change a new one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gputwin.operator.cluster import read_cluster
from gputwin.operator.store import MemoryStore

SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"


def store() -> MemoryStore:
    files = (SAMPLES / "two-leaf.yaml", SAMPLES / "policies.yaml")
    return MemoryStore(d for f in files for d in yaml.safe_load_all(f.read_text()) if d)


def name(s: MemoryStore, kind: str) -> str:
    return str(s.list(kind)[0]["metadata"]["name"])


def status_write(s: MemoryStore) -> None:
    s.patch_status("SwitchTopology", None, name(s, "SwitchTopology"), {"nodes": 99})


def relabel(s: MemoryStore) -> None:
    obj = s.list("GPUPartition")[0]
    obj["metadata"].setdefault("labels", {})["team"] = "a"
    s.put(obj)


def policy_edit(s: MemoryStore) -> None:
    s.patch_spec("SchedulingPolicy", None, name(s, "SchedulingPolicy"), {"queue": {"policy": "sjf"}})


def deletion(s: MemoryStore) -> None:
    assert s.delete("GPUPartition", None, name(s, "GPUPartition"))


Change = Callable[[MemoryStore], Any]


@pytest.mark.parametrize(("change", "same"), [
    (lambda s: None, True),
    (status_write, True),  # our own status writes must not make the next pass re-read everything
    (relabel, False),
    (policy_edit, False),
    (deletion, False),
])  # fmt: skip
def test_a_view_is_reused_only_while_nothing_declared_changed(change: Change, same: bool) -> None:
    s = store()
    first = read_cluster(s)
    assert first.spec is not None
    change(s)
    again = read_cluster(s, first)
    assert (again is first) is same
    fresh = read_cluster(s)  # remembered or not, the view says what a fresh read says
    models = [[(d.kind, d.name, d.model) for d in view.declared] for view in (again, fresh)]
    assert models[0] == models[1]
    assert (again.issues, again.spec, again.blocker) == (fresh.issues, fresh.spec, fresh.blocker)
