"""The kopf operator end to end, against a REAL kube-apiserver + etcd (fixture `kube`).

What runs: the CRDs (`crds/`) and every sample (`manifests/samples/`) applied with kubectl, the
install manifests (`manifests/operator/`) applied for real, and the operator started as a
subprocess (`python -m kopf run -m gputwin.operator.handlers --standalone --all-namespaces`, once
through `gputwin operator`) with a kubeconfig holding the token of the operator's OWN
ServiceAccount: every test below also proves the ClusterRole is enough.

Everything waits by polling with a deadline (`wait_for`), never by sleeping a fixed time. Sim
GPUJobs run for real seconds of wall time, so their durations are 2–3 s. Each test deletes the
objects it creates; the module fixtures remove the samples, the install and the CRDs they added.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from gputwin.adapters.kube import KubeStore, MissingCRD, ObjectNotFound, Retry
from polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "manifests" / "samples"
INSTALL = ROOT / "manifests" / "operator"
GROUP, VERSION = "gputwin.io", "v1alpha1"
SA_NAMESPACE, SA_NAME = "gputwin-system", "gputwin-operator"
SA_USER = f"system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}"
GPUS_PER_NODE = 8  # two-leaf.yaml
KOPF_RUN = [sys.executable, *"-m kopf run -m gputwin.operator.handlers --standalone --all-namespaces".split()]
TERMINAL = ("Succeeded", "Failed", "Rejected")

T = TypeVar("T")
Obj = dict[str, Any]


# --- helpers ----------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def gputwin_command() -> list[str]:
    script = Path(sys.executable).with_name("gputwin")
    if script.is_file():
        return [str(script)]
    found = shutil.which("gputwin")
    return [found] if found else [sys.executable, "-c", "from gputwin.cli.main import main; main()"]


def gpujob(name: str, namespace: str, task_type: str, gpus: int, seconds: float | None = None) -> Obj:
    spec: Obj = {"taskType": task_type, "gpus": gpus, "user": "e2e", "jobName": name}
    if seconds is not None:
        spec["durationSeconds"] = seconds
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GPUJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def dump(*objs: Obj) -> str:
    return yaml.safe_dump_all(list(objs), sort_keys=False)


@dataclass
class Api:
    """Fast reads for polling (the Python client, as the admin): what kubectl get would show."""

    objects: client.CustomObjectsApi
    core: client.CoreV1Api
    auth: client.AuthorizationV1Api

    def allowed(
        self, verb: str, group: str, resource: str, subresource: str = "", namespace: str = ""
    ) -> bool:
        """Whether the operator's ServiceAccount may do this (a SubjectAccessReview)."""
        attributes = client.V1ResourceAttributes(
            verb=verb,
            group=group,
            resource=resource,
            subresource=subresource or None,
            namespace=namespace or None,
        )
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{SA_NAMESPACE}", "system:authenticated"]
        review = client.V1SubjectAccessReview(
            spec=client.V1SubjectAccessReviewSpec(user=SA_USER, groups=groups, resource_attributes=attributes)
        )
        answer = self.auth.create_subject_access_review(review)
        return bool(answer.status and answer.status.allowed)

    def jobs(self, namespace: str | None = None) -> list[Obj]:
        if namespace:
            got = self.objects.list_namespaced_custom_object(GROUP, VERSION, namespace, "gpujobs")
        else:
            got = self.objects.list_cluster_custom_object(GROUP, VERSION, "gpujobs")
        return list(got["items"])

    def phases(self, namespace: str) -> dict[str, str]:
        return {j["metadata"]["name"]: (j.get("status") or {}).get("phase", "") for j in self.jobs(namespace)}

    def get(self, plural: str, name: str, namespace: str | None = None) -> Obj:
        if namespace:
            return dict(self.objects.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name))
        return dict(self.objects.get_cluster_custom_object(GROUP, VERSION, plural, name))

    def status(self, plural: str, name: str, namespace: str | None = None) -> Obj:
        return dict(self.get(plural, name, namespace).get("status") or {})

    def events(self, namespace: str, kind: str = "GPUJob") -> list[tuple[str, str]]:
        """(object name, reason) of every event about `kind` objects in `namespace`."""
        found = self.core.list_namespaced_event(namespace, field_selector=f"involvedObject.kind={kind}")
        return [(e.involved_object.name or "", e.reason or "") for e in found.items]


def _condition(status: Obj, type: str) -> Obj:
    found = [c for c in status.get("conditions") or [] if c["type"] == type]
    assert found, f"no {type} condition in {status}"
    return dict(found[0])


def ready(status: Obj) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), None)


def node_usage(jobs: list[Obj]) -> Counter[str]:
    """GPUs per node held by Running jobs, from their recorded allocations."""
    used: Counter[str] = Counter()
    for job in jobs:
        status = job.get("status") or {}
        if status.get("phase") == "Running":
            for slot in (status.get("allocation") or {}).get("slots", []):
                used[slot["node"]] += slot["gpus"]
    return used


