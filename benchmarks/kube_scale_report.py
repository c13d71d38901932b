"""One phase's figures (PhaseResult) and the report of benchmarks/kube_scale.py: the table and the
`--json` summary."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from typing import Any

from kube_scale_peers import GangResult, gang_summary
from kube_scale_plane import GPUS_PER_NODE, LEAVES

FORECASTS_OFF = "gputwin, forecasts off"  # phase F's column (22 characters: the table's width)


@dataclass(frozen=True)
class PhaseResult:
    scheduler: str
    available: bool
    note: str = ""
    pods: int = 0
    bound: int = 0
    pods_per_s: float | None = None
    p50_bind_s: float | None = None
    p99_bind_s: float | None = None
    p99_after_room_s: float | None = None  # binding - max(creation, since when its node had room for it)
    p99_after_freed_s: float | None = None  # the same, of the pods that waited for capacity to free
    waited: int = 0  # pods whose node's room came after their creation
    create_s: float | None = None
    phase_s: float | None = None
    api_requests_per_job: float | None = None
    scheduler_requests_per_job: float | None = None  # the operator's own (APF flow); None for kube-scheduler
    api_requests_top: dict[str, int] | None = None
    cpu_s: float | None = None
    peak_rss_mb: float | None = None
    peak_gpus_used: int = 0
    overallocated_gpus: int = 0  # every pod on the node counted (other schedulers' too)
    overallocated_own_gpus: int = 0  # this scheduler's pods alone
    double_bound: int = 0
    lost_jobs: int = 0
    unbound: int = 0
    restarts: int = 0
    ended: str = ""
    watch_error: str = ""  # the last error of the pod watch (it resumes from the last version seen)
    # Where the wait once its node had room went (gputwin only; kube_scale_lib.breakdown says what
    # each part is): p50 and p99 per part, and the pods the operator's bind trace covered.
    p99_scheduler_s: float | None = None  # loop + copy + pass + bind: the scheduler's own latency
    p99_scheduler_freed_s: float | None = None  # the same, of the pods that waited for capacity to free
    breakdown_p50_s: dict[str, float | None] | None = None
    breakdown_p99_s: dict[str, float | None] | None = None
    traced: int = 0
    passes: int = 0  # the operator's reconcile passes (snapshots in its trace), over a restart too
    forecast_rounds: int = 0  # the operator's forecast rounds done during the phase (issue 15)
    failed_passes: int = 0  # the operator's reconcile passes that failed during the phase


# --- report --------------------------------------------------------------------------------------------

ROWS = (
    ("pods bound", "bound"),
    ("pods bound per second", "pods_per_s"),
    ("p50 creation->binding s", "p50_bind_s"),
    ("p99 creation->binding s", "p99_bind_s"),
    ("p99 once its node had room s", "p99_after_room_s"),
    ("  of it the scheduler's (p99) s", "p99_scheduler_s"),
    ("pods that waited for capacity", "waited"),
    ("p99 of those once capacity freed s", "p99_after_freed_s"),
    ("  of it the scheduler's (p99) s", "p99_scheduler_freed_s"),
    ("creating the burst s", "create_s"),
    ("phase wall s", "phase_s"),
    ("API requests per job (all clients)", "api_requests_per_job"),
    ("scheduler's own requests per job", "scheduler_requests_per_job"),
    ("scheduler CPU s", "cpu_s"),
    ("scheduler peak RSS MB", "peak_rss_mb"),
    ("peak GPUs in use", "peak_gpus_used"),
    ("overallocated GPUs", "overallocated_gpus"),
    ("  by its own pods alone", "overallocated_own_gpus"),
    ("double bound", "double_bound"),
    ("lost jobs", "lost_jobs"),
    ("restarts", "restarts"),
    ("forecast rounds during the phase", "forecast_rounds"),
    ("failed reconcile passes", "failed_passes"),
    ("ended", "ended"),
)


def table(results: dict[str, PhaseResult]) -> str:
    names = list(results)
    lines = [f"{'':38}" + "".join(f"{n:>22}" for n in names)]
    for label, key in ROWS:
        cells = []
        for n in names:
            r = results[n]
            cells.append(
                "n/a" if not r.available else "-" if getattr(r, key) is None else str(getattr(r, key))
            )
        lines.append(f"{label:38}" + "".join(f"{c[:22]:>22}" for c in cells))
    for n, r in results.items():
        if not r.available:
            lines.append(f"{n}: not run: {r.note}")
        elif r.breakdown_p50_s and r.breakdown_p99_s:
            parts = ", ".join(f"{p} {r.breakdown_p50_s[p]} / {r.breakdown_p99_s[p]}" for p in r.breakdown_p50_s)
            lines.append(f"{n}: once its node had room, p50 / p99 s ({r.traced} pods, {r.passes} passes): {parts}")
    return "\n".join(lines)


def summary(args: argparse.Namespace, results: dict[str, PhaseResult],
            gangs: dict[str, GangResult] | None = None) -> dict[str, Any]:  # fmt: skip
    a, b, t = results.get("kube-scheduler"), results.get("gputwin"), results.get("tuned kube-scheduler")
    ran: list[PhaseResult | GangResult] = [r for r in results.values() if r.available]
    ran += [g for g in (gangs or {}).values() if g.available]
    a_rate = a.pods_per_s if a and a.available else None
    b_rate = b.pods_per_s if b and b.available else None
    t_rate = t.pods_per_s if t and t.available else None
    return {
        "nodes": args.nodes, "gpus_per_node": GPUS_PER_NODE, "leaves": LEAVES, "pods": args.pods,
        "seed": args.seed, "durations_s": list(args.durations), "restart": args.restart,
        "kube_scheduler_pods_per_s": a_rate, "gputwin_pods_per_s": b_rate,
        "ratio": round(b_rate / a_rate, 3) if a_rate and b_rate else None,
        "tuned_kube_scheduler_pods_per_s": t_rate,
        "ratio_tuned": round(b_rate / t_rate, 3) if t_rate and b_rate else None,
        "tuned_kube_scheduler_p99_bind_s": t.p99_bind_s if t and t.available else None,
        "tuned_kube_scheduler_p99_after_room_s": t.p99_after_room_s if t and t.available else None,
        "p99_bind_s": b.p99_bind_s if b and b.available else None,
        "kube_scheduler_p99_bind_s": a.p99_bind_s if a and a.available else None,
        "p99_after_room_s": b.p99_after_room_s if b and b.available else None,
        "kube_scheduler_p99_after_room_s": a.p99_after_room_s if a and a.available else None,
        "p99_scheduler_latency_s": b.p99_scheduler_s if b and b.available else None,
        "p99_after_freed_s": b.p99_after_freed_s if b and b.available else None,
        "kube_scheduler_p99_after_freed_s": a.p99_after_freed_s if a and a.available else None,
        "p99_scheduler_latency_freed_s": b.p99_scheduler_freed_s if b and b.available else None,
        "breakdown_p99_s": b.breakdown_p99_s if b and b.available else None,
        "overallocated_gpus": sum(r.overallocated_gpus for r in ran),
        "lost_jobs": sum(r.lost_jobs for r in ran if isinstance(r, PhaseResult)),
        "double_bound": sum(r.double_bound for r in ran),
        "gputwin_available": bool(b and b.available), "gputwin_note": b.note if b else "not run (--phases)",
        "phases": {name: asdict(r) for name, r in results.items()},
        **gang_summary(gangs or {}),
        **forecast_summary(args, results),
    }  # fmt: skip


def forecast_summary(args: argparse.Namespace, results: dict[str, PhaseResult]) -> dict[str, Any]:
    """Issue 15's target, the operator's p99 binding latency with forecasts on (phase B, a round every
    --forecast-period s) against off (phase F, the same pods): both p99s and on / off."""
    on, off = results.get("gputwin"), results.get(FORECASTS_OFF)
    on_p99 = on.p99_bind_s if on and on.available and "f" in args.phases else None
    off_p99 = off.p99_bind_s if off and off.available else None
    room = [r.p99_after_room_s if r and r.available else None for r in (on, off)]
    return {
        "forecast_period_s": args.forecast_period, "forecast_rounds_on": on.forecast_rounds if on else None,
        "forecasts_on_p99_bind_s": on_p99, "forecasts_off_p99_bind_s": off_p99,
        "forecasts_p99_bind_ratio": round(on_p99 / off_p99, 3) if on_p99 and off_p99 else None,
        "forecasts_on_p99_after_room_s": room[0] if off_p99 else None, "forecasts_off_p99_after_room_s": room[1],
        "forecasts_p99_after_room_ratio": round(room[0] / room[1], 3) if room[0] and room[1] and off_p99 else None,
    }  # fmt: skip
