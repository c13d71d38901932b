"""`gputwin tune`: search policy settings on one trace with optuna, write the winner as a SchedulingPolicy.

DIR gets `study.db` (the optuna study: run the same command again to resume or extend `--budget`),
`tune.json` (every trial, the best, its objective on the tuning and hold-out parts, the baseline)
`schedulingpolicy.yaml`, the winner as a gputwin.io/v1alpha1 SchedulingPolicy validated by the
API models, ready for `kubectl apply`, and `report.md`, the same for a person (`gputwin.sim.tunereport`).
The study is resume state, written trial by trial in place; the three reports are written into a
new folder swapped in whole (`gputwin.sim.atomic`), so a failure leaves the last run's set, never
one without the others. A study file that is not one, or
cannot be written, is one error line naming it. The space file format is documented in
`gputwin.sim.space`. `--partition NAME` tunes that partition's policy alone and writes it as that
partition's policy.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml
from pydantic import ValidationError

from gputwin.api.convert import policy_document, policy_spec
from gputwin.api.loader import load_documents
from gputwin.api.meta import API_VERSION
from gputwin.api.problems import validation_problems
from gputwin.api.v1alpha1 import GPUPartition, SchedulingPolicy
from gputwin.api.workloads import search_vocabulary
from gputwin.api.yamlfiles import Budget, YamlFileError, documents, read_text
from gputwin.cli.options import load_inputs, trace_and_cluster
from gputwin.cli.output import ranked_table
from gputwin.cli.params import FiniteRange
from gputwin.cli.progress import sweep_progress
from gputwin.cli.version import command_line, core_flavour
from gputwin.core.model import ClusterSpec, PolicySpec
from gputwin.sim.atomic import TUNE, OutputError, atomic_folder, check, describe
from gputwin.sim.run import RunError
from gputwin.sim.evaluation import OBJECTIVES, TENANCY_METRICS
from gputwin.sim.provenance import provenance
from gputwin.sim.space import Space, SpaceError, default_space, parse_space
from gputwin.sim.tunereport import tune_markdown

if TYPE_CHECKING:
    from gputwin.sim.tune import TuneResult

# Names a trial may choose: registered in the core AND expressible in a SchedulingPolicy (the same
# vocabulary as a TraceReplay's spec.search).
VOCABULARY = search_vocabulary()
TABLE_ROWS = 10


def write_text(path: Path, text: str) -> None:
    path.write_text(text)


def check_objective(cluster: ClusterSpec, objective: str, partition: str | None) -> None:
    """RunError if `objective` is a tenancy metric the run would not measure: those are the whole
    cluster's (no --partition) and scored only with tenants (`Summary.scores`)."""
    if objective not in TENANCY_METRICS:
        return
    if partition is not None:
        raise RunError(f"--objective {objective}: a whole-cluster metric, not one of partition {partition!r}")
    if not any(p.quotas for p in cluster.partitions):
        raise RunError(f"--objective {objective}: the cluster has no tenants (no partition declares spec.quotas)")


def read_space(path: Path | None) -> Space:
    """The default space, or the one in `path` (YAML); SpaceError (`FILE: knob: reason`) if bad."""
    if path is None:
        return default_space(VOCABULARY)
    try:  # the bounded manifest reader: a space file cannot hang, exhaust or crash tune either
        docs = [data for _, data in documents(read_text(path, Budget()))]
    except YamlFileError as exc:
        raise SpaceError(f"{path}: {exc.field}: {exc.reason}") from None
    if len(docs) != 1:
        raise SpaceError(f"{path}: document: expected one YAML document, found {len(docs)}")
    data = docs[0]
    return parse_space(data, str(path), VOCABULARY)


def shared_checkpoint(cluster: ClusterSpec, partition: str | None = None) -> float | None:
    """The checkpoint cost of `partition`, else the partitions' when they all agree (the simulation
    kept each one's own)."""
    costs = {p.policy.checkpoint_seconds for p in cluster.partitions if partition in (None, p.name)}
    return costs.pop() if len(costs) == 1 else None


