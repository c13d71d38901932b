"""Hostile tenancy for the SLURM renderer: names that would smuggle an option, a separator or a
newline into a ``sacctmgr`` argument (or that SLURM would silently change) are refused, one line.

Two routes: a ClusterSpec built in code (the API model is bypassed, so the renderer's own checks are
the only guard) must raise `SlurmInputError` from `render`; a manifest SLURM
cannot take (an upper-case tenant; the API already refuses it) ends `gputwin slurm render` with one
`error:` line naming the field, exit 2.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from budget import REFUSAL_CPU_SECONDS, timed  # tests/budget.py
from click.testing import CliRunner
from gputwin.adapters.slurm.errors import SlurmInputError
from gputwin.adapters.slurm.render import render

from gputwin.api.loader import load_cluster
from gputwin.cli.main import cli
from gputwin.core.model import ClusterSpec, QuotaSpec

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "tests" / "slurm" / "data" / "shared-lab-live.yaml"

HOSTILE_NAMES = {
    "option": "-i",
    "assignment": "a=b",
    "list-separator": "a,b",
    "newline": "a\nb",
    "space": "a b",
    "shell": "$(reboot)",
    "semicolon": "a;b",
    "quote": "a'b",
    "empty": "",
    "non-ascii": "ä",
    "too-long": "a" * 65,
}


def _with_quota(**fields: object) -> ClusterSpec:
    spec = load_cluster(LAB)
    part = spec.partitions[0]
    quota = dataclasses.replace(part.quotas[0], **fields)  # type: ignore[arg-type]
    return dataclasses.replace(spec, partitions=(dataclasses.replace(part, quotas=(quota, part.quotas[1])),))


@pytest.mark.parametrize("field", ["tenant", "users"])
@pytest.mark.parametrize("name", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_hostile_tenant_or_user_refused(field: str, name: str) -> None:
    value: object = (name,) if field == "users" else name
    spec = _with_quota(**{field: value})

    def refused() -> str:
        with pytest.raises(SlurmInputError) as info:
            render(spec)
        return str(info.value)

    message, seconds = timed(refused)
    assert "\n" not in message and seconds < REFUSAL_CPU_SECONDS


MODELS = {k: v for k, v in HOSTILE_NAMES.items() if v}  # an empty model means "not declared"


@pytest.mark.parametrize("name", MODELS.values(), ids=MODELS.keys())
def test_hostile_gpu_model_refused(name: str) -> None:
    spec = load_cluster(LAB)
    nodes = tuple(dataclasses.replace(n, model=name) for n in spec.topology.nodes)
    with pytest.raises(SlurmInputError, match="GPU model"):
        render(dataclasses.replace(spec, topology=dataclasses.replace(spec.topology, nodes=nodes)))


def test_qos_name_over_the_limit_refused() -> None:
    with pytest.raises(SlurmInputError, match="QOS name"):
        render(_with_quota(tenant="t" * 60))  # "t...t.shared" is 67 characters


def test_qos_names_colliding_refused() -> None:
    spec = load_cluster(LAB)
    part = spec.partitions[0]
    a = dataclasses.replace(part, name="x.y", quotas=(QuotaSpec("a", 1, ("root",)),))
    b = dataclasses.replace(part, name="y", task_types=("other",), quotas=(QuotaSpec("a.x", 1, ("daemon",)),))
    with pytest.raises(SlurmInputError, match="taken twice"):
        render(dataclasses.replace(spec, partitions=(a, b)))


def test_upper_case_tenant_is_one_line_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "lab.yaml"
    path.write_text(LAB.read_text().replace("tenant: vision", "tenant: Vision").replace("{vision: 2}", "{Vision: 2}"))
    out = CliRunner().invoke(cli, ["slurm", "render", "--cluster", str(path)])
    assert out.exit_code == 2, out.output
    assert out.stderr.count("\n") == 1 and out.stderr.startswith(f"error: {path}")
    assert "spec.quotas[0].tenant" in out.stderr and out.stdout == ""  # the API's DNS-1123 rule


def test_upper_case_tenant_in_code_refused_by_the_renderer() -> None:
    with pytest.raises(SlurmInputError, match="lowercases account and QOS names"):
        render(_with_quota(tenant="Vision"))
