"""A TraceReplay's `spec.search` on the REAL API server (server-side dry runs against crds/): the
free-form search space survives storage exactly as written (not pruned), and the budget bound and
the seed's are enforced by the server, as the model enforces them."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

from gputwin.api.v1alpha1 import TraceReplay
from gputwin.api.workloads import MAX_SEARCH_TRIALS

CRD = "tracereplays.gputwin.io"
SPACE = {"queue": ["sjf", "qssf"], "backfill": True, "max_wait": {"low": 0, "high": 900, "step": 60},
         "las_first_threshold": {"low": 600, "high": 36000, "log": True}}  # fmt: skip
REPLAY = {"apiVersion": "gputwin.io/v1alpha1", "kind": "TraceReplay",
          "metadata": {"name": "crd-search", "namespace": "default"},
          "spec": {"trace": {"file": "jobs.csv"}, "topology": "demo",
                   "search": {"budget": 30, "seed": 4, "space": SPACE}}}  # fmt: skip


def dry_run(kubectl: Any, obj: dict[str, Any]) -> Any:
    return kubectl.run(
        "apply", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(obj), check=False
    )


def test_the_search_space_is_stored_as_written(crds: None, kubectl: Any) -> None:
    done = dry_run(kubectl, REPLAY)
    assert done.returncode == 0, done.stderr
    stored = json.loads(done.stdout)
    assert stored["spec"]["search"] == REPLAY["spec"]["search"]
    assert TraceReplay.model_validate(stored).spec.search is not None
    defaults = copy.deepcopy(REPLAY)
    defaults["spec"]["search"] = {}
    done = dry_run(kubectl, defaults)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["spec"]["search"] == {"budget": 20, "seed": 0}  # the CRD's defaults


@pytest.mark.parametrize(
    ("search", "message"),
    [
        ({"budget": MAX_SEARCH_TRIALS + 1}, f"spec.search.budget: Invalid value: {MAX_SEARCH_TRIALS + 1}"),
        ({"budget": 0}, "spec.search.budget: Invalid value: 0"),
        ({"seed": -1}, "spec.search.seed: Invalid value: -1"),
        ({"space": ["sjf"]}, 'spec.search.space: Invalid value: "array"'),
    ],
)
def test_out_of_bounds_searches_are_refused_by_the_server_and_the_model(
    crds: None, kubectl: Any, search: dict[str, Any], message: str
) -> None:
    obj = copy.deepcopy(REPLAY)
    obj["spec"]["search"] = search
    done = dry_run(kubectl, obj)
    assert done.returncode != 0 and message in done.stderr, done.stderr
    with pytest.raises(ValidationError):
        TraceReplay.model_validate(obj)
