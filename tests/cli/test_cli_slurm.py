"""`gputwin slurm render -o json` and `slurm apply --dry-run` without a live SLURM (issue 18 items 2, 4).

No SLURM needed: "no live SLURM" is made two ways, with SLURM_CONF naming a missing file (scontrol and
sacct installed but failing, as on a login node without the cluster's config) and with a PATH that
holds no SLURM command (a laptop). The sample cluster is manifests/samples/two-leaf.yaml.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from gputwin.adapters.slurm.apply import SlurmInputError, validate
from gputwin.adapters.slurm.render import PARTITIONS, render
from gputwin.api.loader import load_cluster
from gputwin.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
TWO_LEAF = ROOT / "manifests" / "samples" / "two-leaf.yaml"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["slurm", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(params=["SLURM_CONF-missing", "no-SLURM-on-PATH"])
def no_slurm(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.param == "SLURM_CONF-missing":
        monkeypatch.setenv("SLURM_CONF", str(tmp_path / "nowhere" / "slurm.conf"))
    else:
        empty = tmp_path / "empty-bin"
        empty.mkdir()
        monkeypatch.setenv("PATH", str(empty))


def test_render_json_has_every_file_and_what_was_derived() -> None:
    code, out, err = invoke("render", "--cluster", str(TWO_LEAF), "-o", "json")
    assert code == 0, err
    data = json.loads(out)
    code, text, _ = invoke("render", "--cluster", str(TWO_LEAF))
    shown = {part.split(" <==\n", 1)[0]: part.split(" <==\n", 1)[1] for part in text.split("==> ")[1:]}
    assert data["files"] == shown  # the same files, byte for byte, as the plain listing
    assert data["slurmVersion"] == "22.05"
    assert data["derived"]["partitions"] == {"train": "gpu[01-06]", "infer": "gpu[07-08]"}
    assert sorted(data["derived"]["switches"]) == ["leaf0", "leaf1", "spine"]


def test_render_json_with_out_names_the_paths_written(tmp_path: Path) -> None:
    code, out, err = invoke("render", "--cluster", str(TWO_LEAF), "--out", str(tmp_path / "r"), "-o", "json")
    assert code == 0, err
    files = json.loads(out)["files"]
    assert files and all(Path(p).read_text() == content for p, content in files.items())


def test_dry_run_without_slurm_diffs_against_the_folder_and_writes_nothing(no_slurm: None, tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / PARTITIONS).write_text("PartitionName=old Nodes=gpu01\n")
    before = {p.name: p.read_bytes() for p in conf.iterdir()}
    code, out, err = invoke("apply", "--cluster", str(TWO_LEAF), "--dry-run", "--conf-dir", str(conf))
    assert code == 0, err
    assert "-PartitionName=old Nodes=gpu01" in out and "+PartitionName=train Nodes=gpu[01-06]" in out
    assert "dry run: 4 file(s) would change; nothing written" in out
    assert "note: rendered for SLURM 22.05" in err and "not checked against slurmctld" in err
    assert {p.name: p.read_bytes() for p in conf.iterdir()} == before


def test_dry_run_against_what_render_wrote_changes_nothing(no_slurm: None, tmp_path: Path) -> None:
    assert invoke("render", "--cluster", str(TWO_LEAF), "--out", str(tmp_path))[0] == 0
    code, out, err = invoke("apply", "--cluster", str(TWO_LEAF), "--dry-run", "--conf-dir", str(tmp_path),
                            "--slurm-version", "22.05")  # fmt: skip
    assert code == 0, err
    assert out == "dry run: 0 file(s) would change; nothing written\n"
    assert "rendered for SLURM" not in err  # the version was given


def test_a_real_apply_without_slurm_is_still_refused(no_slurm: None, tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    code, out, err = invoke("apply", "--cluster", str(TWO_LEAF), "--conf-dir", str(conf))
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert os.listdir(conf) == []


def test_validate_offline_still_refuses_a_bad_rendered_line(no_slurm: None) -> None:
    rendered = render(load_cluster(TWO_LEAF))
    files = tuple((n, b"PartitionName=x Nodes=gpu01 Bad Thing\n" if n == PARTITIONS else d) for n, d in rendered.files)
    broken = type(rendered)(rendered.version, files, rendered.requires, rendered.partitions, rendered.switches)
    with pytest.raises(SlurmInputError, match="rendered line refused"):
        validate(broken, offline_ok=True)
