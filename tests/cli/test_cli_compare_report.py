"""`gputwin compare --report-format`: index.html, report.md or both, swapped in whole on every run.

On the shipped demo trace (src/gputwin/data/demo-trace.csv); a second run resumes the sweep, so the
later runs only rewrite the report.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.cli.main import cli


def run(out: Path, *extra: str) -> None:
    args = ["compare", "--trace", str(demo_trace_path()), "--cluster", str(demo_cluster_path()), "--out", str(out),
            "--policies", "fifo", "--placements", "consolidate", "--jobs", "1", "--quiet", *extra]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.stderr


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cmp")


@pytest.mark.parametrize(("extra", "html", "md", "pngs"), [
    (("--report-format", "both"), True, True, True),
    ((), True, False, True),
    (("--report-format", "md"), False, True, True),
    (("--report-format", "md", "--no-plots"), False, True, False),
], ids=["both", "default-html", "md", "md-without-plots"])  # fmt: skip
def test_each_run_leaves_exactly_the_report_it_asked_for(out: Path, extra: tuple[str, ...], html: bool, md: bool,
                                                         pngs: bool) -> None:  # fmt: skip
    run(out, *extra)  # the same DIR each time, in this order: the last run's files never linger
    assert (out / "index.html").is_file() is html
    assert (out / "report.md").is_file() is md
    assert bool(list(out.glob("*.png"))) is pngs
    if md:
        text = (out / "report.md").read_text()
        assert "| avg JCT (s) |" in text and "- **trace**:" in text
        assert ("](jct_cdf.png)" in text) is pngs
        # One candidate spans like itself: a sentence instead of the span plot.
        assert "so there is no span plot" in text and not (out / "span_hist.png").exists()
