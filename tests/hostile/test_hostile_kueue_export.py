"""Hostile input for `gputwin export kueue`: names that are no Kubernetes name, namespace or label
value (a ClusterSpec built in code bypasses the API's rules, so the exporter's own checks are the
only guard) are refused in one line within the refusal budget; an --out that is no regular file is
one `error:` line, exit 2, with nothing written; the most tenants the API allows export at once."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from budget import REFUSAL_CPU_SECONDS, timed  # tests/budget.py
from click.testing import CliRunner

from gputwin.api.kueue import KueueExportError, export_kueue
from gputwin.api.loader import load_cluster
from gputwin.cli.main import cli
from gputwin.core.bounds import MAX_TENANTS
from gputwin.core.model import ClusterSpec, QuotaSpec

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "tests" / "slurm" / "data" / "shared-lab-live.yaml"

HOSTILE = {
    "newline": "a\nb",
    "space": "a b",
    "upper": "Vision",
    "shell": "$(reboot)",
    "slash": "a/b",
    "dash-end": "a-",
    "non-ascii": "ä",
    "too-long": "a" * 300,
    "empty": "",
}


def _lab(**quota: object) -> ClusterSpec:
    spec = load_cluster(LAB)
    part = spec.partitions[0]
    first = dataclasses.replace(part.quotas[0], **quota)  # type: ignore[arg-type]
    return dataclasses.replace(spec, partitions=(dataclasses.replace(part, quotas=(first, part.quotas[1])),))


def _refused(spec: ClusterSpec, namespace: str | None = None) -> str:
    def attempt() -> str:
        with pytest.raises(KueueExportError) as info:
            export_kueue(spec, namespace=namespace)
        return str(info.value)

    message, seconds = timed(attempt)
    assert "\n" not in message and seconds < REFUSAL_CPU_SECONDS
    return message


@pytest.mark.parametrize("namespace", [None, "ml"], ids=["tenant-namespaces", "one-namespace"])
@pytest.mark.parametrize("name", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_tenant_refused(name: str, namespace: str | None) -> None:
    _refused(_lab(tenant=name), namespace)


@pytest.mark.parametrize("name", [v for v in HOSTILE.values() if v], ids=[k for k, v in HOSTILE.items() if v])
def test_hostile_partition_refused(name: str) -> None:
    spec = load_cluster(LAB)
    _refused(
        dataclasses.replace(spec, partitions=(dataclasses.replace(spec.partitions[0], name=name),)), "ml"
    )


@pytest.mark.parametrize("name", [v for v in HOSTILE.values() if v and v != "Vision"],
                         ids=[k for k, v in HOSTILE.items() if v and v != "Vision"])  # fmt: skip
def test_hostile_gpu_model_refused(name: str) -> None:
    spec = load_cluster(LAB)
    nodes = tuple(dataclasses.replace(n, model=name) for n in spec.topology.nodes)
    assert "model" in _refused(
        dataclasses.replace(spec, topology=dataclasses.replace(spec.topology, nodes=nodes))
    )


@pytest.mark.parametrize("out", ["dir", "/dev/null"], ids=["a-directory", "a-device"])
def test_out_that_is_no_regular_file_is_one_line(tmp_path: Path, out: str) -> None:
    target = tmp_path if out == "dir" else Path(out)
    done = CliRunner().invoke(cli, ["export", "kueue", "--cluster", str(LAB), "--out", str(target)])
    assert done.exit_code == 2, done.output
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        f"error: {target}: --out: not a regular file"
    )
    assert list(tmp_path.iterdir()) == [] and done.stdout == ""


def test_the_most_tenants_export() -> None:
    spec = load_cluster(LAB)
    quotas = tuple(QuotaSpec(f"t{i}", 0, (f"u{i}",), "lab", 1, 0) for i in range(MAX_TENANTS))
    part = dataclasses.replace(spec.partitions[0], quotas=quotas)
    result = export_kueue(dataclasses.replace(spec, partitions=(part,)))
    assert sum(o["kind"] == "ClusterQueue" for o in result.objects) == MAX_TENANTS
