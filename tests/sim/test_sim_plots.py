"""The compare report's plots: drawn in worker processes or here, the PNGs are the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.sim.compare import Comparison, grid, run_candidate
from gputwin.sim.compare import comparison as rank_results
from gputwin.sim.plots import LEGEND_ROWS, PLOTS, _jct_cdf, write_plots


@pytest.fixture(scope="module")
def comparison() -> Comparison:
    cluster, jobs = load_cluster(demo_cluster_path()), tuple(read_trace(demo_trace_path()).jobs[:400])
    candidates, skipped = grid(["fifo", "sjf", "las"], ["consolidate", "random"], backfills=[False, True])
    return rank_results([run_candidate(cluster, jobs, c, 0) for c in candidates], skipped)


def test_parallel_drawing_writes_the_same_files_as_drawing_here(comparison: Comparison, tmp_path: Path) -> None:
    here = write_plots(tmp_path / "here", comparison, workers=1)
    pool = write_plots(tmp_path / "pool", comparison, workers=2)
    assert [p.name for p in here] == [p.name for p in pool] == [name for name, _ in PLOTS] + ["index.html"]
    for a, b in zip(here, pool):
        assert a.read_bytes() == b.read_bytes(), a.name


@pytest.mark.parametrize(("count", "columns"), [(1, 1), (LEGEND_ROWS, 1), (LEGEND_ROWS + 1, 2), (36, 3)])
def test_long_legends_get_more_columns_instead_of_running_off_the_figure(comparison: Comparison, count: int,
                                                                         columns: int) -> None:  # fmt: skip
    ranked = [comparison.ranked[i % len(comparison.ranked)] for i in range(count)]
    legend = _jct_cdf(ranked).axes[0].get_legend()
    assert legend._ncols == columns
    assert len(legend.get_texts()) == count
