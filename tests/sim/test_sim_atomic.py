"""`gputwin.sim.atomic`: a folder swapped in whole, resume state carried, every failure undone."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputwin.sim.atomic import (COMPARE, FOLDER_MODE, SIMULATE, TUNE, UMASK, Layout, OutputError,
                                atomic_folder, check)  # fmt: skip

REPORT = Layout("test", ("report.txt", "*.png"), carry=("state",))


def tree(folder: Path) -> dict[str, str | None]:
    paths = sorted(folder.rglob("*"))
    return {str(p.relative_to(folder)): None if p.is_dir() else p.read_text() for p in paths}


def previous(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    (out / "state").mkdir(parents=True)
    (out / "state" / "1.json").write_text("kept")
    (out / "report.txt").write_text("old")
    (out / "a.png").write_text("old plot")
    return out


def test_a_new_folder_replaces_the_report_and_carries_the_resume_state(tmp_path: Path) -> None:
    out = previous(tmp_path)
    with atomic_folder(out, REPORT) as new:
        assert new.parent == tmp_path and new.name.startswith(".out.new-") and not list(new.iterdir())
        (new / "report.txt").write_text("new")
    assert tree(out) == {"report.txt": "new", "state": None, "state/1.json": "kept"}  # the old plot is gone
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_failure_inside_the_block_leaves_the_previous_folder(tmp_path: Path) -> None:
    out = previous(tmp_path)
    before = tree(out)
    with pytest.raises(RuntimeError), atomic_folder(out, REPORT) as new:
        (new / "report.txt").write_text("half")
        raise RuntimeError("boom")
    assert tree(out) == before and [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_rename_that_fails_mid_swap_puts_everything_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = previous(tmp_path)
    before = tree(out)
    real = os.rename

    def mock_rename_refusing_the_last_step(src: str | Path, dst: str | Path) -> None:
        if Path(dst) == out and ".new-" in Path(src).name:
            raise OSError(28, "No space left on device", str(dst))
        real(src, dst)

    monkeypatch.setattr(os, "rename", mock_rename_refusing_the_last_step)
    with pytest.raises(OutputError, match=rf"^{out}: no space left on device$"):
        with atomic_folder(out, REPORT) as new:
            (new / "report.txt").write_text("new")
    assert tree(out) == before and [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_new_output_folder_and_its_parents_are_created_with_the_umask_mode(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    with atomic_folder(out, SIMULATE) as new:
        (new / "jobs.csv").write_text("x")
    assert tree(out) == {"jobs.csv": "x"} and out.stat().st_mode & 0o777 == FOLDER_MODE == 0o777 & ~UMASK


def test_a_symlinked_output_folder_keeps_its_link(tmp_path: Path) -> None:
    out = previous(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(out)
    with atomic_folder(link, REPORT) as new:
        (new / "report.txt").write_text("new")
    assert link.is_symlink() and (link / "report.txt").read_text() == "new"
    assert (out / "state" / "1.json").exists()


@pytest.mark.parametrize(
    ("layout", "entry", "reason"),
    [
        (SIMULATE, "notes.txt", "not something gputwin simulate writes"),
        (COMPARE, "results.xlsx", "not something gputwin compare writes"),
        (TUNE, "summary.json", "not something gputwin tune writes"),
        (SIMULATE, "summary.json/", "not a regular file"),
    ],
    ids=["simulate-foreign-file", "compare-foreign-file", "tune-another-commands-file", "folder-for-a-file"],
)
def test_a_folder_holding_what_the_command_does_not_write_is_refused(
    tmp_path: Path, layout: Layout, entry: str, reason: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    if entry.endswith("/"):
        (out / entry).mkdir()
    else:
        (out / entry).write_text("mine")
    with pytest.raises(OutputError, match=rf"^{out / entry.rstrip('/')}: {reason}"):
        check(out, layout)




@pytest.mark.parametrize("where", [".", ".."], ids=["current-folder", "its-parent"])
def test_the_current_folder_is_never_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              where: str) -> None:  # fmt: skip
    (tmp_path / "out" / "sub").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "out" if where == "." else tmp_path / "out" / "sub")
    with pytest.raises(OutputError, match=rf"^{tmp_path / 'out'}: holds the current folder"):
        check(Path(where), SIMULATE)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.lists(st.sampled_from(["report.txt", "a.png", "b.png", "c.png"]), min_size=1, max_size=6),
       fail_at=st.integers(min_value=0, max_value=8), had_previous=st.booleans())
def test_dest_is_always_the_whole_old_or_the_whole_new_folder(
    tmp_path: Path, files: list[str], fail_at: int, had_previous: bool
) -> None:
    """Whatever step fails (one of the writes, or none), DIR is byte for byte one of the two."""
    base = Path(tempfile.mkdtemp(dir=tmp_path))
    out = previous(base) if had_previous else base / "out"
    before = tree(out) if had_previous else None
    written: dict[str, str] = {}
    try:
        with atomic_folder(out, REPORT) as new:
            for step, name in enumerate(files):
                if step == fail_at:
                    raise RuntimeError("injected")
                (new / name).write_text(f"{name} {step}")
                written[name] = f"{name} {step}"
    except RuntimeError:
        assert (tree(out) if out.exists() else None) == before
    else:
        kept = {"state": None, "state/1.json": "kept"} if had_previous else {}
        assert tree(out) == {**kept, **written}
    assert [p.name for p in base.iterdir()] == (["out"] if out.exists() else [])


def test_an_output_folder_under_a_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("mine")
    with pytest.raises(OutputError, match=rf"^{tmp_path / 'file'}: not a folder, cannot hold"):
        check(tmp_path / "file" / "out", SIMULATE)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux procfs, where no folder can be made")
def test_a_folder_that_cannot_be_made_is_named_as_the_user_gave_it() -> None:
    dest = Path("/proc/gputwin-report")  # procfs: mkdtemp fails with ENOENT for its own temporary name
    with pytest.raises(OutputError, match=rf"^{dest}: no such file or directory$"):
        with atomic_folder(dest, REPORT):
            pass
