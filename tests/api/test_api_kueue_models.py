"""Per-model quotas in `gputwin export kueue` (gputwin.api.kueue): a model's guarantee is exactly its
ResourceFlavor's nominalQuota (no proportional split), the limits apply per flavor as they do per
model in gputwin, and only a quota's any-model part ("*") is split over the other flavors by GPUs.
The two-model cluster of test_api_kueue (a100: 16 GPUs, v100: 48)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_api_kueue import export, gpu_quotas, named, write

CASES = [
    ("exact-per-flavor", "[{tenant: vision, gpus: {a100: 12, v100: 5}}]",
     {"a100.train": {"nominalQuota": 12}, "v100.train": {"nominalQuota": 5}}),
    ("unnamed-flavor-gets-zero", "[{tenant: vision, gpus: {a100: 12}}]",
     {"a100.train": {"nominalQuota": 12}, "v100.train": {"nominalQuota": 0}}),
    ("any-part-over-the-others", "[{tenant: vision, gpus: {a100: 12, '*': 6}}]",
     {"a100.train": {"nominalQuota": 12}, "v100.train": {"nominalQuota": 6}}),
    ("limits-per-flavor", "[{tenant: vision, gpus: {a100: 12, v100: 2}, cohort: lab, borrowingLimit: 4, "
     "lendingLimit: 3}, {tenant: speech, gpus: 4, cohort: lab}]",
     {"a100.train": {"nominalQuota": 12, "borrowingLimit": 4, "lendingLimit": 3},
      "v100.train": {"nominalQuota": 2, "borrowingLimit": 4, "lendingLimit": 2}}),
]  # fmt: skip


@pytest.mark.parametrize("quotas,want", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_per_model_quotas_map_to_their_flavors(tmp_path: Path, quotas: str, want: dict) -> None:
    result = export(write(tmp_path, quotas))
    assert gpu_quotas(named(result, "ClusterQueue", "vision.train")) == want
    split_note = any("split over GPU models" in n for n in result.notes)
    assert split_note is ("speech" in quotas)  # only a plain number is still split
    assert any("any-model part" in n for n in result.notes) is ("'*'" in quotas)
