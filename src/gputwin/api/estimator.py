"""SchedulingPolicy's `estimator`: which run-time predictor QSSF, SRTF and history sizing use.

`history` (the default) is the core's running mean; `learned` names a model saved by
`gputwin estimator train`, by NAME only: the operator reads it from the admin's model folder
(`GPUTWIN_MODEL_DIR`, see `gputwin.estimators.modeldir`), never from a path a resource gives.
The name pattern is in the CRD (the API server refuses a bad one too); `..` is refused here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from gputwin.api.meta import ApiModel
from gputwin.estimators.modeldir import MODEL_DIR_ENV, MODEL_NAME, MODEL_NAME_RULE


def _no_dots(name: str) -> str:
    if MODEL_NAME.fullmatch(name) is None or ".." in name:
        raise PydanticCustomError(
            "model_name", "{name} is not {rule}", {"name": repr(name[:80]), "rule": MODEL_NAME_RULE}
        )
    return name


ModelName = Annotated[
    str,
    Field(min_length=1, max_length=63, json_schema_extra={"pattern": f"^{MODEL_NAME.pattern}$"}),
    AfterValidator(_no_dots),
]


class EstimatorSpec(ApiModel):
    """The run-time estimator of the partitions using this policy."""

    type: Literal["history", "learned"] = Field(
        default="history",
        description="history: mean run time of the user's earlier jobs of that name (then the user's, then "
        "all jobs'); learned: gradient-boosted trees saved by `gputwin estimator train`, named by model.",
    )
    model: ModelName | None = Field(
        default=None,
        description=f"learned only: the saved model's name, a folder in the operator's {MODEL_DIR_ENV} "
        f"(set by an admin); {MODEL_NAME_RULE}. Never a path.",
    )

    @model_validator(mode="after")
    def _model_with_learned(self) -> Self:
        if (self.type == "learned") != (self.model is not None):
            raise PydanticCustomError(
                "estimator_model", "model is required with type learned, and only with it", {}
            )
        return self


def cluster_model(uses: Iterable[tuple[str, EstimatorSpec]]) -> tuple[str, str] | None:
    """(policy, model) of the learned model the used policies name, None when all use history.

    The scheduler has one estimator for the whole cluster, so this model predicts for every
    partition once one used policy names it; two policies naming different models are refused
    (`uses`: (policy name, its estimator) of each policy a partition references)."""
    named = sorted({(spec.model, policy) for policy, spec in uses if spec.model is not None})
    if len({model for model, _ in named}) > 1:
        (first, a), (second, b) = named[0], named[-1]
        raise ValueError(f"SchedulingPolicy/{b}: spec.estimator.model: {second!r} but SchedulingPolicy/{a} "
                         f"names {first!r}; the cluster's scheduler has one estimator")  # fmt: skip
    return (named[0][1], named[0][0]) if named else None