@dataclass
class Operator:
    """The operator as a subprocess: start, wait until ready, stop (by its own pid only)."""

    env: dict[str, str]
    cwd: Path
    logs: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    log_file: Path = field(default_factory=Path)

    def start(self, command: list[str] | None = None) -> None:
        self.starts += 1
        self.log_file = self.logs / f"operator-{self.starts}.log"
        with open(self.log_file, "wb") as out:
            self.proc = subprocess.Popen(
                command or KOPF_RUN,
                cwd=self.cwd,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.wait_ready()

    def wait_ready(self, timeout: float = 60) -> None:
        def probe() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                pytest.fail(
                    f"the operator exited ({self.proc.returncode}) before it was ready:\n{self.tail()}"
                )
            return http_status(self.url("/readyz")) == 200

        wait_for("the operator's /readyz", probe, timeout, on_timeout=self.tail)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 30) -> int | None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc else None
        proc.send_signal(sig)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            pytest.fail(f"the operator ignored {sig.name} for {timeout:g} s:\n{self.tail()}")

    def tail(self, lines: int = 60) -> str:
        if not self.log_file.is_file():
            return ""
        text = self.log_file.read_text(errors="replace").splitlines()
        return "\n".join(["--- operator log (tail) ---", *text[-lines:]])


# --- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def api(kube: Path) -> Api:
    api_client = config.new_client_from_config(config_file=str(kube))  # type: ignore[no-untyped-call]
    return Api(
        client.CustomObjectsApi(api_client),
        client.CoreV1Api(api_client),
        client.AuthorizationV1Api(api_client),
    )


@pytest.fixture(scope="module")
def installed(kubectl: Any) -> Iterator[None]:
    """manifests/operator applied for real (kubectl apply -k), removed at the end."""
    wait_for(
        "an earlier gputwin-system namespace to go",
        lambda: kubectl.run("get", "namespace", SA_NAMESPACE, check=False).returncode != 0,
        60,
    )
    kubectl.run("apply", "-k", str(INSTALL))
    yield
    kubectl.run("delete", "-k", str(INSTALL), "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture(scope="module")
def sa_kubeconfig(
    installed: None, kubectl: Any, kube: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A kubeconfig with a token of the operator's ServiceAccount: the operator gets only its RBAC."""
    token = kubectl.run("create", "token", SA_NAME, "-n", SA_NAMESPACE, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(kube.read_text())
    cluster = admin["clusters"][0]["cluster"]
    path = tmp_path_factory.mktemp("operator-sa") / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "operator",
                "clusters": [{"name": "e2e", "cluster": cluster}],
                "users": [{"name": SA_NAME, "user": {"token": token}}],
                "contexts": [{"name": "operator", "context": {"cluster": "e2e", "user": SA_NAME}}],
            }
        )
    )
    return path


