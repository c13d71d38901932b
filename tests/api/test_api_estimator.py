"""SchedulingPolicy `estimator`: history by default; learned needs a plain model name, and only it has one."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gputwin.api.estimator import EstimatorSpec, cluster_model
from gputwin.api.v1alpha1 import SchedulingPolicySpec


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param({}, ("history", None), id="default-history"),
        pytest.param(
            {"type": "learned", "model": "philly-2026.v1"}, ("learned", "philly-2026.v1"), id="learned"
        ),
    ],
)
def test_accepted(given: dict[str, Any], expected: tuple[str, str | None]) -> None:
    spec = SchedulingPolicySpec.model_validate({"estimator": given} if given else {})
    assert (spec.estimator.type, spec.estimator.model) == expected


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        pytest.param({"type": "learned"}, "model is required with type learned", id="learned-without-model"),
        pytest.param({"model": "philly"}, "model is required with type learned", id="history-with-model"),
        pytest.param({"type": "learned", "model": "../etc"}, "is not a plain name", id="dot-dot-slash"),
        pytest.param({"type": "learned", "model": "a..b"}, "is not a plain name", id="inner-dot-dot"),
        pytest.param({"type": "learned", "model": "/abs"}, "is not a plain name", id="absolute"),
        pytest.param({"type": "oracle"}, "'history' or 'learned'", id="oracle-is-simulation-only"),
        pytest.param({"type": "learned", "model": "m", "path": "/x"}, "Extra inputs", id="no-path-field"),
    ],
)
def test_refused(given: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        EstimatorSpec.model_validate(given)


def test_one_model_per_cluster() -> None:
    learned = EstimatorSpec(type="learned", model="a")
    assert cluster_model([("p", EstimatorSpec()), ("q", learned), ("r", learned)]) == ("q", "a")
    assert cluster_model([("p", EstimatorSpec())]) is None
    with pytest.raises(
        ValueError, match="SchedulingPolicy/r: spec.estimator.model: 'b' but SchedulingPolicy/q"
    ):
        cluster_model([("q", learned), ("r", EstimatorSpec(type="learned", model="b"))])
