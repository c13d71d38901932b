"""Pods, Bindings and Nodes over the Kubernetes API: the raw calls of the Kubernetes backend.

`PodApi` is what `gputwin.operator.kube_backend.KubernetesBackend` talks through: create a pod
(a 409 on its deterministic name returns the pod that exists, so a retry after a crash adopts it),
bind it to a node with the Binding subresource, delete it, list pods and nodes, read a GPUJob.
`BindPool` binds many pods from a few threads without making its caller wait, each thread with
its OWN `ApiClient` (the python client is not thread-safe per client), for the plain-Pod path
where throughput matters; its `EventPoster` posts the pods' events afterwards, from one more
thread, only while no bind waits, and drops them (counted) when too many queue up.

Lists are read as raw JSON (`_preload_content=False`): the client's model deserialization costs
milliseconds per pod, which at 10,000 pods is most of a reconcile pass. For the same reason and
for a known client bug the Binding reply is not deserialized either: `create_namespaced_pod_binding`
fails on the server's reply with "Invalid value for `target`, must not be `None`"
(kubernetes-client/python #547, #825) although the binding was made.

Every call is retried on 429/5xx (and 409 where a retry can succeed) with the bounded backoff of
`gputwin.adapters.kube.store.Retry`; 404 on a delete is success (already gone).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gputwin.api.bodies import Body, Obj, Pod
from gputwin.api.crdgen import NAMES
from gputwin.api.meta import GROUP, VERSION

from .store import TIMEOUT, Retry, api_client

T = TypeVar("T")
PAGE = 2000  # pods per list page: fewer round trips, bounded memory
TRANSIENT = frozenset({429, 500, 502, 503, 504})

log = logging.getLogger(__name__)


class BindConflict(RuntimeError):
    """The pod is already bound to another node than the one asked for."""


@dataclass(frozen=True, slots=True)
class BindResult:
    """How one bind of a batch went: `error` is None when the pod is bound to `node`."""

    namespace: str
    name: str
    node: str
    error: str | None = None
    at: float = 0.0  # time.monotonic() when the call returned (for the backend's timing trace)


def _retried(request: Callable[[], T], retry: Retry, sleep: Callable[[float], None] = time.sleep) -> T:
    delays = retry.delays()
    while True:
        try:
            return request()
        except ApiException as exc:
            delay = next(delays, None) if exc.status in TRANSIENT else None
            if delay is None:
                raise
            sleep(delay)


def _raw(response: Any) -> Obj:
    data = _drained(response)
    return dict(json.loads(data.decode() if isinstance(data, bytes) else data))


def _drained(response: Any) -> Any:
    """Read an unparsed reply and give its connection back to the pool. Without `release_conn`
    urllib3 keeps the connection of a `_preload_content=False` reply, and the next request opens a
    new TLS connection: that handshake was 60% of the time of a bind."""
    data = response.data
    response.release_conn()
    return data


def reason_of(exc: ApiException) -> str:
    """The API server's message for a failed call, in one line."""
    try:
        message = json.loads(exc.body or "").get("message")
    except (ValueError, AttributeError):
        message = None
    return f"HTTP {exc.status}: {message or exc.reason}"