@pytest.fixture(scope="module")
def samples(crds: None, kubectl: Any) -> Iterator[None]:
    """manifests/samples/ as is (it must apply), then made fit for wall-clock runs.

    The sample jobs simulate hours; they get 2–4 s. The replay's trace path is relative to the
    repo root and the operator runs elsewhere, so it is made absolute.
    """
    kubectl.run("apply", "-f", str(SAMPLES))
    for name, seconds in (("resnet50-4gpu", 3), ("llm-finetune", 4), ("bert-serving", 2)):
        kubectl.run(
            "patch",
            "gpujob",
            name,
            "-n",
            "default",
            "--type=merge",
            "-p",
            json.dumps({"spec": {"durationSeconds": seconds}}),
        )
    yield  # the sample replay's file, demo-trace.csv, is read from GPUTWIN_TRACE_DIR=manifests/samples
    kubectl.run("delete", "-f", str(SAMPLES), "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator(
    samples: None, sa_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    """The operator, started after the samples exist, as the operator's ServiceAccount."""
    work = tmp_path_factory.mktemp("operator-cwd")
    env = {**os.environ, "KUBECONFIG": str(sa_kubeconfig), "GPUTWIN_BACKEND": "sim", "GPUTWIN_NAMESPACE": "",
           "GPUTWIN_TRACE_DIR": str(SAMPLES.resolve())}  # fmt: skip
    running = Operator(env, work, work, free_port())
    running.env["GPUTWIN_HEALTH_PORT"] = str(running.port)
    running.start()
    yield running
    running.stop()


@pytest.fixture
def namespace(request: pytest.FixtureRequest, kubectl: Any) -> Iterator[str]:
    """A fresh namespace for one test's GPUJobs, deleted (with them) afterwards."""
    test = re.sub("[^a-z0-9]+", "-", request.node.name.removeprefix("test_").lower())
    name = f"e2e-{test[:48].strip('-')}-{uuid.uuid4().hex[:5]}"  # unique across parameters and runs
    kubectl.run("create", "namespace", name)
    yield name
    kubectl.run("delete", "gpujobs", "--all", "-n", name, "--wait=false", check=False)
    kubectl.run("delete", "namespace", name, "--wait=false", check=False)


# --- install manifests and the API server's own validation ------------------------------------------


def test_install_manifests_apply_and_grant_least_privilege(
    installed: None, crds: None, kubectl: Any, api: Api
) -> None:
    """kubectl apply -k and -f both accept manifests/operator; the ServiceAccount gets only what it needs."""
    kubectl.run("apply", "-k", str(INSTALL), "--dry-run=server")
    kubectl.run("apply", "-f", str(INSTALL), "--dry-run=server")  # the Kustomization file is not *.yaml
    deployment = kubectl.json("get", "deployment", SA_NAME, "-n", SA_NAMESPACE)
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["serviceAccountName"] == SA_NAME and deployment["spec"]["strategy"]["type"] == "Recreate"
    assert {e["name"]: e.get("value") for e in container["env"]}["GPUTWIN_BACKEND"] == "sim"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"

    assert "yes" in kubectl.run("auth", "can-i", "patch", f"gpujobs.{GROUP}", "--subresource=status",
                                "-A", f"--as={SA_USER}").stdout  # fmt: skip
    can = api.allowed  # SubjectAccessReviews: the same answer as kubectl auth can-i, 50 times faster
    for plural in ("switchtopologies", "gpupartitions", "schedulingpolicies", "gpujobs", "tracereplays"):
        for verb in ("get", "list", "watch", "patch"):
            assert can(verb, GROUP, plural), f"{verb} {plural}"
        assert can("patch", GROUP, plural, "status"), f"patch {plural}/status"
        for verb in ("create", "delete", "update", "deletecollection"):
            assert not can(verb, GROUP, plural), f"{verb} {plural} must not be granted"
        assert not can("update", GROUP, plural, "status"), f"update {plural}/status must not be granted"
    assert can("create", "", "events", namespace="default") and can(
        "create", "", "events", namespace="team-a"
    )
    # TraceReplays read a trace from a ConfigMap (spec.trace.configMap): get, nothing more.
    for ns in ("default", "team-a"):
        assert can("get", "", "configmaps", namespace=ns), f"get configmaps in {ns}"
    for verb in ("list", "watch", "create", "update", "patch", "delete"):
        assert not can(verb, "", "configmaps", namespace="default"), f"{verb} configmaps must not be granted"
    # The Kubernetes backend: its pods (create from templates, delete on preemption, watch), their
    # Binding subresource, and nodes read-only.
    for ns in ("default", "team-a"):
        for verb in ("get", "list", "watch", "create", "delete"):
            assert can(verb, "", "pods", namespace=ns), f"{verb} pods in {ns}"
        assert can("create", "", "pods", "binding", namespace=ns), f"create pods/binding in {ns}"
    for verb in ("get", "list", "watch"):
        assert can(verb, "", "nodes"), f"{verb} nodes"
    for verb, group, resource in (
        ("get", "", "secrets"),
        ("update", "", "pods"),
        ("patch", "", "pods"),
        ("patch", "", "nodes"),
        ("update", "", "nodes"),
        ("delete", "", "nodes"),
        ("list", "apiextensions.k8s.io", "customresourcedefinitions"),
        ("list", "", "namespaces"),
        ("delete", "", "events"),
        ("list", "kopf.dev", "clusterkopfpeerings"),
    ):
        assert not can(verb, group, resource), f"{verb} {resource} must not be granted"


BAD_OBJECTS = [
    (gpujob("bad-gpus", "default", "train", 0, 1), "spec.gpus"),
    ({**gpujob("no-task", "default", "train", 1), "spec": {"gpus": 1}}, "spec.taskType"),
    (
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "SchedulingPolicy",
            "metadata": {"name": "bad-queue"},
            "spec": {"queue": {"policy": "magic"}},
        },
        "spec.queue.policy",
    ),
]


@pytest.mark.parametrize(
    ("obj", "field_path"), BAD_OBJECTS, ids=[o["metadata"]["name"] for o, _ in BAD_OBJECTS]
)
def test_api_server_rejects_bad_objects_naming_the_field(
    crds: None, kubectl: Any, api: Api, obj: Obj, field_path: str
) -> None:
    """kubectl apply of a bad object fails; the 422 (Invalid) names the field, for kubectl and clients."""
    done = kubectl.run("apply", "-f", "-", input=dump(obj), check=False)
    assert done.returncode != 0 and "is invalid" in done.stderr and field_path in done.stderr, done.stderr
    namespace = obj["metadata"].get("namespace")
    plural = "gpujobs" if obj["kind"] == "GPUJob" else "schedulingpolicies"
    with pytest.raises(ApiException) as caught:
        if namespace:
            api.objects.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, obj)
        else:
            api.objects.create_cluster_custom_object(GROUP, VERSION, plural, obj)
    assert caught.value.status == 422
    causes = json.loads(caught.value.body or "{}")["details"]["causes"]
    assert field_path in {c.get("field") for c in causes}, causes


