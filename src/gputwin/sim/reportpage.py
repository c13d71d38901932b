"""The comparison report as a person reads it: index.html (self-contained) and report.md (for CI).

Both have the same parts, in order: the provenance header (`gputwin.sim.provenance`), the ranked
table with units and one fixed format per column (`gputwin.sim.units`), the skip notes, then each
plot with its finding as the caption and a sentence for each plot left out (`gputwin.sim.findings`).
The HTML page embeds the PNGs as data URIs so it opens anywhere on its own; the markdown links them
by file name (beside it in DIR) and reads whole without them, e.g. as a pull-request comment.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gputwin.sim.compare import Comparison
from gputwin.sim.findings import Findings, findings
from gputwin.sim.provenance import Provenance
from gputwin.sim.units import FORMATS

TITLE = "gputwin compare"
INTRO = "Ranked by average job completion time (JCT), best first."
STYLE = (
    "body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}td.name,th.name{text-align:left;"
    "white-space:nowrap}dl{display:grid;grid-template-columns:max-content auto;gap:.1em 1em}dt{font-weight:bold}"
    "dd{margin:0;font-family:monospace;overflow-wrap:anywhere}img{max-width:100%}figcaption{max-width:60em}"
)


def header_cells(metrics: Sequence[str]) -> list[tuple[str, str]]:
    """(header, css class) of the ranked table's columns (`metrics`: `Comparison.metrics`)."""
    return [("#", ""), ("candidate", "name"), *((FORMATS[k].header, "") for k in metrics)]


def row_cells(row: Mapping[str, Any], metrics: Sequence[str]) -> list[str]:
    return [str(row["rank"]), str(row["candidate"]), *(FORMATS[k].cell(row[k]) for k in metrics)]


def html_page(comparison: Comparison, found: Findings, pngs: Mapping[str, Path],
              origin: Provenance | None) -> str:  # fmt: skip
    """index.html: `pngs` maps a plot's file name to the PNG written (embedded as a data URI)."""
    esc, metrics = html.escape, comparison.metrics
    head = "".join(f'<th class="{c}">{esc(h)}</th>' for h, c in header_cells(metrics))
    classes = [c for _, c in header_cells(metrics)]
    body = "".join(
        "<tr>" + "".join(f'<td class="{c}">{esc(v)}</td>' for v, c in zip(row_cells(row, metrics), classes))
        + "</tr>"
        for row in comparison.to_json()["candidates"]
    )
    parts = [f"<h1>{TITLE}</h1>", _html_provenance(origin), f"<p>{INTRO}</p>",
             f'<table id="ranking"><tr>{head}</tr>{body}</table>']  # fmt: skip
    if comparison.skipped:
        parts.append("<h2>Skipped</h2><ul>" + "".join(f"<li>{esc(n)}</li>" for n in comparison.skipped) + "</ul>")
    for plot in found.plots:
        if plot.file in pngs:
            data = base64.b64encode(pngs[plot.file].read_bytes()).decode("ascii")
            parts.append(f'<figure id="{plot.kind}"><img alt="{esc(plot.title)}" src="data:image/png;base64,{data}">'
                         f"<figcaption>{esc(plot.finding)}</figcaption></figure>")  # fmt: skip
    parts += [f'<p class="note">{esc(n)}</p>' for n in found.notes]
    return (f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{TITLE}</title><style>{STYLE}</style>'
            f"</head><body>{''.join(parts)}</body></html>\n")  # fmt: skip


def _html_provenance(origin: Provenance | None) -> str:
    if origin is None:
        return ""
    items = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in origin.lines())
    return f'<dl id="provenance">{items}</dl>'


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(comparison: Comparison, found: Findings, pngs: Mapping[str, Path], origin: Provenance | None) -> str:
    """report.md: the same report in GitHub-flavoured markdown; plots linked by file name if written."""
    lines = [f"## {TITLE}", ""]
    if origin is not None:
        lines += [f"- **{k}**: `{_md_cell(v)}`" for k, v in origin.lines()] + [""]
    metrics = comparison.metrics
    heads = [h for h, _ in header_cells(metrics)]
    lines += [INTRO, "", "| " + " | ".join(heads) + " |",
              "|" + "|".join(":--" if c == "name" else "--:" for _, c in header_cells(metrics)) + "|"]  # fmt: skip
    lines += ["| " + " | ".join(_md_cell(c) for c in row_cells(row, metrics)) + " |"
              for row in comparison.to_json()["candidates"]]  # fmt: skip
    lines.append("")
    lines += [f"- skipped: {n}" for n in comparison.skipped]
    for plot in found.plots:
        image = f"![{plot.title}]({plot.file})\n\n" if plot.file in pngs else ""
        lines += [f"### {plot.title}", "", f"{image}{plot.finding}", ""]
    for note in found.notes:
        lines += [note, ""]
    return "\n".join(lines).rstrip() + "\n"


def write_markdown(out_dir: Path, comparison: Comparison, pngs: Sequence[Path], origin: Provenance | None) -> Path:
    """DIR/report.md, linking those of `pngs` written beside it; returns its path."""
    path = out_dir / "report.md"
    path.write_text(markdown(comparison, findings(comparison.ranked), {p.name: p for p in pngs}, origin))
    return path


__all__ = ["html_page", "markdown", "write_markdown"]
