"""The comparison report's plots (`gputwin compare --out DIR`): the PNGs and the self-contained index.html.

Which plots are drawn, and the finding each caption states, is `gputwin.sim.findings`' choice:
jct_cdf.png (CDF of job completion time, one line per candidate), queue_by_partition.png (average
queueing delay, only the partitions where some job waited), utilization.png (GPU utilisation over
virtual time as small multiples: one panel per candidate, the best-ranked in grey behind each, since
hourly lines of 30 candidates drawn on one axis hide each other) and span_hist.png (leaf switches
each finished job spanned, only when that differs between candidates) and tenant_quota.png (the
share of each tenant's guarantee delivered, per candidate, only with tenants). index.html is
`gputwin.sim.reportpage`'s page embedding them. Matplotlib runs on the Agg backend (no display).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from gputwin.sim.compare import CandidateResult, Comparison
from gputwin.sim.findings import TENANT_TITLE, UTILIZATION_PANELS, Findings, delivered, findings, queued_partitions
from gputwin.sim.findings import tenant_names
from gputwin.sim.provenance import Provenance
from gputwin.sim.reportpage import html_page

KINDS = ("jct_cdf", "queue_by_partition", "utilization", "span_hist", "tenant_quota")  # every plot there may be
CDF_POINTS = 2000


def write_plots(out_dir: Path, comparison: Comparison, workers: int = 1, origin: Provenance | None = None,
                page: bool = True) -> list[Path]:  # fmt: skip
    """Write the PNGs worth drawing and (`page`) index.html into `out_dir`; return their paths
    (index.html last).

    With `workers` > 1 the figures are drawn in that many processes at once: drawing and PNG
    encoding take about a second per figure (the legends of 30-odd candidates are most of it), all
    of it after the last simulation, so on two cores this halves the report's share of a compare.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    found = findings(comparison.ranked)
    tasks = [(plot.kind, out_dir / plot.file) for plot in found.plots]
    if workers > 1 and len(tasks) > 1:
        # The results go to each worker once, as it starts (a forked worker just has them), not
        # with each figure: they are a few million numbers.
        with ProcessPoolExecutor(min(workers, len(tasks)), initializer=_keep, initargs=(comparison.ranked,)) as pool:
            paths = list(pool.map(_render, tasks))
    else:
        _keep(comparison.ranked)
        paths = [_render(task) for task in tasks]
    _RANKED.clear()
    if not page:
        return paths
    index = out_dir / "index.html"
    index.write_text(_html(comparison, found, paths, origin))
    return [*paths, index]


def _html(comparison: Comparison, found: Findings, pngs: Sequence[Path], origin: Provenance | None) -> str:
    return html_page(comparison, found, {p.name: p for p in pngs}, origin)


_RANKED: list[CandidateResult] = []  # what `_render` draws, in this process or a worker


def _keep(ranked: Sequence[CandidateResult]) -> None:
    _RANKED[:] = ranked


def _render(task: tuple[str, Path]) -> Path:
    """Draw plot `kind` (one of KINDS) and save it as `path` (runs in a worker too)."""
    kind, path = task
    draw = {"jct_cdf": _jct_cdf, "queue_by_partition": _queue_by_partition, "utilization": _utilization,
            "span_hist": _span_hist, "tenant_quota": _tenant_quota}[kind]  # fmt: skip
    fig = draw(_RANKED)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _figure(title: str, xlabel: str, ylabel: str) -> tuple[Figure, Any]:
    fig, ax = plt.subplots(figsize=(11, 5), layout="constrained")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return fig, ax


LEGEND_ROWS = 16  # what fits beside a 5-inch-high plot at this font size


