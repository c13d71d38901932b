"""A GPUPartition's tenant quotas: guaranteed GPUs per tenant (a number, or per GPU model), the cohort
they borrow and lend in, and the limits (docs/tenancy.md; Kueue's nominalQuota, borrowingLimit and
lendingLimit; SLURM's GrpTRES). One model, its validators and its located errors; `v1alpha1`'s
GPUPartitionSpec holds a list of them.
"""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import Field, TypeAdapter, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from gputwin.api.meta import ApiModel, SlurmName
from gputwin.core.bounds import MAX_QUOTA_GPUS, MAX_TENANT_USERS, MAX_TEXT

UserName = Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]
QuotaGpus = Annotated[int, Field(ge=0, le=MAX_QUOTA_GPUS)]
QuotaModel = Annotated[str, Field(pattern=r"^(\*|[A-Za-z0-9][A-Za-z0-9._-]*)$", max_length=63)]  # a GpuModel or "*"
MAX_QUOTA_MODELS = 64
_PER_MODEL: TypeAdapter[dict[str, int]] = TypeAdapter(dict[QuotaModel, QuotaGpus])
_NUMBER: TypeAdapter[int] = TypeAdapter(QuotaGpus)


class TenantQuota(ApiModel):
    """A tenant's (an account's) guaranteed GPUs in this partition, and what it may borrow and lend
    within its cohort (Kueue's nominalQuota, borrowingLimit, lendingLimit; SLURM's GrpTRES=gres/gpu=N).
    See docs/tenancy.md."""

    tenant: SlurmName = Field(description="The tenant (account) the quota is granted to; unique in the partition.")
    users: list[UserName] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TENANT_USERS,
        description='Job users that belong to the tenant; "*" = every user no other quota of the partition '
        f"names; unset = the user named like the tenant; at most {MAX_TENANT_USERS}.",
    )
    gpus: QuotaGpus | dict[QuotaModel, QuotaGpus] = Field(
        description="GPUs guaranteed to the tenant here (its nominal quota): a number (GPUs of any model), "
        f'or GPUs per GPU model (e.g. {{a100: 16, h100: 8}}; Kueue\'s per-flavor nominalQuota, SLURM\'s '
        f'GrpTRES=gres/gpu:a100=16), each model kept apart, "*" for jobs asking for no model or another one '
        f"(unset: none); at most {MAX_QUOTA_MODELS} models.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    cohort: SlurmName | None = Field(
        default=None,
        description="Quotas of one cohort lend their idle GPUs to each other; unset = no borrowing or lending.",
    )
    borrowing_limit: int | None = Field(
        default=None,
        ge=0,
        le=MAX_QUOTA_GPUS,
        description="Most GPUs the tenant may hold above its guarantee, borrowed in its cohort (per GPU model "
        "for per-model gpus: each model's quota may borrow this many of that model); unset = no limit.",
    )
    lending_limit: int | None = Field(
        default=None,
        ge=0,
        le=MAX_QUOTA_GPUS,
        description="Most GPUs of its guarantee the tenant lends to its cohort while idle, at most gpus (per GPU "
        "model for per-model gpus, each model lending at most its own guarantee); unset = all of them.",
    )

    @field_validator("gpus", mode="before")
    @classmethod
    def _number_or_models(cls, gpus: object) -> object:
        """One located error whichever form is wrong (a union would report both forms' errors)."""
        if isinstance(gpus, dict):
            if not 0 < len(gpus) <= MAX_QUOTA_MODELS:
                raise PydanticCustomError("gpus", "gpus names 1 to {n} GPU models", {"n": MAX_QUOTA_MODELS})
            try:
                return _PER_MODEL.validate_python(gpus, strict=True)
            except ValidationError as exc:
                err = exc.errors()[0]
                raise PydanticCustomError("gpus", "{key}: {msg}", {"key": err["loc"][0], "msg": err["msg"]}) from None
        if isinstance(gpus, bool) or not isinstance(gpus, int):
            raise PydanticCustomError("gpus", "a number of GPUs, or GPUs per GPU model (a100: 16)")
        try:
            return _NUMBER.validate_python(gpus, strict=True)
        except ValidationError as exc:
            raise PydanticCustomError("gpus", exc.errors()[0]["msg"]) from None

    @property
    def most_gpus(self) -> int:
        """The largest guarantee of one model (all of them for a number): what a limit is held to."""
        return self.gpus if isinstance(self.gpus, int) else max(self.gpus.values())

    @model_validator(mode="after")
    def _limits(self) -> Self:
        if self.lending_limit is not None and self.lending_limit > self.most_gpus:
            raise PydanticCustomError("lending_limit", "lendingLimit may not exceed gpus ({gpus})",
                                      {"gpus": self.most_gpus})  # fmt: skip
        if self.cohort is None and (self.borrowing_limit is not None or self.lending_limit is not None):
            raise PydanticCustomError("cohort", "borrowingLimit and lendingLimit need a cohort")
        return self


__all__ = ["MAX_QUOTA_MODELS", "TenantQuota"]
