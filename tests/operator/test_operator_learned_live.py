"""The learned estimator and `kubectl gputwin describe` on a REAL API server + KWOK, with the operator running.

What runs: the control plane of `tests/k8s_control_plane.py`, one KWOK node `kl-0` (8
`nvidia.com/gpu`, `scripts/k8s/fake-nodes.sh`), the CRDs, a topology `kl` and one partition
`kl-batch` whose SchedulingPolicy is QSSF. The operator (sim backend, its ServiceAccount's rights)
reads learned models from a GPUTWIN_MODEL_DIR holding a model trained from sacct history:
`tests/saved_models.py`'s `write_sacct_model`, `gputwin estimator train` on the real `sacct -P`
records of the project's SLURM test cluster (tests/estimators/data/, where `slow-learn` jobs ran
15-28 s and `fast-learn` ones 1-3 s, all root's, in partition `batch`). Each test holds the node
with a blocker, queues a `slow-learn` job and then a `fast-learn` one of the same size, and waits
until all ran:

- estimator learned: the fast job starts first (the model tells the job names apart);
- estimator history (the control): nothing has finished in the partition, both get the same
  prior, submit order holds, so the slow one starts first;
- while the two wait, `kubectl gputwin describe` (kubectl's plugin dispatch, the venv's
  `kubectl-gputwin`) shows the queued job's partition, position and the operator's Events;
- a policy edited to name a model the folder lacks turns not Ready with that reason, and the
  scheduler installed before the edit runs on (nothing half-applied).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from polling import wait_for
from saved_models import write_sacct_model
from test_operator_e2e import Operator, free_port, gpujob, installed, sa_kubeconfig

from gputwin.api.status import epoch_seconds

ROOT = Path(__file__).resolve().parents[2]
TOLERATED = "nvidia.com/gpu,kwok.x-k8s.io/node"
Obj = dict[str, Any]

__all__ = ["installed", "sa_kubeconfig"]  # fixtures, imported to be used

CLUSTER = """
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: kl}
spec:
  switches: [{name: kl-leaf}]
  nodeGroups: [{switch: kl-leaf, nodes: "kl-0", gpusPerNode: 8}]
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: kl-batch}
spec: {topology: kl, taskTypes: [batch], nodes: "kl-0", policy: kl-qssf}
---
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: kl-qssf}
spec: {queue: {policy: qssf}, placement: {policy: first-fit}, estimator: {type: learned, model: sacct}}
"""


@pytest.fixture(scope="module")
def cluster(crds: None, kube: Path, kubectl: Any) -> Iterator[None]:
    env = {**os.environ, "KUBECONFIG": str(kube)}
    subprocess.run(["bash", str(ROOT / "scripts/k8s/fake-nodes.sh"), "1", "8", "--prefix", "kl"], env=env,
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    kubectl.run("apply", "-f", "-", input=CLUSTER)
    # Another module's partition serving `batch` may still be going: one task type, one partition.
    wait_for("kl-batch to be the only partition serving batch", lambda: serving(kubectl, "batch") == ["kl-batch"], 60)
    yield
    kubectl.run("delete", "-f", "-", "--ignore-not-found", "--wait=false", input=CLUSTER, check=False)
    kubectl.run("delete", "node", "kl-0", "--ignore-not-found", "--wait=false", check=False)


def serving(kubectl: Any, task_type: str) -> list[str]:
    items = kubectl.json("get", "gpupartitions")["items"]
    return sorted(p["metadata"]["name"] for p in items if task_type in p["spec"].get("taskTypes", []))


@pytest.fixture(scope="module")
def operator(cluster: None, sa_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    work = tmp_path_factory.mktemp("operator-learned")
    write_sacct_model(work / "models" / "sacct")
    env = {**os.environ, "KUBECONFIG": str(sa_kubeconfig), "GPUTWIN_BACKEND": "sim", "GPUTWIN_NAMESPACE": "",
           "GPUTWIN_MODEL_DIR": str(work / "models"), "GPUTWIN_FORECAST_SECONDS": "0",
           "GPUTWIN_TOLERATED_TAINTS": TOLERATED}  # fmt: skip
    running = Operator(env, work, work, free_port())
    running.env["GPUTWIN_HEALTH_PORT"] = str(running.port)
    running.start()
    yield running
    running.stop()


@pytest.fixture
def namespace(kubectl: Any) -> Iterator[str]:
    name = f"kl-{uuid.uuid4().hex[:6]}"
    kubectl.run("create", "namespace", name)
    yield name
    kubectl.run("delete", "gpujobs", "--all", "-n", name, check=False)  # gone before the next test's jobs
    kubectl.run("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def estimator(kubectl: Any) -> Iterator[Any]:
    """Sets kl-qssf's spec.estimator (merge patch; None removes it); restores the learned one after."""

    def set_to(value: Obj | None) -> None:
        kubectl.run("patch", "schedulingpolicy", "kl-qssf", "--type=merge",
                    "-p", json.dumps({"spec": {"estimator": value}}))  # fmt: skip

    yield set_to
    set_to({"type": "learned", "model": "sacct"})


