"""The compare report's plots: drawn in worker processes or here, the PNGs are the same; only the plots
`gputwin.sim.findings` chose are drawn."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.sim.compare import Comparison, grid, run_candidate
from gputwin.sim.compare import comparison as rank_results
from gputwin.sim.findings import findings, spans_vary
from gputwin.sim.plots import LEGEND_ROWS, _jct_cdf, _utilization, write_plots


@pytest.fixture(scope="module")
def comparison() -> Comparison:
    cluster, jobs = load_cluster(demo_cluster_path()), tuple(read_trace(demo_trace_path()).jobs[:400])
    candidates, skipped = grid(["fifo", "sjf", "las"], ["consolidate", "random"], backfills=[False, True])
    return rank_results([run_candidate(cluster, jobs, c, 0) for c in candidates], skipped)


def test_parallel_drawing_writes_the_same_files_as_drawing_here(comparison: Comparison, tmp_path: Path) -> None:
    here = write_plots(tmp_path / "here", comparison, workers=1)
    pool = write_plots(tmp_path / "pool", comparison, workers=2)
    chosen = [plot.file for plot in findings(comparison.ranked).plots]
    assert [p.name for p in here] == [p.name for p in pool] == [*chosen, "index.html"]
    for a, b in zip(here, pool):
        assert a.read_bytes() == b.read_bytes(), a.name


@pytest.mark.parametrize(("count", "columns"), [(1, 1), (LEGEND_ROWS, 1), (LEGEND_ROWS + 1, 2), (36, 3)])
def test_long_legends_get_more_columns_instead_of_running_off_the_figure(comparison: Comparison, count: int,
                                                                         columns: int) -> None:  # fmt: skip
    ranked = [comparison.ranked[i % len(comparison.ranked)] for i in range(count)]
    legend = _jct_cdf(ranked).axes[0].get_legend()
    assert legend._ncols == columns
    assert len(legend.get_texts()) == count


def test_the_span_plot_is_left_out_when_every_candidate_spans_alike(comparison: Comparison, tmp_path: Path) -> None:
    """The same run under two names spans alike; the demo excerpt's consolidate and random do not."""
    first = comparison.ranked[0]
    twin = dataclasses.replace(first, candidate=dataclasses.replace(first.candidate, queue="twin"))
    names = [p.name for p in write_plots(tmp_path, Comparison((first, twin), ()), workers=1)]
    assert "span_hist.png" not in names and "jct_cdf.png" in names
    assert "so there is no span plot" in (tmp_path / "index.html").read_text()
    assert spans_vary(comparison.ranked)
    assert "span_hist.png" in [p.name for p in write_plots(tmp_path / "all", comparison, workers=1)]


@pytest.mark.parametrize(("count", "grid"), [(1, (1, 1)), (3, (1, 3)), (4, (2, 3)), (20, (4, 3))])
def test_utilisation_is_one_panel_per_candidate_up_to_twelve(comparison: Comparison, count: int,
                                                             grid: tuple[int, int]) -> None:  # fmt: skip
    ranked = [comparison.ranked[i % len(comparison.ranked)] for i in range(count)]
    fig = _utilization(ranked)
    axes = fig.axes
    assert len(axes) == grid[0] * grid[1]
    assert sum(ax.get_visible() for ax in axes) == min(count, 12)
    # The best-ranked candidate's line is drawn (grey) behind every other panel, not its own.
    assert [len(ax.lines) for ax in axes if ax.get_visible()] == [1] + [2] * (min(count, 12) - 1)