class PodApi:
    """The backend's calls on pods, bindings, nodes and GPUJobs, on one `ApiClient` (one thread)."""

    def __init__(self, api: client.ApiClient, retry: Retry = Retry()) -> None:
        self.api, self.retry = api, retry
        self.core = client.CoreV1Api(api)
        self.objects = client.CustomObjectsApi(api)
        self.requests = 0  # API requests made (a benchmark reads it)

    @classmethod
    def connect(cls) -> PodApi:
        return cls(api_client())

    def _call(self, request: Callable[[], T]) -> T:
        self.requests += 1
        return _retried(request, self.retry)

    # --- pods ---------------------------------------------------------------------------------

    def create(self, pod: Obj) -> tuple[Obj, bool]:
        """Create `pod`; (the pod, True) — or (the pod already there under its name, False)."""
        namespace, name = Body(pod).key()
        try:
            # A dict body is sent as is (the client serializes dicts): no model round trip.
            made = self._call(lambda: self.core.create_namespaced_pod(
                namespace, cast(Any, pod), _preload_content=False, _request_timeout=TIMEOUT))  # fmt: skip
            return _raw(made), True
        except ApiException as exc:
            if exc.status != 409:
                raise
        got = self._call(lambda: self.core.read_namespaced_pod(
            name, namespace, _preload_content=False, _request_timeout=TIMEOUT))  # fmt: skip
        return _raw(got), False

    def bind(self, namespace: str, name: str, node: str) -> None:
        """Bind the pod to `node`; already bound there is success, elsewhere `BindConflict`."""
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        try:
            _drained(self._call(lambda: self.core.create_namespaced_pod_binding(
                name, namespace, body, _preload_content=False, _request_timeout=TIMEOUT)))  # fmt: skip
        except ApiException as exc:
            if exc.status != 409:
                raise
            got = _raw(self._call(lambda: self.core.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=TIMEOUT)))  # fmt: skip
            bound = Pod(got).node_name or None
            if bound != node:
                raise BindConflict(f"pod {namespace}/{name} is already bound to {bound}") from None

    def delete(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        """Delete the pod (gone already is fine); `grace_seconds` None: the pod's own grace period."""
        options: Obj = {"_request_timeout": TIMEOUT, "_preload_content": False}
        if grace_seconds is not None:
            options["grace_period_seconds"] = grace_seconds
        try:
            _drained(self._call(lambda: self.core.delete_namespaced_pod(name, namespace, **options)))
        except ApiException as exc:
            if exc.status != 404:
                raise

    def pod(self, namespace: str, name: str) -> Obj | None:
        """One pod, None if it does not exist."""
        try:
            return _raw(self._call(lambda: self.core.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=TIMEOUT)))  # fmt: skip
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def pods(
        self, field_selector: str = "", label_selector: str = "", namespace: str | None = None
    ) -> list[Obj]:
        """Every pod (of `namespace`, else of all) matching the selectors, as plain dicts."""
        found: list[Obj] = []
        token: str | None = None
        while True:
            options: Obj = {"limit": PAGE, "_preload_content": False, "_request_timeout": TIMEOUT}
            if field_selector:
                options["field_selector"] = field_selector
            if label_selector:
                options["label_selector"] = label_selector
            if token:
                options["_continue"] = token
            if namespace:
                page = _raw(self._call(lambda: self.core.list_namespaced_pod(namespace, **options)))
            else:
                page = _raw(self._call(lambda: self.core.list_pod_for_all_namespaces(**options)))
            found.extend(page.get("items") or [])
            token = Body(page).metadata.get("continue") or None
            if token is None:
                return found

    def nodes(self) -> list[Obj]:
        got = self._call(lambda: self.core.list_node(_preload_content=False, _request_timeout=TIMEOUT))
        return list(_raw(got).get("items") or [])

    def gpujob(self, namespace: str, name: str) -> Obj | None:
        """The GPUJob (its pod template, duration, uid), None if it is gone."""
        try:
            got = self._call(lambda: self.objects.get_namespaced_custom_object(
                GROUP, VERSION, namespace, NAMES["GPUJob"].plural, name, _request_timeout=TIMEOUT))  # fmt: skip
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return cast(Obj, got)

    def event(self, pod: Obj, reason: str, message: str, type: str = "Normal") -> None:
        """A core/v1 Event about a pod, as kube-scheduler posts them (best effort: never raises)."""
        about = Body(pod)
        namespace, name = about.key()
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body: Obj = {
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name,
                               "namespace": namespace, "uid": about.metadata.get("uid")},
            "reason": reason, "message": message[:1024], "type": type, "count": 1,
            "firstTimestamp": now, "lastTimestamp": now, "source": {"component": "gputwin"},
            "reportingComponent": "gputwin", "reportingInstance": "gputwin",
        }  # fmt: skip
        try:
            _drained(self._call(lambda: self.core.create_namespaced_event(
                namespace, cast(Any, body), _preload_content=False, _request_timeout=TIMEOUT)))  # fmt: skip
        except (ApiException, OSError) as exc:
            log.warning(
                "could not post event %s on pod %s/%s: %s", reason, namespace, name, exc
            )


