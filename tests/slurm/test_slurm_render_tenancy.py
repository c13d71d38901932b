"""Tenancy out, offline: quotas -> QOS caps, weights -> shares, fairshare -> priority lines, models ->
typed GRES node lines, and `accounts.plan`/`apply_tenancy` against a mock sacctmgr (named as such).

No SLURM needed; the live counterpart is test_slurm_tenancy_live.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner
from gputwin.adapters.slurm.accounts import (
    LiveAccounts,
    SlurmAccountsError,
    apply_tenancy,
    commands_text,
    plan,
    read_live,
)
from gputwin.adapters.slurm.errors import SlurmCommandError, SlurmInputError
from gputwin.adapters.slurm.render import PARTITIONS, SCHEDULING, render
from gputwin.adapters.slurm.render_tenancy import Tenancy, grp_gpus, slurm_duration, tenant_shares

from gputwin.api.loader import load_cluster
from gputwin.cli.main import cli
from gputwin.core.model import ClusterSpec, PartitionSpec, PolicySpec, QuotaSpec

ROOT = Path(__file__).resolve().parents[2]
SHARED_LAB = ROOT / "manifests" / "examples" / "shared-lab.yaml"
LIVE_LAB = Path(__file__).parent / "data" / "shared-lab-live.yaml"


def _part(*quotas: QuotaSpec, policy: PolicySpec = PolicySpec(), name: str = "p") -> PartitionSpec:
    return PartitionSpec(name, ("n1",), ("*",), policy, quotas=quotas)


Q = QuotaSpec


@pytest.mark.parametrize(("quotas", "want"), [
    pytest.param((Q("a", 8),), [8], id="no-cohort-guarantee-only"),
    pytest.param((Q("a", 8, borrowing_limit=4),), [8], id="no-cohort-borrowing-limit-ignored"),
    pytest.param((Q("a", 8, cohort="c"), Q("b", 4, cohort="c")), [12, 12], id="cohort-no-limits-all-lendable"),
    pytest.param((Q("a", 8, cohort="c", borrowing_limit=2), Q("b", 4, cohort="c")), [10, 12], id="borrowing-limit"),
    pytest.param((Q("a", 8, cohort="c"), Q("b", 4, cohort="c", lending_limit=1)), [9, 12], id="lending-limit-of-lender"),
    pytest.param((Q("a", 8, cohort="c"), Q("b", 4, cohort="d")), [8, 4], id="different-cohorts-lend-nothing"),
    pytest.param((Q("a", 0, cohort="c", borrowing_limit=50), Q("b", 6, cohort="c")), [6, 6], id="borrow-capped-by-lendable"),
])  # fmt: skip
def test_qos_cap_is_guarantee_plus_borrowable(quotas: tuple[QuotaSpec, ...], want: list[int]) -> None:
    part = _part(*quotas)
    assert [grp_gpus(part, q) for q in quotas] == want


@pytest.mark.parametrize(("seconds", "want"), [
    pytest.param(3600, "01:00:00", id="hour"),
    pytest.param(86400, "1-00:00:00", id="day"),
    pytest.param(7 * 86400, "7-00:00:00", id="slurm-default-week"),
    pytest.param(90, "00:02:00", id="rounded-to-minutes"),
    pytest.param(1, "00:01:00", id="at-least-a-minute"),
])  # fmt: skip
def test_half_life_as_scontrol_prints_it(seconds: float, want: str) -> None:
    assert slurm_duration(seconds) == want


@pytest.mark.parametrize(("weights", "want"), [
    pytest.param({"a": 2.0}, {"a": 2, "b": 1}, id="integers-as-given"),
    pytest.param({"a": 1.5}, {"a": 150, "b": 100}, id="fractions-times-100"),
    pytest.param({}, {"a": 1, "b": 1}, id="default-one"),
])  # fmt: skip
def test_weights_become_shares(weights: dict[str, float], want: dict[str, int]) -> None:
    policy = PolicySpec(fairness="fairshare", weights=weights)
    cluster = _cluster(_part(Q("a", 1), Q("b", 1), policy=policy))
    assert tenant_shares(cluster) == want


def _cluster(*parts: PartitionSpec) -> ClusterSpec:
    base = load_cluster(LIVE_LAB)
    parts = tuple(dataclasses.replace(p, nodes=("gpu01",)) for p in parts)
    return dataclasses.replace(base, partitions=parts)


def test_shared_lab_renders_accounts_qos_users_and_priority() -> None:
    rendered = render(load_cluster(SHARED_LAB))
    assert commands_text(plan(rendered.tenancy, LiveAccounts(), "lab")) == GOLDEN_COMMANDS
    scheduling = rendered[SCHEDULING].decode()
    assert "PriorityWeightFairshare=10000\n" in scheduling and "PriorityDecayHalfLife=1-00:00:00\n" in scheduling
    assert ("AccountingStorageEnforce", "qos") in rendered.requires
    assert ("PriorityType", "priority/multifactor") in rendered.requires
    assert any('"*"' in note for note in rendered.tenancy.notes)  # others' users cannot be listed


GOLDEN_COMMANDS = """\
sacctmgr -i add qos vision.shared GrpTRES=gres/gpu=48
sacctmgr -i add qos speech.shared GrpTRES=gres/gpu=56
sacctmgr -i add qos others.shared GrpTRES=gres/gpu=8
sacctmgr -i add account vision Cluster=lab Fairshare=2 Description=gputwin-tenant Organization=gputwin
sacctmgr -i add account speech Cluster=lab Fairshare=1 Description=gputwin-tenant Organization=gputwin
sacctmgr -i add account others Cluster=lab Fairshare=1 Description=gputwin-tenant Organization=gputwin
sacctmgr -i add user alice Account=vision Partition=shared Cluster=lab QOS=vision.shared DefaultQOS=vision.shared
sacctmgr -i add user bob Account=vision Partition=shared Cluster=lab QOS=vision.shared DefaultQOS=vision.shared
sacctmgr -i add user carol Account=speech Partition=shared Cluster=lab QOS=speech.shared DefaultQOS=speech.shared
"""


def test_no_quotas_no_fairshare_renders_no_tenancy() -> None:
    rendered = render(load_cluster(ROOT / "manifests" / "samples" / "two-leaf.yaml"))
    assert not rendered.tenancy and rendered.node_models == ()
    assert "PriorityWeightFairshare=0\n" in rendered[SCHEDULING].decode()
    assert "PriorityDecayHalfLife" not in rendered[SCHEDULING].decode()


@pytest.mark.parametrize(("fairness", "want"), [
    pytest.param("fairshare", " TRESBillingWeights=GRES/gpu=1.0", id="fairshare-bills-gpu-seconds"),
    pytest.param("none", "", id="no-fairshare-keeps-slurm-default-billing"),
    pytest.param("drf", "", id="drf-not-rendered-keeps-default-billing"),
])  # fmt: skip
def test_fairshare_partition_bills_gpus_only(fairness: str, want: str) -> None:
    """SLURM bills CPUs by default; the twin's fair share counts GPU-seconds, so a fairshare
    partition lists only GRES/gpu (unlisted TRES, CPU and memory included, weigh 0)."""
    spec = load_cluster(LIVE_LAB)
    part = spec.partitions[0]
    policy = dataclasses.replace(part.policy, fairness=fairness)
    rendered = render(dataclasses.replace(spec, partitions=(dataclasses.replace(part, policy=policy),)))
    line = rendered[PARTITIONS].decode().splitlines()[1]
    assert line == f"PartitionName=shared Nodes=gpu[01-04] PriorityTier=0 PreemptMode=OFF MaxTime=INFINITE State=UP{want} Default=YES"
    assert (("AccountingStorageTRES", "gres/gpu") in rendered.requires) == (fairness == "fairshare")


def test_models_give_typed_gres_node_lines() -> None:
    rendered = render(load_cluster(LIVE_LAB))
    assert rendered.nodes.decode().splitlines()[1:] == ["NodeName=gpu[01-16] Gres=gpu:h100:8"]
    assert dict(rendered.node_models)["gpu16"] == "h100"


@pytest.mark.parametrize(("change", "match"), [
    pytest.param({"weights": {"vision": 3}}, "weights differ", id="weights-differ-between-partitions"),
    pytest.param({"half_life": 60.0}, "halfLifeSeconds differ", id="half-lives-differ"),
])  # fmt: skip
def test_cluster_wide_slurm_settings_must_agree(change: dict[str, object], match: str) -> None:
    base = load_cluster(LIVE_LAB)
    part = base.partitions[0]
    other = dataclasses.replace(part, name="other", task_types=("other",), policy=dataclasses.replace(part.policy, **change))  # type: ignore[arg-type]
    with pytest.raises(SlurmInputError, match=match):
        render(dataclasses.replace(base, partitions=(part, other)))


# --- plan and apply against a mock sacctmgr -------------------------------------------------------


class MockSacctmgr:
    """Answers `show` from a canned database and records every other command (a mock: no SLURM)."""

    def __init__(self, qos: str = "normal|\n", assoc: str = "root||||normal|\n", fail_on: str = "") -> None:
        self.qos, self.assoc, self.fail_on = qos, assoc, fail_on
        self.ran: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str]) -> str:
        if "show" in argv:
            return self.qos if "qos" in argv else self.assoc
        self.ran.append(tuple(argv))
        if self.fail_on and self.fail_on in argv:
            raise SlurmCommandError(f"sacctmgr exited with status 1: refused {self.fail_on}")
        return ""


def _tenancy() -> Tenancy:
    return render(load_cluster(LIVE_LAB)).tenancy


def test_mock_plan_against_matching_database_is_empty() -> None:
    mock = MockSacctmgr(
        qos="normal|\nvision.shared|gres/gpu=20\nspeech.shared|cpu=4,gres/gpu=24\n",
        assoc="vision|||2|normal|\nspeech|||1|normal|\nvision|root|shared|1|vision.shared|vision.shared\n"
              "speech|daemon|shared|1|speech.shared|speech.shared\n",
    )  # fmt: skip
    assert plan(_tenancy(), read_live("c", mock), "c") == ()


def test_mock_plan_modifies_what_differs_and_can_modify_back() -> None:
    mock = MockSacctmgr(qos="vision.shared|gres/gpu=4\n", assoc="vision|||1|normal|\n")
    steps = plan(_tenancy(), read_live("c", mock), "c")
    first = steps[0]
    assert first.argv[2:] == ("modify", "qos", "where", "name=vision.shared", "set", "GrpTRES=gres/gpu=20")
    assert first.undo[-1] == "GrpTRES=gres/gpu=4"
    share = next(s for s in steps if "account" in s.argv and "modify" in s.argv)
    assert share.argv[-1] == "Fairshare=2" and share.undo[-1] == "Fairshare=1"


def test_mock_failure_undoes_what_ran_in_reverse() -> None:
    mock = MockSacctmgr(fail_on="daemon")
    with pytest.raises(SlurmAccountsError, match="rolled back: 5 sacctmgr command") as info:
        apply_tenancy(_tenancy(), "c", runner=mock)
    assert info.value.restored
    done = [c for c in mock.ran if "delete" not in c]
    undone = [c for c in mock.ran if "delete" in c]
    assert [c[3] for c in undone] == ["user", "account", "account", "qos", "qos"]  # reverse order
    assert len(done) == 6  # five ran, the sixth failed


def test_mock_failed_undo_is_reported_partial() -> None:
    class Stubborn(MockSacctmgr):
        def __call__(self, argv: Sequence[str]) -> str:
            if "delete" in argv and "qos" in argv:
                raise SlurmCommandError("sacctmgr exited with status 1: in use")
            return super().__call__(argv)

    with pytest.raises(SlurmAccountsError, match="rollback partial, left to undo: sacctmgr -i delete qos") as info:
        apply_tenancy(_tenancy(), "c", runner=Stubborn(fail_on="daemon"))
    assert not info.value.restored


def test_mock_dry_run_runs_nothing() -> None:
    mock = MockSacctmgr()
    result = apply_tenancy(_tenancy(), "c", dry_run=True, runner=mock)
    assert len(result.steps) == 6 and mock.ran == [] and not result.applied


def test_offline_dry_run_prints_every_sacctmgr_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "nowhere" / "slurm.conf"))  # no SLURM to ask
    out = CliRunner().invoke(cli, ["slurm", "apply", "--cluster", str(SHARED_LAB), "--dry-run",
                                   "--conf-dir", str(tmp_path)])  # fmt: skip
    assert out.exit_code == 0, out.output
    assert GOLDEN_COMMANDS.replace("=lab ", "=CLUSTER_NAME ") in out.stdout
    assert "9 sacctmgr command(s) would run; nothing written" in out.stdout
    assert list(tmp_path.iterdir()) == []
    assert 'note: partition shared: tenant others\'s "*"' in out.stderr
