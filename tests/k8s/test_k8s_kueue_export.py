"""`gputwin export kueue`'s YAML against Kueue's own CRDs on the real API server (scripts/k8s/start.sh).

The CRDs are Kueue v0.17.0's (ResourceFlavor, Cohort, ClusterQueue, LocalQueue), fetched from the Go
module by scripts/k8s/kueue-crds.sh into the cache, installed once for this module and removed at its
end. The server checks each object against the CRD's OpenAPI schema and CEL rules (Kueue's webhooks,
which need the Kueue controller, do not run here): the export must be accepted, and deliberately
broken documents (a v1beta1 field name, a limit without a cohort, a bad quantity) must be refused,
so the test can tell.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from ci_rule import skip_or_fail  # tests/ci_rule.py
from polling import wait_for  # tests/polling.py

ROOT = Path(__file__).resolve().parents[2]
FETCH = ROOT / "scripts" / "k8s" / "kueue-crds.sh"
SHARED_LAB = ROOT / "manifests" / "examples" / "shared-lab.yaml"
CRDS = tuple(f"{p}.kueue.x-k8s.io" for p in ("resourceflavors", "cohorts", "clusterqueues", "localqueues"))
Kubectl = Any  # conftest.Kubectl: run(*args, input=, check=) and json(*args)

# Two GPU models in one partition: the export splits the quotas over two flavors.
TWO_MODELS = """\
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: t}
spec:
  switches: [{name: leaf0}]
  nodeGroups:
    - {switch: leaf0, nodes: "a[1-2]", gpusPerNode: 8, model: a100}
    - {switch: leaf0, nodes: "v[1-6]", gpusPerNode: 8, model: V100_32gb}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: PART}
spec:
  topology: t
  taskTypes: ["*"]
  nodes: "a[1-2],v[1-6]"
  policy: p
  quotas:
    - {tenant: vision, gpus: 32, cohort: lab, borrowingLimit: 10, lendingLimit: 5}
    - {tenant: speech, gpus: 16, cohort: lab}
---
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: p}
spec:
  queue: {policy: fifo}
  fairness: {policy: drf, weights: {vision: 1.5}}
