"""The report's pages: provenance first, the table with units and fixed decimals, findings as captions.

Rendered from a real comparison of the demo trace's first 400 jobs (src/gputwin/data/demo-trace.csv,
the shipped sample) so the table's numbers are real ones; the markdown needs no matplotlib.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.sim.compare import Comparison, grid, run_candidate
from gputwin.sim.compare import comparison as rank_results
from gputwin.sim.findings import findings
from gputwin.sim.provenance import Provenance, provenance
from gputwin.sim.reportpage import html_page, markdown


@pytest.fixture(scope="module")
def comparison() -> Comparison:
    cluster, jobs = load_cluster(demo_cluster_path()), tuple(read_trace(demo_trace_path()).jobs[:400])
    candidates, skipped = grid(["fifo", "sjf"], ["consolidate", "random"], backfills=[None])
    return rank_results([run_candidate(cluster, jobs, c, 0) for c in candidates], skipped)


@pytest.fixture(scope="module")
def origin() -> Provenance:
    return provenance(demo_trace_path(), demo_cluster_path(), "pure Python core",
                      datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), ["gputwin", "compare", "--out", "x"])  # fmt: skip


def test_markdown_has_provenance_units_and_one_format_per_column(comparison: Comparison, origin: Provenance) -> None:
    text = markdown(comparison, findings(comparison.ranked), {}, origin)
    assert hashlib.sha256(demo_trace_path().read_bytes()).hexdigest() in text
    assert "- **date**: `2026-01-02T03:04:05Z`" in text and "- **command**: `gputwin compare --out x`" in text
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0] == ("| # | candidate | jobs | avg JCT (s) | p99 JCT (s) | avg queue (s) | p99 queue (s) "
                       "| GPU util (%) | overhead (%) | preemptions |")  # fmt: skip
    cells = [row.strip("| ").split(" | ") for row in rows[1:]]
    assert len(cells) == len(comparison.ranked)
    for column in range(3, 10):  # every metric column: the same decimals in every row
        decimals = {len(c[column].partition(".")[2]) for c in cells}
        assert len(decimals) == 1, (column, cells)
    assert "![" not in text  # no PNG written, none linked


def test_html_embeds_only_the_plots_given_and_captions_them_with_findings(comparison: Comparison, origin: Provenance,
                                                                          tmp_path: Path) -> None:  # fmt: skip
    found = findings(comparison.ranked)
    png = tmp_path / "jct_cdf.png"
    png.write_bytes(b"\x89PNG fake")
    page = html_page(comparison, found, {"jct_cdf.png": png}, origin)
    assert page.count("<img") == 1 and 'id="provenance"' in page
    assert f"<figcaption>{found.plots[0].finding}</figcaption>" in page.replace("&#x27;", "'")
    assert re.search(r'<td class="name">sjf/\w+</td>', page)


def test_without_provenance_there_is_no_header(comparison: Comparison) -> None:
    assert 'id="provenance"' not in html_page(comparison, findings(comparison.ranked), {}, None)
    assert "**trace**" not in markdown(comparison, findings(comparison.ranked), {}, None)
