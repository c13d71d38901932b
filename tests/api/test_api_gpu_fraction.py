"""GPUJob's `gpuFraction` (docs/tenancy.md, Fractional GPUs): a share of one GPU reaches the core as
JobSpec.gpu_milli; unset is whole GPUs; out of range, or with more than one GPU, is refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gputwin.api.workloads import GPUJob
from gputwin.operator.jobs import job_spec


def _job(**spec: object) -> GPUJob:
    return GPUJob.model_validate({"apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob", "metadata": {"name": "j"},
                                  "spec": {"taskType": "infer", "gpus": 1, **spec}})  # fmt: skip


# (id, spec fields, JobSpec.gpu_milli)
ACCEPTED = [
    ("unset-is-whole-gpus", {}, 1000),
    ("a-quarter", {"gpuFraction": 0.25}, 250),
    ("smallest", {"gpuFraction": 0.001}, 1),
    ("largest", {"gpuFraction": 0.999}, 999),
    ("rounded-to-a-milli", {"gpuFraction": 0.3333}, 333),
    ("whole-jobs-of-many-gpus", {"gpus": 4}, 1000),
]


@pytest.mark.parametrize("spec,milli", [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_gpu_fraction_reaches_the_core_in_milli(spec: dict, milli: int) -> None:
    assert job_spec("default/j", _job(**spec), 0.0).gpu_milli == milli


# (id, spec fields, what the error says)
REFUSED = [
    ("zero", {"gpuFraction": 0.0}, "greater than or equal to 0.001"),
    ("whole", {"gpuFraction": 1.0}, "less than or equal to 0.999"),
    ("of-two-gpus", {"gpus": 2, "gpuFraction": 0.5}, "gpuFraction is a share of one GPU: set gpus to 1"),
]


@pytest.mark.parametrize("spec,message", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_gpu_fraction_out_of_range_is_refused(spec: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _job(**spec)
