"""How a metric is shown to a person: its label, its unit and one fixed format, written once.

The metric names and directions are `gputwin.sim.evaluation.METRICS`; this table says how each is
printed in the terminal tables (`gputwin.cli.output`), the HTML and markdown reports
(`gputwin.sim.reportpage`) and the plots' axes, so a column has the same decimals in every row and
every place. Fractions (utilisation, overhead) are shown as percentages. JSON and CSV keep the raw
numbers and keys: this is presentation only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any



@dataclass(frozen=True, slots=True)
class MetricFormat:
    """`label` for a header, `unit` ("" for counts), `spec` a format spec applied to value × `scale`."""

    label: str
    unit: str
    spec: str
    scale: float = 1.0

    @property
    def header(self) -> str:
        """The column header: the label with its unit, e.g. "avg JCT (s)"."""
        return f"{self.label} ({self.unit})" if self.unit else self.label

    def cell(self, value: Any) -> str:
        """`value` in this metric's fixed format, thousands separated ("—" for a missing one)."""
        if value is None:
            return "—"
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return str(value)
        return format(value * self.scale, self.spec)

    def with_unit(self, value: Any) -> str:
        """`cell` followed by the unit, for a sentence ("1,234.5 s", "87.3 %")."""
        text = self.cell(value)
        return f"{text} {self.unit}" if self.unit else text


SECONDS = ",.1f"
FORMATS: dict[str, MetricFormat] = {
    "jobs": MetricFormat("jobs", "", ",.0f"),
    "avg_jct": MetricFormat("avg JCT", "s", SECONDS),
    "p50_jct": MetricFormat("p50 JCT", "s", SECONDS),
    "p95_jct": MetricFormat("p95 JCT", "s", SECONDS),
    "p99_jct": MetricFormat("p99 JCT", "s", SECONDS),
    "avg_queue": MetricFormat("avg queue", "s", SECONDS),
    "p99_queue": MetricFormat("p99 queue", "s", SECONDS),
    "gpu_utilization": MetricFormat("GPU util", "%", ".1f", 100.0),
    "avg_overhead": MetricFormat("overhead", "%", ".2f", 100.0),
    "preemptions": MetricFormat("preemptions", "", ",.0f"),
    "makespan": MetricFormat("makespan", "s", ",.0f"),
    "jain": MetricFormat("Jain", "", ".4f"),
    "fragmented_gpus": MetricFormat("fragmented GPUs", "", ",.2f"),
}


def metric(name: str) -> MetricFormat:
    """The format of metric `name` (KeyError naming the known ones if it is not one)."""
    if name not in FORMATS:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(FORMATS)}")
    return FORMATS[name]


__all__ = ["FORMATS", "MetricFormat", "metric"]