# --- the operator on the samples --------------------------------------------------------------------


def test_samples_reach_ready_with_counts(operator: Operator, api: Api) -> None:
    """Topology, partitions and policies of the samples: Ready, with node/GPU/switch counts."""
    topology = wait_for(
        "SwitchTopology two-leaf Ready", lambda: _ready_status(api, "switchtopologies", "two-leaf"), 30
    )
    assert (topology["nodes"], topology["gpus"], topology["switches"]) == (8, 64, 3)
    train = wait_for("GPUPartition train Ready", lambda: _ready_status(api, "gpupartitions", "train"), 30)
    infer = wait_for("GPUPartition infer Ready", lambda: _ready_status(api, "gpupartitions", "infer"), 30)
    assert (train["nodes"], train["totalGPUs"], infer["nodes"], infer["totalGPUs"]) == (6, 48, 2, 16)
    assert _condition(train, "Ready")["message"] == "scheduling"
    for name, partition in (("sjf-topology", "train"), ("fifo-consolidate", "infer")):
        policy = wait_for(
            f"SchedulingPolicy {name} deployed",
            lambda n=name: _ready_status(api, "schedulingpolicies", n, "lastDeploy"),
            30,
        )
        assert policy["partitions"] == [partition] and policy["backends"] == ["sim"]
        assert policy["lastDeploy"]["backend"] == "sim" and policy["lastDeploy"]["result"] == "Succeeded"
    unused = wait_for(
        "an unused policy Ready", lambda: _ready_status(api, "schedulingpolicies", "ex-las-first-fit"), 30
    )
    assert unused.get("partitions", []) == []
    assert "no GPUPartition uses it" in _condition(unused, "Ready")["message"]
    assert http_status(operator.url("/healthz")) == 200 and http_status(operator.url("/readyz")) == 200


def _ready_status(api: Api, plural: str, name: str, needs: str | None = None) -> Obj | None:
    status = api.status(plural, name)
    condition = ready(status)
    if condition is None or condition["status"] != "True" or (needs and needs not in status):
        return None
    return status


def test_sample_jobs_run_for_their_duration_and_succeed(operator: Operator, api: Api) -> None:
    """The sample GPUJobs run through the sim backend in wall time: start, run, succeed, with events."""
    final = wait_for(
        "the sample GPUJobs to succeed",
        lambda: _all_in(api, "default", {"Succeeded"}),
        40,
        on_timeout=operator.tail,
    )
    assert set(final) == {"resnet50-4gpu", "llm-finetune", "bert-serving"}
    for name, seconds in (("resnet50-4gpu", 3), ("llm-finetune", 4), ("bert-serving", 2)):
        status = api.status("gpujobs", name, "default")
        ran = _epoch(status["endTime"]) - _epoch(status["startTime"])
        expected = seconds * (1 + status["overhead"])
        # The run ends at its due time; the pass that records it follows within a moment.
        assert expected - 0.01 <= ran <= expected + 3, (name, ran, expected)
        assert status["partition"] == ("infer" if name == "bert-serving" else "train")
        assert "allocation" not in status and status["nodes"]
    events = settled_events(api, "default", set(final))
    for name in final:
        assert events[(name, "Scheduled")] == 1 and events[(name, "Completed")] == 1, events


def settled_events(api: Api, namespace: str, names: set[str]) -> Counter[tuple[str, str]]:
    """The events once every job's Completed event is in.

    Statuses are written before events are posted (so a crash can never repeat an event), hence a
    job can read Succeeded a moment before its Completed event exists: poll, bounded, for that.
    """

    def complete() -> Counter[tuple[str, str]] | None:
        events: Counter[tuple[str, str]] = Counter(api.events(namespace))
        return events if all(events[(n, "Completed")] for n in names) else None

    return wait_for("every job's Completed event", complete, 10, interval=0.1)


def _all_in(api: Api, namespace: str, phases: set[str]) -> dict[str, str] | None:
    found = api.phases(namespace)
    return found if found and all(p in phases for p in found.values()) else None


