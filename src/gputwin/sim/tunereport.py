"""The tuning report as a person reads it: `report.md` in `gputwin tune`'s output folder.

Markdown, so it reads whole as a CI or pull-request comment and in any browser that renders it:
the provenance header (`gputwin.sim.provenance`), one sentence with the objective of the winner
against the cluster's own policies (the baseline) on the tuning part and on the hold-out, the
distinct policies tried best first with units and one fixed format per column
(`gputwin.sim.units`), and the SchedulingPolicy written, ready for `kubectl apply`. Made from
tune.json's object alone, so the report says exactly what the JSON beside it says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from gputwin.sim.evaluation import TABLE_METRICS
from gputwin.sim.provenance import Provenance
from gputwin.sim.units import FORMATS

TITLE = "gputwin tune"
TABLE_ROWS = 10  # distinct policies shown; tune.json holds every trial


def tune_markdown(data: Mapping[str, Any], origin: Provenance | None) -> str:
    """report.md for `data` (tune.json's object: objective, best, baseline, trials, schedulingpolicy)."""
    lines = [f"## {TITLE}", ""]
    if origin is not None:
        lines += [f"- **{k}**: `{_cell(v)}`" for k, v in origin.lines()] + [""]
    lines += [*_verdict(data), ""]
    rows = distinct(data["trials"], data["direction"])
    metrics = [k for k in (*TABLE_METRICS, "jain", "fragmented_gpus") if any(k in r["metrics"] for r in rows)]
    lines += [f"The {len(rows)} best distinct policies of {len(data['trials'])} trials, best first:", "",
              "| # | policy | " + " | ".join(FORMATS[k].header for k in metrics) + " |",
              "|--:|:--|" + "--:|" * len(metrics)]  # fmt: skip
    lines += [f"| {i} | {_cell(r['policy'])} | " + " | ".join(FORMATS[k].cell(r["metrics"].get(k)) for k in metrics)
              + " |" for i, r in enumerate(rows, 1)]  # fmt: skip
    policy = yaml.safe_dump(data["schedulingpolicy"], sort_keys=False).rstrip()
    lines += ["", "### The winner, as written to schedulingpolicy.yaml", "", "```yaml", policy, "```", "",
              "Deploy it with `kubectl apply -f schedulingpolicy.yaml` (or `gputwin apply -f` in the emulator)."]  # fmt: skip
    return "\n".join(lines) + "\n"


def distinct(trials: Sequence[Mapping[str, Any]], direction: str) -> list[Mapping[str, Any]]:
    """The first trial of each distinct policy, best value first (ties: lower trial number)."""
    sign = -1.0 if direction == "maximize" else 1.0
    ranked = sorted((t for t in trials if t["value"] is not None), key=lambda t: (sign * t["value"], t["trial"]))
    seen: dict[str, Mapping[str, Any]] = {}
    for trial in ranked:
        seen.setdefault(trial["policy"], trial)
    return list(seen.values())[:TABLE_ROWS]


def _verdict(data: Mapping[str, Any]) -> list[str]:
    objective, best, base = data["objective"], data["best"], data["baseline"]
    fmt = FORMATS[objective]
    jobs = f"{data['split']['tune_jobs']:,} jobs" + ("" if data.get("partition") is None
                                                      else f" (partition {data['partition']})")  # fmt: skip
    out = [f"**{fmt.header}**, {data['direction']}d: the winner `{_cell(best['policy'])}` reaches "
           f"{fmt.cell(best['tune'])} against the cluster's own policies' {fmt.cell(base['tune'])} "
           f"({_change(best['tune'], base['tune'])}) on the tuning part, {jobs}."]  # fmt: skip
    if best.get("holdout") is not None:
        out.append(f"On the hold-out ({data['split']['holdout_jobs']:,} jobs submitted from "
                   f"{data['split']['cut']:,.0f} s): {fmt.cell(best['holdout'])} against "
                   f"{fmt.cell(base['holdout'])} ({_change(best['holdout'], base['holdout'])}).")  # fmt: skip
    return out


def _change(value: float | None, baseline: float | None) -> str:
    if value is None or baseline is None or baseline == 0:
        return "no baseline to compare"
    return f"{(value - baseline) / abs(baseline):+.1%}"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")


__all__ = ["distinct", "tune_markdown"]