def job(namespace: str, name: str, job_name: str, seconds: float) -> Obj:
    """An 8-GPU `batch` job of root's (as the fixture's were) named `job_name` for the model."""
    body = gpujob(name, namespace, "batch", 8, seconds)
    body["spec"].update(user="root", jobName=job_name)
    return body


def phases(kubectl: Any, namespace: str) -> dict[str, str]:
    items = kubectl.json("get", "gpujobs", "-n", namespace)["items"]
    return {j["metadata"]["name"]: (j.get("status") or {}).get("phase", "") for j in items}


def queue_two(kubectl: Any, operator: Operator, namespace: str, blocker_seconds: float) -> None:
    """The blocker Running on kl-0, then `a-slow` and `b-fast` (in that submit order) Queued behind it."""
    kubectl.run("create", "-f", "-", input=json.dumps(job(namespace, "blocker", "blocker", blocker_seconds)))
    wait_for("the blocker running", lambda: phases(kubectl, namespace).get("blocker") == "Running", 60,
             on_timeout=operator.tail)  # fmt: skip
    for name, job_name in (("a-slow", "slow-learn"), ("b-fast", "fast-learn")):
        kubectl.run("create", "-f", "-", input=json.dumps(job(namespace, name, job_name, 1)))
    wait_for("both queued", lambda: phases(kubectl, namespace) == {"blocker": "Running", "a-slow": "Queued",
                                                                  "b-fast": "Queued"}, 30, on_timeout=operator.tail)


def start_order(kubectl: Any, operator: Operator, namespace: str) -> list[str]:
    """The two queued jobs by their start time, once every job has succeeded."""
    wait_for("every job to succeed", lambda: set(phases(kubectl, namespace).values()) == {"Succeeded"}, 90,
             on_timeout=operator.tail)  # fmt: skip
    items = kubectl.json("get", "gpujobs", "-n", namespace)["items"]
    starts = {j["metadata"]["name"]: epoch_seconds(j["status"]["startTime"]) for j in items}
    assert starts["blocker"] <= min(starts["a-slow"], starts["b-fast"])
    return sorted(("a-slow", "b-fast"), key=starts.__getitem__)


def plugin(kubectl: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl gputwin ARGS` as a user runs it: the test's kubectl, the venv's kubectl-gputwin on PATH."""
    path = os.pathsep.join((str(Path(sys.executable).parent), str(kubectl.binary.parent), os.environ.get("PATH", "")))
    return subprocess.run([str(kubectl.binary), "gputwin", *args], env={**kubectl.env(), "PATH": path},
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_learned_qssf_starts_the_fast_user_first_and_describe_says_why_it_waits(
    operator: Operator, kubectl: Any, namespace: str
) -> None:
    queue_two(kubectl, operator, namespace, blocker_seconds=12)
    shown = plugin(kubectl, "describe", "gpujob", "blocker", "b-fast", "-n", namespace)
    assert shown.returncode == 0, shown.stderr
    blocker, fast = shown.stdout.split("\n\nName:")  # kubectl's blank line between objects
    assert "Scheduled" in blocker.split("Events:")[1], blocker  # the operator's own Event about it
    assert "b-fast" in fast and "Queued" in fast, fast
    assert "kl-batch (queue policy qssf)" in fast and "of 2" in fast, fast  # its partition and position
    everything = plugin(kubectl, "describe", "gpujobs", "-n", namespace)
    names = re.findall(r"^Name: +(\S+)$", everything.stdout, re.M)
    assert everything.returncode == 0 and names == ["a-slow", "b-fast", "blocker"], everything.stdout
    assert start_order(kubectl, operator, namespace) == ["b-fast", "a-slow"]


def test_history_estimator_keeps_submit_order_the_control(
    operator: Operator, kubectl: Any, namespace: str, estimator: Any
) -> None:
    estimator(None)  # the running mean: no job of these names has ended, both get root's mean
    queue_two(kubectl, operator, namespace, blocker_seconds=3)
    assert start_order(kubectl, operator, namespace) == ["a-slow", "b-fast"]


def test_a_policy_edited_to_an_absent_model_says_so_and_the_last_valid_scheduler_runs_on(
    operator: Operator, kubectl: Any, namespace: str, estimator: Any
) -> None:
    """Nothing half-applied on the live cluster: the policy's Ready turns False naming the model,
    and jobs keep being scheduled by the learned scheduler installed before the edit."""
    estimator({"type": "learned", "model": "absent"})

    def refused() -> str | None:
        conditions = (kubectl.json("get", "schedulingpolicy", "kl-qssf").get("status") or {}).get("conditions") or []
        found = next((c for c in conditions if c.get("type") == "Ready"), {})
        return found.get("message") if found.get("reason") == "ModelUnusable" else None

    message = wait_for("kl-qssf not Ready for its model", refused, 30, on_timeout=operator.tail)
    assert message.startswith("spec.estimator.model: no model 'absent' in GPUTWIN_MODEL_DIR"), message
    queue_two(kubectl, operator, namespace, blocker_seconds=3)
    assert start_order(kubectl, operator, namespace) == ["b-fast", "a-slow"]  # still the learned order
    missing = plugin(kubectl, "describe", "gpujob", "no-such", "-n", namespace)
    assert missing.returncode == 1 and "no-such" in missing.stderr and "Traceback" not in missing.stderr