def default_name(cluster_path: Path, partition: str | None) -> str:
    """The written policy's name without --name: with --partition, the SchedulingPolicy that partition
    alone references (applying the YAML then changes that partition and no other), else PARTITION-tuned."""
    if partition is None:
        return "tuned"
    users: dict[str, list[str]] = {}
    if cluster_path.suffix.lower() != ".csv":  # a VC table names no policies
        for resource in load_documents(cluster_path):
            if isinstance(resource, GPUPartition) and resource.spec.policy is not None:
                users.setdefault(resource.spec.policy, []).append(resource.metadata.name)
    return next((policy for policy, names in users.items() if names == [partition]), f"{partition}-tuned")


def scheduling_policy(policy: PolicySpec, name: str, checkpoint: float | None) -> dict[str, Any]:
    """The SchedulingPolicy document for `policy`, validated by the API model; it converts back to
    exactly the policy simulated (else this is a bug, not a user error)."""
    spec = policy_document(dataclasses.replace(policy, checkpoint_seconds=checkpoint))
    doc = {"apiVersion": API_VERSION, "kind": "SchedulingPolicy", "metadata": {"name": name}, "spec": spec}
    try:
        model = SchedulingPolicy.model_validate(doc)
    except ValidationError as exc:
        raise RunError(str(validation_problems("SchedulingPolicy", exc)[0])) from None
    back = policy_spec(model)
    assert back == dataclasses.replace(policy, checkpoint_seconds=checkpoint), (back, policy)
    dumped = model.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    # Written from the validated model, in the usual manifest order, without empty sections.
    return {"apiVersion": model.api_version, "kind": model.kind, "metadata": {"name": model.metadata.name},
            "spec": {k: v for k, v in dumped.items() if v != {}}}  # fmt: skip


def print_result(result: TuneResult, data: Mapping[str, Any], title: str) -> None:
    """The distinct policies tried, best first, then the objective on both parts next to the baseline."""
    from gputwin.sim.tune import describe  # optuna loads only when tune runs: every command starts faster
    seen: set[str] = set()
    rows: list[dict[str, Any]] = []
    for row in result.trials:
        label = describe(row.policy)
        if label not in seen and len(rows) < TABLE_ROWS:
            seen.add(label)
            rows.append({"rank": len(rows) + 1, "candidate": label, **row.metrics})
    ranked_table(rows, (), title)
    o, best, base = data["objective"], data["best"], data["baseline"]
    jobs = f"{data['split']['tune_jobs']:,} jobs"
    if data["partition"] is not None:  # judged on that partition's jobs alone
        jobs = f"{best['metrics']['jobs']:,} jobs of partition {data['partition']}"
    click.echo(f"{o} ({data['direction']}): best {best['tune']:,.3f} vs baseline {base['tune']:,.3f} "
               f"on the tuning part ({jobs})")  # fmt: skip
    if best["holdout"] is not None:
        held = data["split"]["holdout_jobs"] if data["partition"] is None else best["holdout_metrics"]["jobs"]
        click.echo(f"{o} on the hold-out ({held:,} jobs submitted from "
                   f"{data['split']['cut']:,.0f} s): best {best['holdout']:,.3f} vs baseline {base['holdout']:,.3f}")  # fmt: skip