def _legend(ax: Any, count: int) -> None:
    if count:
        # More columns rather than rows past the plot's height: a 36-candidate grid's legend
        # would otherwise run off the figure and squash the plot.
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  ncols=-(-count // LEGEND_ROWS))  # fmt: skip


LINE_STYLES = ("-", "--", ":", "-.")


def _style(i: int) -> dict[str, str]:
    """Colour and dash of line i: neighbours in the ranking (often near-equal, drawn on top of each
    other) differ in dash, and the first 40 candidates all look different."""
    return {"color": f"C{i % 10}", "linestyle": LINE_STYLES[(i + i // 10) % len(LINE_STYLES)]}


def _jct_cdf(ranked: Sequence[CandidateResult]) -> Figure:
    fig, ax = _figure("Job completion time, CDF per candidate", "JCT (s, log scale)", "fraction of jobs")
    for i, result in enumerate(ranked):
        if result.jcts:
            jcts = np.sort(np.maximum(np.asarray(result.jcts, dtype=float), 1e-3))
            n = len(jcts)
            # At most CDF_POINTS steps per line (always the last): big traces plot as fast as small ones.
            picks = np.unique(np.minimum(n - 1, np.arange(CDF_POINTS) * n // CDF_POINTS))
            picks = np.union1d(picks, [n - 1])
            ax.step(jcts[picks], (picks + 1) / n, where="post", label=result.candidate.name, **_style(i))
    ax.set_xscale("log")
    ax.set_ylim(0, 1.01)
    _legend(ax, len(ranked))
    return fig


def _queue_by_partition(ranked: Sequence[CandidateResult]) -> Figure:
    fig, ax = _figure("Average queueing delay per partition", "partition", "average queueing delay (s)")
    partitions = queued_partitions(ranked)
    width = 0.8 / max(len(ranked), 1)
    for i, result in enumerate(ranked):
        measured = result.summary.partitions
        values = [measured[p].avg_queue if p in measured else 0.0 for p in partitions]
        xs = [x + i * width - 0.4 + width / 2 for x in range(len(partitions))]
        ax.bar(xs, values, width, label=result.candidate.name)
    ax.set_xticks(range(len(partitions)), partitions)
    _legend(ax, len(ranked))
    return fig


def _utilization(ranked: Sequence[CandidateResult]) -> Figure:
    """One small panel per candidate (the first UTILIZATION_PANELS), shared axes, the best in grey."""
    shown = list(ranked[:UTILIZATION_PANELS])
    cols = min(len(shown), 3)
    rows = math.ceil(len(shown) / cols)
    height = 0.6 + 2.2 * rows
    fig, axes = plt.subplots(rows, cols, figsize=(11, height), sharex=True, sharey=True, squeeze=False)
    # Fixed margins (in inches) rather than the constrained layout: a second less for 12 panels.
    fig.subplots_adjust(left=0.07, right=0.99, top=1 - 0.75 / height, bottom=0.5 / height, hspace=0.35,
                        wspace=0.06)  # fmt: skip
    fig.suptitle("GPU utilisation over time, one panel per candidate")
    best = _hours(ranked[0])
    # Shared y axis up to the highest value drawn (in tens), not 100 %: a cluster busy at 20-40 %
    # would otherwise show its candidates' differences as one flat line each.
    peak = max((u for r in shown for u in _hours(r)[1]), default=10.0)
    top = min(105.0, 10 * math.ceil(peak / 10) + 5)
    for i, ax in enumerate(axes.flat):
        if i >= len(shown):
            ax.set_visible(False)
            continue
        if i > 0:
            ax.plot(*best, color="0.6", linewidth=1.5)
        xs, ys = _hours(shown[i])
        ax.plot(xs, ys, color="C0", linewidth=2)
        ax.fill_between(xs, ys, color="C0", alpha=0.15)
        ax.set_title(f"{shown[i].candidate.name}: {100 * shown[i].summary.gpu_utilization:.1f} %", fontsize="medium")
        ax.set_ylim(0, top)
        ax.grid(True, alpha=0.3)
        if i + cols >= len(shown):  # the lowest panel of its column: the time axis goes here
            ax.xaxis.set_tick_params(labelbottom=True)
            ax.set_xlabel("virtual time (h)")
    for ax in axes[:, 0]:
        ax.set_ylabel("busy GPUs (%)")
    return fig


def _hours(result: CandidateResult) -> tuple[list[float], list[float]]:
    series = result.summary.utilization_series
    return [t / 3600 for t, _ in series], [100 * u for _, u in series]


def _span_hist(ranked: Sequence[CandidateResult]) -> Figure:
    fig, ax = _figure("Leaf switches spanned per job", "leaf switches spanned", "jobs (log scale)")
    spans = sorted({s for r in ranked for s in r.spans})
    width = 0.8 / max(len(ranked), 1)
    for i, result in enumerate(ranked):
        tally = Counter(result.spans)
        counts = [tally[v] for v in spans]
        xs = [x + i * width - 0.4 + width / 2 for x in range(len(spans))]
        ax.bar(xs, counts, width, label=result.candidate.name)
    ax.set_xticks(range(len(spans)), [str(s) for s in spans])
    ax.set_yscale("log")
    _legend(ax, len(ranked))
    return fig




def _tenant_quota(ranked: Sequence[CandidateResult]) -> Figure:
    fig, ax = _figure(TENANT_TITLE, "tenant", "guarantee delivered (%)")
    tenants = tenant_names(ranked)
    width = 0.8 / max(len(ranked), 1)
    for i, result in enumerate(ranked):
        values = [100 * delivered(result, t) for t in tenants]
        xs = [x + i * width - 0.4 + width / 2 for x in range(len(tenants))]
        ax.bar(xs, values, width, label=result.candidate.name)
    ax.set_xticks(range(len(tenants)), tenants)
    ax.set_ylim(0, 105)
    _legend(ax, len(ranked))
    return fig