"""


def export(cluster: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "gputwin", "export", "kueue", "--cluster", str(cluster), *args],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def names(kubectl: Kubectl, *args: str) -> list[str]:
    return kubectl.run("get", *args, "--ignore-not-found", "-o", "name").stdout.split()


@pytest.fixture(scope="module")
def kueue_crds(kubectl: Kubectl) -> Iterator[None]:
    fetched = subprocess.run(["bash", str(FETCH)], capture_output=True, text=True, timeout=600, check=False)
    if fetched.returncode != 0:
        skip_or_fail(f"scripts/k8s/kueue-crds.sh failed ({fetched.returncode}): {fetched.stderr[-2000:]}")
    folder = fetched.stdout.strip().splitlines()[-1]
    existing = names(kubectl, "crd", *CRDS)
    # Server-side: the ClusterQueue CRD is 80 KB, too close to the last-applied annotation's limit.
    kubectl.run("apply", "--server-side", "--force-conflicts", "-f", folder)
    kubectl.run("wait", "--for=condition=Established", "--timeout=120s", *(f"crd/{n}" for n in CRDS))
    yield
    if not existing:
        kubectl.run("delete", "crd", *CRDS, "--ignore-not-found", "--wait=false")
        wait_for(
            "Kueue's CRDs to be deleted", lambda: not names(kubectl, "crd", *CRDS), timeout=300, interval=1
        )


@pytest.fixture(scope="module")
def namespace(kubectl: Kubectl) -> Iterator[Callable[[str], None]]:
    """`namespace(name)` makes the namespace if it is missing; the ones it made are deleted after the
    module (not after each test: a namespace being deleted refuses new objects for seconds)."""
    made: list[str] = []

    def ensure(name: str) -> None:
        if not names(kubectl, "namespace", name):
            kubectl.run("create", "namespace", name)
            made.append(name)

    yield ensure
    if made:
        kubectl.run("delete", "namespace", *made, "--ignore-not-found", "--wait=false")


def dry_run(kubectl: Kubectl, text: str) -> subprocess.CompletedProcess[str]:
    return kubectl.run("apply", "--dry-run=server", "--validate=strict", "-f", "-", input=text, check=False)


def test_the_shared_lab_export_is_accepted_by_kueues_crds(kubectl: Kubectl, kueue_crds: None,
                                                           namespace: Callable[[str], None]) -> None:  # fmt: skip
    text = export(SHARED_LAB)
    for tenant in ("vision", "speech", "others"):
        namespace(tenant)
    done = dry_run(kubectl, text)
    assert done.returncode == 0, done.stderr
    for shown in ("resourceflavor.kueue.x-k8s.io/shared", "cohort.kueue.x-k8s.io/lab.shared",
                  "clusterqueue.kueue.x-k8s.io/vision.shared", "localqueue.kueue.x-k8s.io/shared"):  # fmt: skip
        assert f"{shown} created (server dry run)" in done.stdout, done.stdout
    assert done.stdout.count("(server dry run)") == 8


def test_two_models_applied_for_real_then_deleted(kubectl: Kubectl, kueue_crds: None, namespace: Callable[[str], None],
                                                  tmp_path: Path) -> None:  # fmt: skip
    part = f"k{uuid.uuid4().hex[:8]}"
    ns = f"ml-{part}"
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(TWO_MODELS.replace("PART", part))
    text = export(cluster, "--namespace", ns)
    namespace(ns)
    try:
        kubectl.run("apply", "--validate=strict", "-f", "-", input=text)
        stored = kubectl.json("get", "clusterqueue", f"vision.{part}")
        written = next(d for d in yaml.safe_load_all(text) if d["metadata"]["name"] == f"vision.{part}")
        assert stored["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        assert stored["spec"]["resourceGroups"] == written["spec"]["resourceGroups"]
        assert stored["spec"]["fairSharing"] == {"weight": "1.5"}
        flavors = [f["name"] for f in stored["spec"]["resourceGroups"][0]["flavors"]]
        assert flavors == [f"a100.{part}", f"v100-32gb.{part}"]
        local = kubectl.json("get", "localqueue", "-n", ns, f"speech.{part}")
        assert local["spec"]["clusterQueue"] == f"speech.{part}"
    finally:
        kubectl.run("delete", "--ignore-not-found", "--wait=true", "-f", "-", input=text, timeout=120)
    assert not names(kubectl, "clusterqueue", f"vision.{part}", f"speech.{part}")


def _broken(objects: list[dict[str, Any]], kind: str, change: Any) -> str:
    docs = copy.deepcopy(objects)
    target = next(d for d in docs if d["kind"] == kind)
    change(target)
    return "\n---\n".join(json.dumps(d) for d in docs)


def _quota(cq: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    return entry


@pytest.mark.parametrize(
    ("kind", "change", "refusal"),
    [
        (
            "ClusterQueue",
            lambda cq: cq["spec"].update(cohort=cq["spec"].pop("cohortName")),
            'unknown field "spec.cohort"',
        ),  # v1beta1's name, refused by v1beta2
        (
            "ClusterQueue",
            lambda cq: cq["spec"].pop("cohortName"),
            "borrowingLimit must be nil when cohort is empty",
        ),
        ("ClusterQueue", lambda cq: _quota(cq).update(nominalQuota="lots"), "nominalQuota"),
        ("LocalQueue", lambda lq: lq["spec"].update(clusterQueue="Vision_Shared"), "spec.clusterQueue"),
    ],
    ids=["v1beta1-field", "borrowing-without-cohort", "bad-quantity", "bad-queue-name"],
)
def test_broken_documents_are_refused(kubectl: Kubectl, kueue_crds: None, namespace: Callable[[str], None], kind: str,
                                      change: Any, refusal: str) -> None:  # fmt: skip
    objects = list(yaml.safe_load_all(export(SHARED_LAB)))
    for tenant in ("vision", "speech", "others"):
        namespace(tenant)
    done = dry_run(kubectl, _broken(objects, kind, change))
    assert done.returncode != 0, done.stdout
    assert refusal in done.stderr, done.stderr