@click.command()
@trace_and_cluster
@click.option(
    "--space",
    "space_path",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="YAML search space (format: gputwin.sim.space); default: every knob, default ranges.",
)
@click.option(
    "--objective",
    default="avg_jct",
    show_default=True,
    type=click.Choice(list(OBJECTIVES)),
    help="Run-summary metric to optimise (gpu_utilization and jain are maximised, the rest minimised; "
         "jain and fragmented_gpus need a cluster with tenants).",
)
@click.option(
    "--budget",
    default=30,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Finished trials wanted in DIR's study, counting those of earlier runs.",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the sampler and of placement.")
@click.option(
    "--holdout",
    type=FiniteRange(0, 1, min_open=True, max_open=True),
    help="Tune on the earliest jobs, report on this last fraction too (split by submit time).",
)
@click.option(
    "--jobs",
    "workers",
    default=os.cpu_count() or 1,
    show_default="CPU count",
    type=click.IntRange(1, 256),
    help="Trials run in parallel, one process each.",
)
@click.option(
    "--partition",
    metavar="NAME",
    help="Tune only this partition's policy (the others keep theirs), judged on its jobs alone.",
)
@click.option(
    "--name",
    help="metadata.name of the SchedulingPolicy written [default: tuned; with --partition, the policy "
    "only that partition references, else NAME-tuned].",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Write study.db, tune.json, schedulingpolicy.yaml and report.md (markdown, for a person) here.",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print tune.json's object on stdout instead of the table."
)
def tune(trace_path: Path, fmt: str, cluster_path: Path, gpus_per_node: int, skip_invalid: bool, procs_per_gpu: int,
         space_path: Path | None, objective: str, budget: int, seed: int, holdout: float | None, workers: int,
         partition: str | None, name: str | None, out_dir: Path, quiet: bool, as_json: bool) -> None:  # fmt: skip
    """Search queue, placement, backfill, sizing and their knobs for the best policy on one trace."""
    from gputwin.sim.tune import check_partition
    from gputwin.sim.tune import tune as run_tune  # optuna loads only when tune runs

    space = read_space(space_path)
    cluster, trace = load_inputs(trace_path, fmt, cluster_path, gpus_per_node, skip_invalid, procs_per_gpu)
    check_partition(cluster, partition)
    check_objective(cluster, objective, partition)
    name = name or default_name(cluster_path, partition)
    checkpoint = shared_checkpoint(cluster, partition)
    scheduling_policy(PolicySpec(params={"max_wait": 300.0, "max_factor": 2.0, "allowed_gpus": ()}),
                      name, checkpoint)  # a bad --name fails now, not after the search  # fmt: skip
    check(out_dir, TUNE)  # a folder that cannot take the study or the report is refused now
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(describe(exc, out_dir)) from None
    with sweep_progress(budget, not quiet, "tuning", "trials") as advance:
        progress = (lambda done, label: advance(label, done)) if advance is not None else None
        result = run_tune(cluster, trace.jobs, space, storage=out_dir / "study.db", objective=objective,
                          budget=budget, seed=seed, holdout=holdout, workers=workers, partition=partition,
                          progress=progress)  # fmt: skip
    document = scheduling_policy(result.best.policy, name, checkpoint)
    data = {"trace": {"path": str(trace_path), "format": trace.format, "jobs": len(trace.jobs),
                      "skipped": dict(trace.skipped)},
            "seed": seed, "budget": budget, "holdout": holdout, "partition": partition, "space": space.to_json(),
            "schedulingpolicy": document, **result.to_json()}  # fmt: skip
    origin = provenance(trace_path, cluster_path, core_flavour(), datetime.now(timezone.utc), command_line())
    with atomic_folder(out_dir, TUNE) as new:
        write_text(new / "schedulingpolicy.yaml", yaml.safe_dump(document, sort_keys=False))
        write_text(new / "tune.json", json.dumps(data, indent=1, sort_keys=True) + "\n")
        write_text(new / "report.md", tune_markdown(data, origin))
    if as_json:
        click.echo(json.dumps(data, sort_keys=True))
        return
    scope = "" if partition is None else f", partition {partition}"
    title = f"gputwin tune — {len(result.split.tune):,} jobs{scope}, {len(result.trials)} trials"
    print_result(result, data, title)
    if not quiet:
        click.echo(
            f"wrote {out_dir / 'schedulingpolicy.yaml'}, {out_dir / 'tune.json'}, {out_dir / 'report.md'}, "
            f"{out_dir / 'study.db'}"
        )