EventNote = tuple[Obj, str, str, str]  # the pod, reason, message, type: what `PodApi.event` posts
EVENT_QUEUE = 1000  # kube-scheduler's event broadcaster queues at most 1,000 events and drops the rest
IDLE_POLL = 0.05  # seconds between looks at the bind pool while binds wait


class EventPoster:
    """Posts pod events from ONE thread of its own, in order, best effort.

    An event is news about a bind, not the bind: under a burst the binds must not wait behind
    their events for the API server (on the benchmark's burst the events slowed the first wave of
    binds by a third). So events are posted only while `idle()` says no bind is waiting, and, as
    kube-scheduler's event broadcaster does, at most `limit` events wait; one more is dropped
    (`dropped` counts them, `on_drop` is told).
    """

    def __init__(self, make_api: Callable[[], PodApi], limit: int = EVENT_QUEUE,
                 on_drop: Callable[[], None] | None = None, idle: Callable[[], bool] = lambda: True) -> None:  # fmt: skip
        self._make, self._on_drop, self._idle = make_api, on_drop, idle
        self._closing = threading.Event()
        self._queue: queue.Queue[EventNote | None] = queue.Queue(limit)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.dropped = self.posted = 0

    @property
    def waiting(self) -> int:
        """Events queued, not yet taken by the thread."""
        return self._queue.qsize()

    def post(self, note: EventNote) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="gputwin-events", daemon=True)
                self._thread.start()
        try:
            self._queue.put_nowait(note)
        except queue.Full:
            self.dropped += 1
            if self._on_drop is not None:
                self._on_drop()

    def _run(self) -> None:
        api = self._make()
        while (note := self._queue.get()) is not None:
            while not self._idle() and not self._closing.wait(IDLE_POLL):
                pass  # binds first
            api.event(*note)  # never raises: a failed event is logged
            self.posted += 1

    def close(self) -> None:
        """Drop what still waits and end the thread (an event in flight is finished)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is None:
            return
        self._closing.set()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._queue.put(None)
        thread.join(timeout=10)


class BindPool:
    """Binds pods from `threads` threads, one `PodApi` (and ApiClient) per thread, without making
    the caller wait (kube-scheduler's binding cycle: the scheduling pass goes on while the binds
    are made); the events about the binds go to an `EventPoster`.

    The binds wait in one `queue.SimpleQueue` that the threads (started as binds come) take from:
    handing a pass's binds over takes one lock per batch, not a `ThreadPoolExecutor.submit` per pod
    (a profile caught one hand-over of a burst's first wave waiting 0.47 s on the executor's locks;
    end to end the benchmark's figures did not move either way). `close` drops the binds not started
    and counts them done, and a submit after it is dropped instead of raising."""

    def __init__(self, make_api: Callable[[], PodApi], threads: int = 4,
                 on_event_drop: Callable[[], None] | None = None) -> None:  # fmt: skip
        self._make = make_api
        self._size = max(threads, 1)
        self._local = threading.local()
        self._apis: list[PodApi] = []
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[tuple[str, str, str], Callable[[BindResult], None]] | None] = (
            queue.SimpleQueue()
        )
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._pending = 0  # binds submitted and not done
        self.events = EventPoster(make_api, on_drop=on_event_drop, idle=lambda: self._pending == 0)

    def _api(self) -> PodApi:
        api: PodApi | None = getattr(self._local, "api", None)
        if api is None:
            api = self._local.api = self._make()
            with self._lock:
                self._apis.append(api)
        return api

    @property
    def requests(self) -> int:
        with self._lock:
            return sum(api.requests for api in self._apis)

    def submit(self, binds: Iterable[tuple[str, str, str]], done: Callable[[BindResult], None]) -> None:
        """Bind every (namespace, name, node) in order, on the pool's threads; `done` gets each
        result on the thread that made it, as soon as it is made. After `close`: dropped."""
        batch = list(binds)
        with self._lock:
            if self._closed or not batch:
                return
            self._pending += len(batch)
            for _ in range(min(len(batch), self._size - len(self._threads))):  # started as needed
                thread = threading.Thread(target=self._work, name=f"gputwin-bind_{len(self._threads)}", daemon=True)
                thread.start()
                self._threads.append(thread)
        for bind in batch:
            self._queue.put((bind, done))

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            self._bind(*item)

    def _bind(self, bind: tuple[str, str, str], done: Callable[[BindResult], None]) -> None:
        namespace, name, node = bind
        try:
            self._api().bind(namespace, name, node)
            result = BindResult(namespace, name, node, at=time.monotonic())
        except ApiException as exc:
            result = BindResult(namespace, name, node, reason_of(exc), at=time.monotonic())
        except Exception as exc:  # noqa: BLE001 - BindConflict, a broken connection, ...: this pod's failure
            result = BindResult(namespace, name, node, str(exc), at=time.monotonic())
        finally:
            with self._lock:
                self._pending -= 1
        try:
            done(result)
        except Exception:  # a callback that fails must not kill the pool's thread
            log.exception("handling the bind of %s/%s failed", namespace, name)

    def close(self) -> None:
        """End the threads: a bind in flight finishes, binds not started and events still waiting
        are dropped (their pods stay unbound: whoever schedules next queues them again)."""
        with self._lock:
            self._closed = True
            threads, self._threads = self._threads, []
        dropped = 0
        while True:  # binds not started: dropped
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            dropped += item is not None
        with self._lock:
            self._pending -= dropped
        for _ in threads:
            self._queue.put(None)
        for thread in threads:
            thread.join()
        self.events.close()


# --- the pods of a GPUJob ----------------------------------------------------------------------

JOB_LABEL = "gputwin.io/job"  # the GPUJob's name (hashed if it is no valid label value)
JOB_ID = "gputwin.io/job-id"  # annotation: namespace/name, the exact id
ATTEMPT_LABEL = "gputwin.io/attempt"
PARTITION_LABEL = "gputwin.io/partition"
SWITCHES = "gputwin.io/switches"
OVERHEAD = "gputwin.io/comm-overhead"
RUN_DURATION = "gputwin.io/run-duration"  # read by KWOK's gputwin-pod-complete stage
SCHEDULER = "gputwin"
GPU = "nvidia.com/gpu"
DEFAULT_IMAGE = "registry.k8s.io/pause:3.10"
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def label_value(text: str) -> str:
    """`text` if it is a valid label value, else a stable shortened form."""
    return text if _LABEL_VALUE.match(text) else f"{text[:40].strip('-_.')}-{short_hash(text)}".lstrip("-_.")


def pod_name(job: str, attempt: int, index: int) -> str:
    """`<job>-<attempt>-<i>`, shortened with a hash when it would pass the 253-character limit."""
    suffix = f"-{attempt}-{index}"
    if len(job) + len(suffix) <= 253:
        return f"{job}{suffix}"
    return f"{job[:200].rstrip('-.')}-{short_hash(job)}{suffix}"


@dataclass(frozen=True, slots=True)
class PodPlan:
    """One pod of a job's run: where, with how many GPUs, and what to say about the placement."""

    namespace: str
    job: str  # the GPUJob's name
    attempt: int
    index: int
    node: str
    gpus: int
    partition: str
    switches: str  # the leaf switches the whole job spans, comma-separated
    overhead: float
    run_seconds: float | None  # simulated runs: how long KWOK keeps the pod Running


def job_pod(plan: PodPlan, template: Obj | None, owner: Obj | None, tolerated: Sequence[str]) -> Obj:
    """The pod for `plan` from the job's PodTemplateSpec (a pause container if it has none).

    Ours, whatever the template says: name, namespace, owner, schedulerName, no nodeName (the
    Binding places it), and `nvidia.com/gpu` requests = limits on the first container (others get
    none: the GPUs of a node are the job's, counted once). The template's labels and annotations
    are kept under ours.
    """
    template = copy.deepcopy(template or {})
    given = Body(template)
    spec = template.get("spec") or {"containers": [{"name": "job", "image": DEFAULT_IMAGE}]}  # ours to change
    labels = {**given.labels, JOB_LABEL: label_value(plan.job),
              ATTEMPT_LABEL: str(plan.attempt), PARTITION_LABEL: plan.partition}  # fmt: skip
    annotations = {**given.annotations, JOB_ID: f"{plan.namespace}/{plan.job}",
                   SWITCHES: plan.switches, OVERHEAD: f"{plan.overhead:.6g}"}  # fmt: skip
    if plan.run_seconds is not None:
        annotations[RUN_DURATION] = f"{max(plan.run_seconds, 0.0):.3f}s"
    metadata: Obj = {"name": pod_name(plan.job, plan.attempt, plan.index), "namespace": plan.namespace,
                     "labels": labels, "annotations": annotations}  # fmt: skip
    if owner is not None:
        job = Body(owner)
        metadata["ownerReferences"] = [{"apiVersion": job.api_version, "kind": job.kind, "name": job.name,
                                        "uid": job.uid, "controller": True,
                                        "blockOwnerDeletion": False}]  # fmt: skip
    spec.pop("nodeName", None)
    spec["schedulerName"] = SCHEDULER
    spec.setdefault("restartPolicy", "Never")  # a job runs to completion
    tolerations = list(spec.get("tolerations") or [])
    tolerations += [{"key": key, "operator": "Exists"} for key in tolerated]
    spec["tolerations"] = tolerations
    for i, container in enumerate(spec.get("containers") or []):
        resources = container.setdefault("resources", {})
        for kind in ("requests", "limits"):
            values = dict(resources.get(kind) or {})
            values.pop(GPU, None)
            if i == 0:
                values[GPU] = str(plan.gpus)
            resources[kind] = values
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def gpus_of(pod: Obj, resource: str = "nvidia.com/gpu") -> int:
    """GPUs a pod asks for: the sum of its containers' limits (requests must equal them)."""
    total = 0
    for container in Pod(pod).spec.get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get(resource) or (resources.get("requests") or {}).get(
            resource
        )
        if value is not None:
            try:
                total += int(str(value))
            except ValueError:
                continue  # a quantity that is no whole number of GPUs: the API server refuses it anyway
    return total


def node_gpus(node: Obj, resource: str = "nvidia.com/gpu") -> int:
    """A Node's allocatable GPUs (0 if it advertises none or an unreadable quantity)."""
    value = (Body(node).status.get("allocatable") or {}).get(resource, "0")
    try:
        return int(str(value))
    except ValueError:
        return 0


def bound_gpus(pods: Sequence[Obj]) -> dict[str, int]:
    """GPUs per node held by bound pods that still run (not Succeeded/Failed, not being deleted)."""
    used: dict[str, int] = {}
    for pod in pods:
        view = Pod(pod)
        node = view.node_name
        if node and view.phase not in ("Succeeded", "Failed") and not view.deleting:
            used[node] = used.get(node, 0) + gpus_of(pod)
    return used


__all__ = [
    "ATTEMPT_LABEL",
    "GPU",
    "JOB_ID",
    "JOB_LABEL",
    "OVERHEAD",
    "PARTITION_LABEL",
    "RUN_DURATION",
    "SCHEDULER",
    "SWITCHES",
    "PodPlan",
    "job_pod",
    "label_value",
    "pod_name",
    "BindConflict",
    "BindPool",
    "EventPoster",
    "BindResult",
    "PodApi",
    "bound_gpus",
    "gpus_of",
    "node_gpus",
    "reason_of",
]
