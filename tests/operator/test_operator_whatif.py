"""`gputwin whatif --kube` on a REAL API server + KWOK with the operator running.

The cluster and the operator are test_operator_forecast's (four KWOK nodes `kf-0..3` of 8 GPUs, one
partition `kf-train` under the priority queue; the operator on the sim backend, as its
ServiceAccount). One whole-cluster job of an hour runs; behind it queue two long high-priority jobs
and three short low-priority ones. Forked from the live snapshot, sjf (short first) must beat the
current priority policy on average JCT, the fork's pending count must be the live queue's, and
draining a node must lengthen the current policy's average JCT.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from test_operator_e2e import Operator, gpujob, wait_for
from test_operator_forecast import TOLERATED, cluster, installed, namespace, operator, sa_kubeconfig

from gputwin.cli.main import cli

__all__ = ["cluster", "installed", "namespace", "operator", "sa_kubeconfig"]  # fixtures, imported to be used

QUEUE = (("long-a", 16, 3 * 3600, 8), ("long-b", 16, 3 * 3600, 7), ("short-a", 8, 600, 1),
         ("short-b", 8, 600, 2), ("mid", 8, 1800, 3))  # name, GPUs, seconds, priority  # fmt: skip


def submit(kubectl: Any, ns: str, name: str, gpus: int, seconds: float, priority: int) -> None:
    job = gpujob(name, ns, "train", gpus, seconds)
    job["spec"]["priority"] = priority
    kubectl.run("create", "-f", "-", input=json.dumps(job))


def phases(kubectl: Any, ns: str) -> dict[str, str]:
    items = kubectl.json("get", "gpujobs", "-n", ns)["items"]
    return {j["metadata"]["name"]: j.get("status", {}).get("phase", "") for j in items}


def whatif(kube: Path, ns: str, *args: str) -> dict[str, Any]:
    env = {"KUBECONFIG": "", "GPUTWIN_TOLERATED_TAINTS": ",".join(TOLERATED)}
    result = CliRunner().invoke(cli, ["whatif", "--kube", "--kubeconfig", str(kube), "--namespace", ns,
                                      "--samples", "4", "--horizon", "1d", "--json", *args], env=env)  # fmt: skip
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return doc


def test_whatif_kube_ranks_sjf_on_the_live_queue_and_a_drain_changes_it(
    operator: Operator, kube: Path, kubectl: Any, namespace: str
) -> None:
    submit(kubectl, namespace, "first", 32, 3600, 9)
    wait_for("first running", lambda: phases(kubectl, namespace).get("first") == "Running", 60,
             on_timeout=operator.tail)  # fmt: skip
    for job in QUEUE:
        submit(kubectl, namespace, *job)

    def settled() -> list[str] | None:
        """The Queued jobs, once the operator has given all six a phase."""
        seen = phases(kubectl, namespace)
        return sorted(n for n, p in seen.items() if p == "Queued") if len(seen) == 6 and all(seen.values()) else None

    queued = wait_for("the queue", settled, 60, on_timeout=operator.tail)
    assert queued == sorted(name for name, *_ in QUEUE)

    doc = whatif(kube, namespace, "--policy", "sjf")
    assert doc["snapshot"]["pending"] == len(queued) == 5 and doc["snapshot"]["source"] == "kube"
    ranked = [c["candidate"] for c in doc["candidates"]]
    # the declared policy (no backfill) first-fit; short jobs first: three start when `first` ends, not 3 h later
    assert ranked == ["sjf/first-fit/as-requested", "priority/first-fit/as-requested"], ranked
    by_name = {c["candidate"]: c for c in doc["candidates"]}
    assert by_name[ranked[0]]["avg_jct"] < by_name[ranked[1]]["avg_jct"]

    drained = whatif(kube, namespace, "--policy", "sjf", "--drain", "kf-0")
    assert drained["changes"] == "drain kf-0" and drained["snapshot"]["pending"] == 5
    now = {c["candidate"]: c["avg_jct"] for c in drained["candidates"]}
    # 24 GPUs left: the two 16-GPU jobs can no longer run side by side
    assert now[ranked[1]] > by_name[ranked[1]]["avg_jct"]
    assert phases(kubectl, namespace)["first"] == "Running"  # a what-if changes nothing live
