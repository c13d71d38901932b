"""Per-model quotas rendered for SLURM (adapters/slurm/render_tenancy.py, accounts.py): a quota's
GPUs per model become SLURM's typed GrpTRES (``gres/gpu:a100=16``, each cap worked out from that
model's guarantees in the cohort, ``gres/gpu`` the sum of every cap), AccountingStorageTRES lists
the typed TRES, and plan/undo against a mock sacctmgr set and restore typed caps. Plain numbers
render as they did (test_slurm_render_tenancy)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from gputwin.adapters.slurm.accounts import LiveAccounts, plan, read_live
from gputwin.adapters.slurm.render import render
from gputwin.adapters.slurm.render_tenancy import Qos, grp_gpus

from gputwin.api.loader import load_cluster
from gputwin.core.model import PartitionSpec, QuotaSpec

Q = QuotaSpec
CLUSTER = """\
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: lab}
spec:
  switches: [{name: leaf1}]
  nodeGroups:
    - {switch: leaf1, nodes: "a[1-2]", gpusPerNode: 8, model: a100}
    - {switch: leaf1, nodes: "h[1-2]", gpusPerNode: 8, model: h100}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: shared}
spec:
  topology: lab
  taskTypes: ["*"]
  nodes: "a[1-2],h[1-2]"
  quotas:
    - {tenant: vision, users: [root], gpus: {a100: 8, h100: 4}, cohort: lab, borrowingLimit: 2}
    - {tenant: speech, users: [daemon], gpus: {a100: 4, '*': 2}, cohort: lab}
"""


@pytest.mark.parametrize(("quotas", "model", "want"), [
    pytest.param((Q("a", 0, models={"a100": 8}),), "a100", [8], id="no-cohort-model-guarantee"),
    pytest.param((Q("a", 2, models={"a100": 8}),), "", [2], id="any-model-part"),
    pytest.param((Q("a", 0, cohort="c", models={"a100": 8}), Q("b", 0, cohort="c", models={"a100": 4})), "a100",
                 [12, 12], id="cohort-same-model-lends"),
    pytest.param((Q("a", 0, cohort="c", models={"a100": 8}), Q("b", 0, cohort="c", models={"h100": 4})), "a100",
                 [8, 8], id="other-model-lends-nothing"),
    pytest.param((Q("a", 0, cohort="c", models={"a100": 8}), Q("b", 0, cohort="c", lending_limit=1,
                                                                models={"a100": 4})), "a100", [9, 12],
                 id="lending-limit-per-model"),
])  # fmt: skip
def test_model_cap_is_that_models_guarantee_plus_borrowable(quotas, model: str, want: list[int]) -> None:
    part = PartitionSpec("p", ("n1",), ("*",), quotas=quotas)
    assert [grp_gpus(part, q, model) for q in quotas] == want


def _rendered(tmp_path: Path):
    path = tmp_path / "lab.yaml"
    path.write_text(CLUSTER)
    return render(load_cluster(path))


def test_per_model_quotas_render_typed_grp_tres(tmp_path: Path) -> None:
    rendered = _rendered(tmp_path)
    # vision: a100 8 + min(2, speech's 4) = 10, h100 4 + min(2, 0) = 4, any 0 + min(2, speech's 2) = 2
    # speech: a100 4 + vision's 8 = 12, any 2 + 0 = 2
    assert rendered.tenancy.qos == (Qos("vision.shared", 16, (("a100", 10), ("h100", 4))),
                                    Qos("speech.shared", 14, (("a100", 12),)))  # fmt: skip
    assert rendered.tenancy.qos[0].tres == "gres/gpu=16,gres/gpu:a100=10,gres/gpu:h100=4"
    assert "AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:h100" in rendered.nodes.decode().splitlines()
    assert any("typed GrpTRES" in note for note in rendered.tenancy.notes)


def test_plain_quotas_render_no_accounting_tres() -> None:
    rendered = render(load_cluster(Path(__file__).parent / "data" / "shared-lab-live.yaml"))
    assert "AccountingStorageTRES" not in rendered.nodes.decode()


class MockSacctmgr:
    """Answers `show` from a canned database, records nothing (a mock: no SLURM)."""

    def __init__(self, qos: str) -> None:
        self.qos = qos

    def __call__(self, argv: Sequence[str]) -> str:
        return self.qos if "qos" in argv else ""


def _qos_steps(tmp_path: Path, qos: str):
    return [s for s in plan(_rendered(tmp_path).tenancy, read_live("c", MockSacctmgr(qos)), "c") if "qos" in s.argv]


def test_mock_plan_adds_typed_caps_and_is_empty_once_held(tmp_path: Path) -> None:
    added = _qos_steps(tmp_path, "")
    assert added[0].argv[-1] == "GrpTRES=gres/gpu=16,gres/gpu:a100=10,gres/gpu:h100=4"
    held = "vision.shared|gres/gpu=16,gres/gpu:a100=10,gres/gpu:h100=4\nspeech.shared|gres/gpu=14,gres/gpu:a100=12\n"
    assert _qos_steps(tmp_path, held) == []


def test_mock_plan_modifies_a_typed_cap_and_undoes_it(tmp_path: Path) -> None:
    live = "vision.shared|gres/gpu=16,gres/gpu:a100=3,gres/gpu:v100=2\nspeech.shared|gres/gpu=14,gres/gpu:a100=12\n"
    (step,) = _qos_steps(tmp_path, live)
    assert step.argv[-1] == "GrpTRES=gres/gpu=16,gres/gpu:a100=10,gres/gpu:h100=4,gres/gpu:v100=-1"
    assert step.undo[-1] == "GrpTRES=gres/gpu=16,gres/gpu:a100=3,gres/gpu:h100=-1,gres/gpu:v100=2"


def test_live_typed_caps_are_read_apart_from_the_untyped_one() -> None:
    live = read_live("c", MockSacctmgr("x|cpu=4,gres/gpu:a100=3,gres/gpu=7\ny|gres/gpu:h100=1\n"))
    assert (live.qos, live.typed) == ({"x": 7, "y": None}, {"x": (("a100", 3),), "y": (("h100", 1),)})
    assert LiveAccounts().typed == {}
