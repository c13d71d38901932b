"""What a queued GPUJob says about why it waits (`operator/job_events.py`), on an in-memory store.

The cluster is `manifests/examples/tenancy-kube.yaml` (vision and speech 12 GPUs each in cohort
`lab`, others 8 outside it, 32 GPUs) read as the operator reads it; the live counterpart is
tests/operator/test_operator_tenancy_live.py. Without quotas (manifests/samples/two-leaf.yaml) the
message stays what it was.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_operator_controller import T0, TWO_LEAF, job, manifests, setup, status

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "manifests" / "examples" / "tenancy-kube.yaml"
SPEECH_WAITS = "waiting for 8 GPUs as tenant speech (guaranteed 12, cohort lab)"


def queued(name: str, store: object) -> tuple[str, str]:
    found = status(store, "GPUJob", name)  # type: ignore[arg-type]
    cond = next(c for c in found["conditions"] if c["type"] == "Scheduled")
    return found["phase"], cond["message"]


@pytest.mark.parametrize(
    ("user", "gpus", "message"),
    [
        ("carol", 8, SPEECH_WAITS),
        ("alice", 4, "waiting for 4 GPUs as tenant vision (guaranteed 12, cohort lab)"),
        ("dave", 8, "waiting for 8 GPUs as tenant others (guaranteed 8)"),  # the "*" entry, no cohort
    ],
    ids=["cohort-member", "other-member", "catch-all"],
)
def test_a_queued_job_names_the_tenant_its_quota_counts_it_under(user: str, gpus: int, message: str) -> None:
    # The partition is full (vision 12 + speech 12 + others 8), so every further job queues.
    full = [job("v", 12, 600, "team", user="alice"), job("s", 12, 600, "team", user="carol"),
            job("o", 8, 600, "team", user="dave")]  # fmt: skip
    store, _, controller = setup(*full, job("w", gpus, 60, "team", user=user), cluster=manifests(EXAMPLE))
    controller.reconcile(T0)
    assert {n: status(store, "GPUJob", n)["phase"] for n in "vso"} == dict.fromkeys("vso", "Running")
    assert queued("w", store) == ("Queued", message)


def test_a_job_over_its_quota_waits_with_a_whole_node_free_and_says_as_whom() -> None:
    """vision and speech at their guarantees (8 + 4 GPUs each: consolidate leaves one node idle),
    so speech's next 8-GPU job would fit the idle node, yet it waits: the cohort has no idle quota."""
    store, _, controller = setup(cluster=manifests(EXAMPLE))
    for t, (name, user, gpus) in enumerate((("v", "alice", 8), ("s", "carol", 8), ("vb", "alice", 4),
                                            ("sb", "carol", 4), ("more", "carol", 8))):  # fmt: skip
        store.put(job(name, gpus, 600, "team", user=user))  # one at a time: fifo keeps this order
        controller.reconcile(T0 + t)
    assert controller.scheduler is not None
    ledger = controller.scheduler.partitions["lab-team"].ledger
    assert ledger.free_gpus == 8 and ledger.idle_count() == 1
    assert queued("more", store) == ("Queued", SPEECH_WAITS)


def test_without_quotas_a_queued_job_says_only_its_gpus() -> None:
    jobs = (job("a", 8, 100), job("b", 8, 100), job("c", 8, 50))
    store, _, controller = setup(*jobs, cluster=manifests(TWO_LEAF))
    controller.reconcile(T0)
    assert queued("c", store) == ("Queued", "waiting for 8 GPUs")
