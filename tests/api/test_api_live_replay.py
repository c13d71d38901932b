"""`spec.trace.live` of a TraceReplay: the bounds that keep a live replay inside the operator's budget,
refused at validation (the API server's schema says the same: crds/gputwin.io_tracereplays.yaml)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gputwin.api.workloads import MAX_LIVE_CANDIDATES, MAX_LIVE_HORIZON, MAX_LIVE_SAMPLES, TraceReplay

SJF = {"queue": "sjf"}


def doc(trace: Any, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "TraceReplay", "metadata": {"name": "r"},
            "spec": {"trace": trace, "topology": "t", "candidates": [SJF], **spec}}  # fmt: skip


def test_a_live_source_reads_with_its_defaults() -> None:
    live = TraceReplay.model_validate(doc({"live": {}})).spec.trace.live
    assert live is not None and (live.horizon_seconds, live.samples, live.seed) == (86400.0, 8, 0)
    dumped = TraceReplay.model_validate(doc({"live": {"horizonSeconds": 3600, "samples": 2}})).model_dump(
        by_alias=True, exclude_none=True)  # fmt: skip
    assert dumped["spec"]["trace"]["live"] == {"horizonSeconds": 3600.0, "samples": 2, "seed": 0}


@pytest.mark.parametrize(
    ("trace", "spec", "loc", "says"),
    [
        pytest.param({"live": {"horizonSeconds": MAX_LIVE_HORIZON + 1}}, {}, ("spec", "trace", "live", "horizonSeconds"),
                     "less than or equal", id="horizon-over-30-days"),
        pytest.param({"live": {"horizonSeconds": 0}}, {}, ("spec", "trace", "live", "horizonSeconds"), "greater than",
                     id="horizon-zero"),
        pytest.param({"live": {"horizonSeconds": float("inf")}}, {}, ("spec", "trace", "live", "horizonSeconds"), "",
                     id="horizon-infinite"),
        pytest.param({"live": {"samples": MAX_LIVE_SAMPLES + 1}}, {}, ("spec", "trace", "live", "samples"),
                     "less than or equal", id="samples-over-64"),
        pytest.param({"live": {"samples": 0}}, {}, ("spec", "trace", "live", "samples"), "greater than", id="samples-0"),
        pytest.param({"live": {"seed": -1}}, {}, ("spec", "trace", "live", "seed"), "", id="seed-negative"),
        pytest.param({"live": {"horizon": 60}}, {}, ("spec", "trace", "live", "horizon"), "", id="unknown-field"),
        pytest.param({"live": {}, "file": "a.csv"}, {}, ("spec", "trace"), "exactly one of file, configMap, sacct or live",
                     id="live-and-file"),
        pytest.param({}, {}, ("spec", "trace"), "exactly one of", id="no-source"),
        pytest.param({"live": {}}, {"search": {"budget": 5}}, ("spec",), "remove search", id="live-with-search"),
        pytest.param({"live": {}}, {"candidates": [SJF] * (MAX_LIVE_CANDIDATES + 1)}, ("spec",),
                     f"at most {MAX_LIVE_CANDIDATES} candidates", id="too-many-candidates"),
    ],
)
def test_a_live_source_out_of_bounds_is_refused_at_validation(trace: Any, spec: dict[str, Any],
                                                             loc: tuple[str, ...], says: str) -> None:  # fmt: skip
    with pytest.raises(ValidationError) as caught:
        TraceReplay.model_validate(doc(trace, **spec))
    errors = caught.value.errors()
    assert [e["loc"] for e in errors] == [loc] and says in errors[0]["msg"]