def _epoch(timestamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(timestamp).timestamp()


def test_trace_replay_reports_candidates_and_winner(operator: Operator, api: Api) -> None:
    """The sample TraceReplay (demo trace, absolute path) is simulated off the loop: metrics and winner."""

    def done() -> Obj | None:
        status = api.status("tracereplays", "demo-what-if", "default")
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    status = wait_for("TraceReplay demo-what-if", done, 60, on_timeout=operator.tail)
    assert status["phase"] == "Succeeded", status
    names = [c["name"] for c in status["candidates"]]
    assert len(names) == 4 and "current" in names and status["winner"] == names[0]
    assert all(c["metrics"]["jobs"] > 0 and c["metrics"]["avgJct"] >= 0 for c in status["candidates"]), status
    complete = next(c for c in status["conditions"] if c["type"] == "Complete")
    assert complete["status"] == "True" and status["winner"] in complete["message"]
    assert ("demo-what-if", "ReplaySucceeded") in api.events("default", "TraceReplay")


def test_edited_replay_runs_again_while_jobs_keep_being_scheduled(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    """A new objective replays the trace again, off the event loop: a job submitted meanwhile starts
    before the (seconds-long) replay ends, and /healthz answers throughout."""
    kubectl.run("patch", "tracereplay", "demo-what-if", "-n", "default", "--type=merge",
                "-p", json.dumps({"spec": {"objective": "avg_queue"}}))  # fmt: skip
    generation = api.get("tracereplays", "demo-what-if", "default")["metadata"]["generation"]
    kubectl.run("apply", "-f", "-", input=dump(gpujob("during-replay", namespace, "infer", 1, 1)))
    seen: dict[str, float] = {}

    def replayed() -> bool:
        now = time.monotonic()
        assert http_status(operator.url("/healthz")) == 200
        if api.phases(namespace).get("during-replay") in ("Running", "Succeeded"):
            seen.setdefault("job started", now)
        status = api.status("tracereplays", "demo-what-if", "default")
        if status.get("observedGeneration") == generation and status.get("phase") == "Succeeded":
            seen.setdefault("replay done", now)
        return len(seen) == 2

    wait_for("the job and the new replay", replayed, 60, on_timeout=operator.tail)
    # Both may first show in the same poll (one poll takes a few API calls; on a loaded machine
    # that is as long as the replay): the job must not have started after the replay ended.
    assert seen["job started"] <= seen["replay done"], seen
    complete = _condition(api.status("tracereplays", "demo-what-if", "default"), "Complete")
    assert "wins on avg_queue" in complete["message"]


def test_trace_replay_reads_its_trace_from_a_configmap(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    """spec.trace.configMap: the operator (as its ServiceAccount: get on configmaps) reads the trace
    from the ConfigMap and replays it; a key the ConfigMap lacks fails the replay, saying so."""
    trace = ROOT / "src" / "gputwin" / "data" / "demo-trace.csv"
    head = "".join(trace.read_text().splitlines(keepends=True)[:200])
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"jobs.csv": head},
                 "metadata": {"name": "demo-trace", "namespace": namespace}}  # fmt: skip

    def replay(name: str, key: str) -> Obj:
        return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TraceReplay",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"trace": {"configMap": {"name": "demo-trace", "key": key}, "format": "auto"},
                         "topology": "two-leaf", "objective": "avg_jct",
                         "candidates": [{"queue": "sjf", "placement": "consolidate",
                                         "backfill": True}]}}  # fmt: skip

    objects = dump(configmap, replay("from-cm", "jobs.csv"), replay("no-key", "x.csv"))
    kubectl.run("apply", "-f", "-", input=objects)

    def done(name: str) -> Obj | None:
        status = api.status("tracereplays", name, namespace)
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    status = wait_for("TraceReplay from-cm", lambda: done("from-cm"), 60, on_timeout=operator.tail)
    assert status["phase"] == "Succeeded", status
    assert status["candidates"][0]["name"] == status["winner"]
    assert {c["name"] for c in status["candidates"]} == {"current", "sjf/consolidate/as-requested+backfill"}
    assert all(c["metrics"]["jobs"] == 199 for c in status["candidates"]), status
    failed = wait_for("TraceReplay no-key", lambda: done("no-key"), 30, on_timeout=operator.tail)
    complete = _condition(failed, "Complete")
    assert failed["phase"] == "Failed" and complete["reason"] == "TraceNotFound", failed
    assert f"ConfigMap {namespace}/demo-trace has no key x.csv" in complete["message"], complete
    events = api.events(namespace, "TraceReplay")
    assert ("from-cm", "ReplaySucceeded") in events and ("no-key", "ReplayFailed") in events


# --- GPUJobs through the operator -------------------------------------------------------------------


