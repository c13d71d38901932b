"""The comparison report's plots and its self-contained HTML page (`gputwin compare --out DIR`).

Four PNGs, one line or bar group per candidate: jct_cdf.png (CDF of job completion time),
queue_by_partition.png (average queueing delay per partition), utilization.png (GPU utilisation
over virtual time, from the summary's utilization_series) and span_hist.png (leaf switches each
finished job spanned). index.html embeds them as base64 data URIs with the ranked table, so the
page opens anywhere on its own. Matplotlib runs on the Agg backend (no display needed).
"""

from __future__ import annotations

import base64
import html
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
from gputwin.sim.evaluation import TABLE_METRICS

PLOTS = (
    ("jct_cdf.png", "Job completion time, CDF per candidate"),
    ("queue_by_partition.png", "Average queueing delay per partition"),
    ("utilization.png", "GPU utilisation over time"),
    ("span_hist.png", "Switch span: leaf switches per job"),
)


CDF_POINTS = 2000


def write_plots(out_dir: Path, comparison: Comparison, workers: int = 1) -> list[Path]:
    """Write the four PNGs and index.html into `out_dir`; return their paths (index.html last).

    With `workers` > 1 the figures are drawn in that many processes at once: drawing and PNG
    encoding take about a second per figure (the legends of 30-odd candidates are most of it), all
    of it after the last simulation, so on two cores this halves the report's share of a compare.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    tasks = [(kind, out_dir / name) for kind, (name, _) in enumerate(PLOTS)]
    if workers > 1:
        # The results go to each worker once, as it starts (a forked worker just has them), not
        # with each figure: they are a few million numbers.
        with ProcessPoolExecutor(min(workers, len(tasks)), initializer=_keep, initargs=(comparison.ranked,)) as pool:
            paths = list(pool.map(_render, tasks))
    else:
        _keep(comparison.ranked)
        paths = [_render(task) for task in tasks]
    _RANKED.clear()
    index = out_dir / "index.html"
    index.write_text(_html(comparison, paths))
    return [*paths, index]


_RANKED: list[CandidateResult] = []  # what `_render` draws, in this process or a worker


def _keep(ranked: Sequence[CandidateResult]) -> None:
    _RANKED[:] = ranked


def _render(task: tuple[int, Path]) -> Path:
    """Draw plot number `kind` of PLOTS and save it as `path` (runs in a worker too)."""
    kind, path = task
    fig = (_jct_cdf, _queue_by_partition, _utilization, _span_hist)[kind](_RANKED)
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
    fig, ax = _figure(PLOTS[0][1], "JCT (s, log scale)", "fraction of jobs")
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
    fig, ax = _figure(PLOTS[1][1], "partition", "average queueing delay (s)")
    partitions = sorted({p for r in ranked for p in r.summary.partitions})
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
    fig, ax = _figure(PLOTS[2][1], "virtual time (h)", "busy GPU fraction")
    for i, result in enumerate(ranked):
        series = result.summary.utilization_series
        if series:
            ax.plot([t / 3600 for t, _ in series], [u for _, u in series],
                    marker="o", markersize=3, label=result.candidate.name, **_style(i))  # fmt: skip
    ax.set_ylim(0, 1.05)
    _legend(ax, len(ranked))
    return fig


def _span_hist(ranked: Sequence[CandidateResult]) -> Figure:
    fig, ax = _figure(PLOTS[3][1], "leaf switches spanned", "jobs")
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


def _html(comparison: Comparison, pngs: Sequence[Path]) -> str:
    rows = comparison.to_json()["candidates"]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ("#", "candidate", *TABLE_METRICS))
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(row[k]))}</td>" for k in ("rank", "candidate", *TABLE_METRICS))
        + "</tr>"
        for row in rows
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in comparison.skipped)
    images = "".join(
        f'<figure><img alt="{html.escape(title)}" src="data:image/png;base64,'
        f'{base64.b64encode(path.read_bytes()).decode("ascii")}"><figcaption>{html.escape(title)}</figcaption></figure>'
        for path, (_, title) in zip(pngs, PLOTS)
    )
    return (
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>gputwin compare</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}img{max-width:100%}</style>"
        f"</head><body><h1>gputwin compare</h1><p>Ranked by average JCT, best first.</p>"
        f"<table><tr>{head}</tr>{body}</table>"
        + (f"<h2>Skipped</h2><ul>{notes}</ul>" if notes else "")
        + f"{images}</body></html>\n"
    )
