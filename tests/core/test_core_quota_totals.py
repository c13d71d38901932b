"""PartitionQuota keeps each cohort's total (max(held, reserved) over its members) as usage changes,
so `fits` reads it instead of summing the members: on random changes (hypothesis), and set by hand
as tests do, it answers as summing a plain copy of the usage does."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.core.model import QuotaSpec
from gputwin.core.quota import PartitionQuota, _fits

QUOTAS = (QuotaSpec("a", 4, cohort="k", lending_limit=1), QuotaSpec("b", 2, cohort="k"),
          QuotaSpec("c", 3, cohort="k", borrowing_limit=2), QuotaSpec("d", 3))  # fmt: skip
TENANTS = [q.tenant for q in QUOTAS]


def _agree(quota: PartitionQuota) -> None:
    plain = dict(quota.used)  # not the quota's own mapping: `_fits` sums the members
    reserved = {"a": 3, "b": 0, "c": 0}
    assert quota.used.totals == {"k": sum(max(plain[t], r) for t, r in reserved.items())}
    for tenant in TENANTS:
        for gpus in range(0, 10):
            assert quota.fits(tenant, gpus) is _fits(quota, plain, tenant, gpus)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(TENANTS), st.integers(-4, 6)), max_size=40))
def test_running_totals_answer_as_summing_does(changes: list[tuple[str, int]]) -> None:
    quota = PartitionQuota("p", QUOTAS)
    for now, (tenant, gpus) in enumerate(changes):
        gpus = max(gpus, -quota.used[tenant])  # a tenant never holds fewer than 0 GPUs
        quota.change(float(now), tenant, used=gpus, demand=gpus)
        _agree(quota)


def test_usage_set_by_hand_keeps_the_totals() -> None:
    quota = PartitionQuota("p", QUOTAS)
    quota.used.update({"a": 1, "b": 5})
    quota.used["c"] = 4
    assert quota.used.totals == {"k": 3 + 5 + 4}
    _agree(quota)
    assert not quota.fits("b", 1) and quota.fits("d", 3)


def test_tenants_cannot_be_added_or_removed() -> None:
    quota = PartitionQuota("p", QUOTAS)
    with pytest.raises(KeyError):
        quota.used["nobody"] = 1
    with pytest.raises(TypeError, match="tenants are fixed"):
        quota.used.pop("a")
