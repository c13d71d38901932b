"""Which plots a comparison report shows, and the one-sentence finding each plot's caption states.

A plot that cannot tell the candidates apart is left out, with a sentence saying why: the
switch-span histogram only when span differs between candidates, the queueing plot only for
partitions where some job waited, the tenants' plot only when the cluster has tenants (a cluster
without them gets neither the plot nor a note: it has nothing to say there). Captions say what
the plot shows (who is best, by how much), not its title again. Pure: no matplotlib here, so the markdown report needs none (`gputwin.sim.reportpage`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from gputwin.sim.compare import CandidateResult
from gputwin.sim.units import FORMATS

UTILIZATION_PANELS = 12  # small multiples drawn, best-ranked first


@dataclass(frozen=True, slots=True)
class Plot:
    """A plot to draw: its file, title (the image's alt text) and the finding its caption states."""

    kind: str  # "jct_cdf", "queue_by_partition", "utilization", "span_hist", "tenant_quota"
    title: str
    finding: str

    @property
    def file(self) -> str:
        return f"{self.kind}.png"


@dataclass(frozen=True, slots=True)
class Findings:
    plots: tuple[Plot, ...]
    notes: tuple[str, ...]  # one sentence per plot left out, and why
    queued: tuple[str, ...]  # the partitions the queueing plot shows


def findings(ranked: Sequence[CandidateResult]) -> Findings:
    """The plots worth drawing for `ranked` (best first) and their findings."""
    if not ranked:
        return Findings((), ("No candidate ran, so there is nothing to plot.",), ())
    plots: list[Plot] = [Plot("jct_cdf", "Job completion time, CDF per candidate", jct_finding(ranked))]
    notes: list[str] = []
    queued = queued_partitions(ranked)
    if queued:
        plots.append(Plot("queue_by_partition", "Average queueing delay per partition", queue_finding(ranked, queued)))
    quiet = sorted({p for r in ranked for p in r.summary.partitions} - set(queued))
    if quiet:
        notes.append(f"No job waited in {_names(quiet)} under any candidate: "
                     f"{'it is' if len(quiet) == 1 else 'they are'} left out of the queueing plot.")  # fmt: skip
    if any(r.summary.utilization_series for r in ranked):
        plots.append(Plot("utilization", "GPU utilisation over time, one panel per candidate",
                          utilization_finding(ranked)))  # fmt: skip
    if spans_vary(ranked):
        plots.append(Plot("span_hist", "Leaf switches spanned per job", span_finding(ranked)))
    else:
        notes.append(span_note(ranked))
    if tenant_names(ranked):
        plots.append(Plot("tenant_quota", TENANT_TITLE, tenant_finding(ranked)))
    return Findings(tuple(plots), tuple(notes), tuple(queued))


def _names(items: Sequence[str]) -> str:
    return ", ".join(items[:-1]) + f" and {items[-1]}" if len(items) > 1 else items[0]


def _spread(ranked: Sequence[CandidateResult], key: str) -> tuple[CandidateResult, CandidateResult]:
    """The candidates with the lowest and the highest value of metric `key`."""
    by = sorted(ranked, key=lambda r: (r.score(key), r.candidate.name))
    return by[0], by[-1]


def _ratio(high: float, low: float) -> str:
    return f"{high / low:,.1f}×" if low > 0 else "—"


def jct_finding(ranked: Sequence[CandidateResult]) -> str:
    fmt, best, worst = FORMATS["avg_jct"], ranked[0], ranked[-1]
    if len(ranked) == 1 or best.score("avg_jct") == worst.score("avg_jct"):
        return f"Average JCT is {fmt.with_unit(best.score('avg_jct'))} under every candidate."
    p99 = FORMATS["p99_jct"]
    low, high = _spread(ranked, "p99_jct")
    return (f"{best.candidate.name} has the shortest average JCT, {fmt.with_unit(best.score('avg_jct'))}; "
            f"{worst.candidate.name} the longest, {fmt.with_unit(worst.score('avg_jct'))} "
            f"({_ratio(worst.score('avg_jct'), best.score('avg_jct'))} as long). p99 JCT runs from "
            f"{p99.with_unit(low.score('p99_jct'))} ({low.candidate.name}) to "
            f"{p99.with_unit(high.score('p99_jct'))} ({high.candidate.name}).")  # fmt: skip


def queued_partitions(ranked: Sequence[CandidateResult]) -> list[str]:
    """Partitions where some job waited under some candidate, sorted."""
    return sorted({p for r in ranked for p, m in r.summary.partitions.items() if m.avg_queue > 0})


def queue_finding(ranked: Sequence[CandidateResult], queued: Sequence[str]) -> str:
    def wait(r: CandidateResult, p: str) -> float:
        m = r.summary.partitions.get(p)
        return m.avg_queue if m is not None else 0.0

    worst = max(queued, key=lambda p: (max(wait(r, p) for r in ranked), p))
    by = sorted(ranked, key=lambda r: (wait(r, worst), r.candidate.name))
    fmt = FORMATS["avg_queue"]
    if len(by) == 1:
        return f"Jobs wait longest in {worst}: {fmt.with_unit(wait(by[0], worst))} on average."
    return (f"Jobs wait longest in {worst}: on average {fmt.with_unit(wait(by[-1], worst))} under "
            f"{by[-1].candidate.name}, {fmt.with_unit(wait(by[0], worst))} under {by[0].candidate.name}.")  # fmt: skip


def utilization_finding(ranked: Sequence[CandidateResult]) -> str:
    fmt = FORMATS["gpu_utilization"]
    low, high = _spread(ranked, "gpu_utilization")
    shown = "" if len(ranked) <= UTILIZATION_PANELS else f" Panels: the {UTILIZATION_PANELS} best-ranked candidates."
    if fmt.cell(low.score("gpu_utilization")) == fmt.cell(high.score("gpu_utilization")):
        return f"GPU utilisation is {fmt.with_unit(high.score('gpu_utilization'))} under every candidate.{shown}"
    return (f"GPU utilisation over the run is highest under {high.candidate.name}, "
            f"{fmt.with_unit(high.score('gpu_utilization'))}, lowest under {low.candidate.name}, "
            f"{fmt.with_unit(low.score('gpu_utilization'))}; grey: the best-ranked candidate, "
            f"{ranked[0].candidate.name}, for reference.{shown}")  # fmt: skip


def spans_vary(ranked: Sequence[CandidateResult]) -> bool:
    """Whether some two candidates' jobs span leaf switches differently."""
    tallies = {tuple(sorted(Counter(r.spans).items())) for r in ranked}
    return len(tallies) > 1


def _spread_share(r: CandidateResult) -> float:
    return sum(1 for s in r.spans if s > 1) / len(r.spans) if r.spans else 0.0


def span_finding(ranked: Sequence[CandidateResult]) -> str:
    by = sorted(ranked, key=lambda r: (_spread_share(r), r.candidate.name))
    low, high = by[0], by[-1]
    return (f"{100 * _spread_share(high):.1f} % of jobs span more than one leaf switch under "
            f"{high.candidate.name}, {100 * _spread_share(low):.1f} % under {low.candidate.name}.")  # fmt: skip


def span_note(ranked: Sequence[CandidateResult]) -> str:
    spread = sum(1 for s in ranked[0].spans if s > 1)
    if spread == 0:
        return "No job spans more than one leaf switch under any candidate, so there is no span plot."
    return (f"Every candidate gives the same count of jobs per leaf-switch span ({spread:,} jobs over more "
            f"than one), so there is no span plot.")  # fmt: skip


TENANT_TITLE = "Share of each tenant's guarantee delivered while it wanted it"


def tenant_names(ranked: Sequence[CandidateResult]) -> list[str]:
    """The tenants of any candidate's run, sorted (none: a cluster without quotas)."""
    return sorted({t for r in ranked for t in r.summary.tenants})


def delivered(result: CandidateResult, tenant: str) -> float:
    m = result.summary.tenants.get(tenant)
    return m.quota_delivered if m is not None else 1.0


def tenant_finding(ranked: Sequence[CandidateResult]) -> str:
    """Jain's index across candidates and the tenant served least, under whom."""
    jain = FORMATS["jain"]
    scored = [r for r in ranked if r.summary.jain is not None]
    if not scored:
        spread = "No tenant with a guarantee used a GPU, so there is no Jain's index. "
    elif len(scored) == 1 or jain.cell(scored[0].summary.jain) == jain.cell(scored[-1].summary.jain):
        spread = f"Jain's index is {jain.cell(scored[0].summary.jain)} under every candidate. "
    else:
        low, high = _spread(scored, "jain")
        spread = (f"Jain's index runs from {jain.cell(low.summary.jain)} ({low.candidate.name}) to "
                  f"{jain.cell(high.summary.jain)} ({high.candidate.name}). ")  # fmt: skip
    worst = min(((delivered(r, t), t, r.candidate.name) for r in ranked for t in tenant_names(ranked)))
    if worst[0] >= 1.0:
        return spread + "Every tenant had its whole guarantee whenever it wanted it, under every candidate."
    return (spread + f"The least served is {worst[1]} under {worst[2]}: {100 * worst[0]:.1f} % of its "
            f"guarantee delivered while it wanted it.")  # fmt: skip


__all__ = ["Findings", "Plot", "UTILIZATION_PANELS", "findings", "spans_vary"]