def test_jobs_queue_run_and_succeed(operator: Operator, api: Api, kubectl: Any, namespace: str) -> None:
    """Three 8-GPU inference jobs on two 8-GPU nodes: the third is Queued, then Running, then Succeeded."""
    jobs = [gpujob(f"infer-{i}", namespace, "infer", 8, 2) for i in range(3)]
    kubectl.run("apply", "-f", "-", input=dump(*jobs))
    seen: dict[str, list[str]] = {j["metadata"]["name"]: [] for j in jobs}

    def finished() -> bool:
        for name, phase in api.phases(namespace).items():
            if phase and (not seen[name] or seen[name][-1] != phase):
                seen[name].append(phase)
        return all(s and s[-1] == "Succeeded" for s in seen.values())

    wait_for("the inference jobs to finish", finished, 40, interval=0.1, on_timeout=operator.tail)
    assert seen["infer-2"] == ["Queued", "Running", "Succeeded"], seen
    first, second, third = (api.status("gpujobs", f"infer-{i}", namespace) for i in range(3))
    assert {first["nodes"], second["nodes"]} == {"gpu07", "gpu08"}
    assert _epoch(third["startTime"]) >= min(_epoch(first["endTime"]), _epoch(second["endTime"])) - 0.01


def test_deleting_a_running_job_frees_its_gpus_at_once(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    """No finalizer, yet the DELETED watch event wakes the operator: the queued job takes the GPUs
    within a moment, not at the next 10 s resync."""
    long = [gpujob(f"long-{i}", namespace, "infer", 8, 60) for i in range(2)]
    kubectl.run("apply", "-f", "-", input=dump(*long, gpujob("waiting", namespace, "infer", 8, 1)))
    wait_for(
        "two long jobs Running and one Queued",
        lambda: api.phases(namespace) == {"long-0": "Running", "long-1": "Running", "waiting": "Queued"},
        20,
        on_timeout=operator.tail,
    )
    node = api.status("gpujobs", "long-0", namespace)["nodes"]
    kubectl.run("delete", "gpujob", "long-0", "-n", namespace, "--wait=false")
    deleted = time.monotonic()
    wait_for("the waiting job to start", lambda: api.phases(namespace).get("waiting") != "Queued", 5)
    assert time.monotonic() - deleted < 3
    assert api.status("gpujobs", "waiting", namespace)["nodes"] == node
    wait_for("the waiting job to succeed", lambda: api.phases(namespace).get("waiting") == "Succeeded", 10)


def test_unserved_task_type_is_rejected_with_a_reason(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    """A GPUJob for a task type no partition serves is Rejected, and says why (condition and event)."""
    kubectl.run("apply", "-f", "-", input=dump(gpujob("render-job", namespace, "render", 2, 2)))
    wait_for(
        "the render job to be rejected", lambda: api.phases(namespace).get("render-job") == "Rejected", 20
    )
    condition = next(
        c for c in api.status("gpujobs", "render-job", namespace)["conditions"] if c["type"] == "Scheduled"
    )
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable"
    assert "render" in condition["message"] and "no partition serves" in condition["message"]
    assert ("render-job", "Rejected") in api.events(namespace)


def test_broken_partition_reports_what_to_fix(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    """A partition naming a missing policy: Ready=False, naming the field and the fix; the rest runs on."""
    broken = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GPUPartition",
        "metadata": {"name": "e2e-broken"},
        "spec": {
            "topology": "two-leaf",
            "taskTypes": ["debug"],
            "policy": "no-such-policy",
            "nodeSelector": {"matchLabels": {"gputwin.io/leaf": "leaf9"}},
        },
    }
    kubectl.run("apply", "-f", "-", input=dump(broken))
    try:

        def reported() -> Obj | None:
            condition = ready(api.status("gpupartitions", "e2e-broken"))
            return condition if condition and condition["status"] == "False" else None

        condition = wait_for("the broken partition's Ready=False", reported, 20, on_timeout=operator.tail)
        assert condition["reason"] == "InvalidReference"
        assert condition["message"].startswith("spec.policy: unknown SchedulingPolicy 'no-such-policy'")
        assert "declared: " in condition["message"] and "'sjf-topology'" in condition["message"]
        # The last valid cluster keeps scheduling meanwhile.
        kubectl.run("apply", "-f", "-", input=dump(gpujob("while-broken", namespace, "train", 8, 1)))
        wait_for(
            "a job to run while a partition is broken",
            lambda: api.phases(namespace).get("while-broken") == "Succeeded",
            20,
            on_timeout=operator.tail,
        )
        assert _condition(api.status("gpupartitions", "train"), "Ready")["status"] == "True"
    finally:
        kubectl.run("delete", "gpupartition", "e2e-broken", "--ignore-not-found")


# --- restarts ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_restart_mid_stream_loses_and_duplicates_nothing(
    operator: Operator, api: Api, kubectl: Any, namespace: str, how: str
) -> None:
    """Stop the operator while jobs run and queue; a new one finishes them all.

    `sigterm`: a graceful stop (a rollout), restarted through `gputwin operator`; `sigkill`: a
    crash, restarted through `kopf run`. Nothing is lost (every job Succeeds and ran its full
    length), nothing runs twice (one Scheduled and one Completed event per job, no eviction) and no
    node ever holds more GPUs than it has, across the restart.
    """
    jobs = [gpujob(f"train-{i}", namespace, "train", 16, 3) for i in range(6)]
    jobs += [gpujob(f"infer-{i}", namespace, "infer", 8, 3) for i in range(4)]
    names = {j["metadata"]["name"] for j in jobs}
    peak: dict[str, int] = {}  # most GPUs seen in use per node

    def check_nodes() -> None:
        used = node_usage(api.jobs())
        assert all(gpus <= GPUS_PER_NODE for gpus in used.values()), f"over-allocated: {used}"
        for node, gpus in used.items():
            peak[node] = max(peak.get(node, 0), gpus)

    kubectl.run("apply", "-f", "-", input=dump(*jobs))

    def mid_stream() -> Counter[str] | None:
        check_nodes()
        phases = Counter(api.phases(namespace).values())
        every_job_seen = phases.total() == len(names) and not phases[""]
        return phases if every_job_seen and phases["Running"] and phases["Queued"] else None

    before = wait_for("some jobs Running and some Queued", mid_stream, 20, interval=0.1)
    if how == "sigterm":
        assert operator.stop(signal.SIGTERM) == 0, operator.tail()
    else:
        assert operator.stop(signal.SIGKILL) == -signal.SIGKILL
    stopped = Counter(api.phases(namespace).values())
    assert stopped["Running"] and stopped["Queued"], stopped  # really stopped mid-stream

    operator.start(gputwin_command() + ["operator", "--all-namespaces"] if how == "sigterm" else KOPF_RUN)

    def all_done() -> dict[str, str] | None:
        check_nodes()
        return _all_in(api, namespace, set(TERMINAL))

    final = wait_for(
        "every job to end after the restart", all_done, 60, interval=0.1, on_timeout=operator.tail
    )
    assert final == dict.fromkeys(names, "Succeeded"), final
    for job in api.jobs(namespace):  # adopted runs kept their start: none ended early
        status = job["status"]
        ran = _epoch(status["endTime"]) - _epoch(status["startTime"])
        assert ran >= 3 * (1 + status["overhead"]) - 0.01, (job["metadata"]["name"], ran)
    events = settled_events(api, namespace, names)
    for name in names:
        assert events[(name, "Scheduled")] == 1, (name, events)
        assert events[(name, "Completed")] == 1, (name, events)
    assert not [e for e in events if e[1] in ("Evicted", "FailedStart", "Preempted")], events
    assert max(peak.values()) == GPUS_PER_NODE and before["Running"] > 0  # nodes were full, never over


def test_emulator_and_operator_reach_the_same_statuses(
    operator: Operator, api: Api, kubectl: Any, namespace: str, tmp_path: Path
) -> None:
    """The same manifests in the embedded emulator (virtual time) and through the operator (wall time).

    The jobs are applied while the operator is stopped, so both worlds see them in one pass, as
    `gputwin apply` does; the set is chosen so that every decision is clear-cut (queueing and
    topology waits of a few seconds, no ties decided by sub-second timing).
    """
    specs = [
        ("a-train32", "train", 32, 3),
        ("b-train16", "train", 16, 2),
        ("c-train8", "train", 8, 2),
        ("d-infer4", "infer", 4, 2),
        ("e-infer8", "infer", 8, 2),
        ("f-dev8", "dev", 8, 3),
        ("g-render", "render", 2, 2),
    ]
    manifest = tmp_path / "jobs.yaml"
    manifest.write_text(dump(*(gpujob(n, namespace, t, g, s) for n, t, g, s in specs)))

    emulated = _emulate(
        tmp_path / "state", [SAMPLES / "two-leaf.yaml", SAMPLES / "policies.yaml", manifest], namespace
    )

    assert operator.stop() == 0, operator.tail()
    kubectl.run("apply", "-f", str(manifest))
    operator.start()
    wait_for(
        "the operator to finish the jobs",
        lambda: _all_in(api, namespace, set(TERMINAL)),
        60,
        on_timeout=operator.tail,
    )
    wait_for(
        "partition counts to settle",
        lambda: all(
            api.status("gpupartitions", p)["freeGPUs"] == api.status("gpupartitions", p)["totalGPUs"]
            for p in ("train", "infer")
        ),
        10,
    )
    live = {
        "GPUJob": {j["metadata"]["name"]: _essence("GPUJob", j) for j in api.jobs(namespace)},
        **{
            kind: {name: _essence(kind, api.get(plural, name)) for name in emulated[kind]}
            for kind, plural in (
                ("GPUPartition", "gpupartitions"),
                ("SwitchTopology", "switchtopologies"),
                ("SchedulingPolicy", "schedulingpolicies"),
            )
        },
    }
    assert live == emulated
    assert emulated["GPUJob"]["a-train32"]["nodes"] == "gpu[01-04]"  # the test means what it says
    assert emulated["GPUJob"]["g-render"]["phase"] == "Rejected"


def _emulate(state: Path, files: list[Path], namespace: str) -> dict[str, dict[str, Obj]]:
    """`gputwin apply`, `gputwin run`, `gputwin get -o json` on a fresh state dir: kind -> name -> essence."""

    def gputwin(*args: str) -> str:
        done = subprocess.run(
            [*gputwin_command(), *args, "--state", str(state)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    gputwin("apply", *(a for f in files for a in ("-f", str(f))))
    gputwin("run")
    out: dict[str, dict[str, Obj]] = {}
    for kind, args in (
        ("GPUJob", ("gpujobs", "-n", namespace)),
        ("GPUPartition", ("gpupartitions",)),
        ("SwitchTopology", ("switchtopologies",)),
        ("SchedulingPolicy", ("schedulingpolicies",)),
    ):
        items = json.loads(gputwin("get", *args, "-o", "json"))["items"]
        out[kind] = {o["metadata"]["name"]: _essence(kind, o) for o in items}
    return out


ESSENCE = {
    "GPUJob": ("phase", "partition", "nodes", "gpus", "switches", "overhead", "preemptions"),
    "GPUPartition": ("nodes", "totalGPUs", "freeGPUs", "queued", "running"),
    "SwitchTopology": ("nodes", "gpus", "switches"),
    "SchedulingPolicy": ("partitions", "backends"),
}


def _essence(kind: str, obj: Obj) -> Obj:
    """What must agree between the worlds: no times, no messages with times in them."""
    status = obj.get("status") or {}
    out = {k: status.get(k) for k in ESSENCE[kind]}
    out["conditions"] = sorted((c["type"], c["status"], c["reason"]) for c in status.get("conditions") or [])
    return out


# --- pieces that need no cluster ---------------------------------------------------------------------


class _FlakyStatusApi:
    """Answers 409 Conflict `failures` times, then accepts the patch."""

    def __init__(self, failures: int, status: int = 409) -> None:
        self.failures, self.status, self.calls = failures, status, 0

    def patch_namespaced_custom_object_status(self, *args: Any, **kwargs: Any) -> Obj:
        self.calls += 1
        if self.calls <= self.failures:
            raise ApiException(status=self.status, reason="Conflict")
        return {}


@pytest.mark.parametrize(("failures", "succeeds"), [(0, True), (4, True), (5, False)])
def test_kube_store_retries_conflicts_a_bounded_number_of_times(failures: int, succeeds: bool) -> None:
    slept: list[float] = []
    store = KubeStore(client.ApiClient(client.Configuration()), retry=Retry(attempts=5), sleep=slept.append)
    flaky = _FlakyStatusApi(failures)
    setattr(store, "_objects", flaky)  # noqa: B010  (the API behind the store, replaced)
    if succeeds:
        store.patch_status("GPUJob", "default", "j", {"phase": "Queued"})
    else:
        with pytest.raises(ApiException):
            store.patch_status("GPUJob", "default", "j", {"phase": "Queued"})
    assert flaky.calls == min(failures + 1, 5)
    assert slept == [0.05, 0.1, 0.2, 0.4][: flaky.calls - 1]


def test_kube_store_tells_a_missing_object_from_a_missing_crd() -> None:
    store = KubeStore(client.ApiClient(client.Configuration()), sleep=lambda _: None)
    missing = {
        "kind": "Status",
        "reason": "NotFound",
        "message": 'gpujobs.gputwin.io "j" not found',
        "code": 404,
    }
    setattr(
        store, "_objects", _Raising(ApiException(status=404, reason="Not Found", body=json.dumps(missing)))
    )
    with pytest.raises(ObjectNotFound):
        store.patch_status("GPUJob", "default", "j", {})
    assert store.get("GPUJob", "default", "j") is None
    setattr(
        store, "_objects", _Raising(ApiException(status=404, reason="Not Found", body="404 page not found\n"))
    )
    with pytest.raises(MissingCRD, match="install the CRDs"):
        store.list("GPUJob")


class _Raising:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise self.exc

        return fail


@pytest.mark.parametrize("start", ["gputwin operator", "kopf run"])
def test_kubernetes_backend_without_credentials_stops_the_operator_at_once(start: str, tmp_path: Path) -> None:
    """GPUTWIN_BACKEND=kubernetes with no kubeconfig and no service account: exit 1 saying so, no retry loop."""
    if start == "gputwin operator":
        command, env = [*gputwin_command(), "operator", "--backend", "kubernetes"], dict(os.environ)
    else:
        command, env = KOPF_RUN, {**os.environ, "GPUTWIN_BACKEND": "kubernetes"}
    env["KUBECONFIG"] = str(tmp_path / "none")  # it must fail before it looks for a cluster
    env.pop("KUBERNETES_SERVICE_HOST", None)
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=60, check=False, env=env, cwd=tmp_path
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "GPUTWIN_BACKEND=kubernetes: no cluster credentials" in done.stderr
