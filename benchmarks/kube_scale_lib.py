"""Helpers of benchmarks/kube_scale.py: a lean API client, /proc, /metrics and the bind-trace breakdown
(the pod watch that measures is kube_scale_watch.py).

The benchmark talks to the API server with urllib3 and plain JSON rather than the `kubernetes`
client's generated models: at 10,000 pods and ~5 watch events each, building model objects for
every event would make the benchmark's own CPU (on a 2-core machine shared with the control plane)
part of what it measures.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import socket
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
import yaml
from prometheus_client.parser import text_string_to_metric_families

RETRIED = frozenset({429, 500, 502, 503, 504})
GPU = "nvidia.com/gpu"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process(proc: subprocess.Popen[Any] | None, grace: float = 30.0) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; nothing to do for a process that has ended."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def percentile(ordered: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an already sorted list (None when empty)."""
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


# --- the API server ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kube:
    """Bearer-token JSON requests to one API server (the kubeconfig start.sh writes)."""

    server: str
    token: str
    ca: str
    pool: urllib3.PoolManager

    @classmethod
    def from_kubeconfig(cls, path: Path) -> Kube:
        conf = yaml.safe_load(path.read_text())
        cluster, user = conf["clusters"][0]["cluster"], conf["users"][0]["user"]
        ca = cluster["certificate-authority"]
        pool = urllib3.PoolManager(maxsize=16, cert_reqs="CERT_REQUIRED", ca_certs=ca,
                                   timeout=urllib3.Timeout(connect=5, read=60))  # fmt: skip
        return cls(cluster["server"], user["token"], ca, pool)

    def kubeconfig_text(self, token: str) -> str:
        return yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "bench",
            "clusters": [{"name": "bench", "cluster": {"server": self.server, "certificate-authority": self.ca}}],
            "users": [{"name": "bench", "user": {"token": token}}],
            "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
        })  # fmt: skip

    def request(self, method: str, path: str, body: Any = None, preload: bool = True,
                content_type: str = "application/json") -> Any:  # fmt: skip
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None if body is None else json.dumps(body).encode()
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in range(6):
            answer = self.pool.request(method, self.server + path, body=data, headers=headers,
                                       preload_content=preload, retries=False)  # fmt: skip
            if answer.status not in RETRIED or attempt == 5:
                break
            time.sleep(0.1 * 2**attempt)
        if answer.status >= 400:
            text = answer.data.decode(errors="replace") if preload else ""
            raise RuntimeError(f"{method} {path}: HTTP {answer.status} {text[:300]}")
        return answer if not preload else json.loads(answer.data) if answer.data[:1] == b"{" else answer.data

    def create(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def merge_patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def text(self, path: str) -> str:
        return bytes(self.request("GET", path)).decode()

    def ready_nodes(self) -> int:
        nodes = self.request("GET", "/api/v1/nodes")["items"]
        return sum(
            any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in n.get("status", {}).get("conditions", [])
            )
            for n in nodes
        )

    def http_status(self, url: str) -> int | None:
        try:
            return int(self.pool.request("GET", url, retries=False, timeout=2).status)
        except urllib3.exceptions.HTTPError:
            return None


def request_counts(kube: Kube) -> dict[str, float]:
    """`request VERB resource[/sub]` -> apiserver_request_total, `flow SCHEMA` -> APF dispatched."""
    wanted = ("apiserver_request_total", "apiserver_flowcontrol_dispatched_requests_total")
    text = "\n".join(ln for ln in kube.text("/metrics").splitlines() if ln.startswith(wanted)) + "\n"
    out: dict[str, float] = defaultdict(float)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "apiserver_request_total":
                what = s.labels.get("resource") or "-"
                if s.labels.get("subresource"):
                    what += "/" + s.labels["subresource"]
                out[f"request {s.labels.get('verb')} {what}"] += s.value
            elif s.name == "apiserver_flowcontrol_dispatched_requests_total":
                out[f"flow {s.labels.get('flow_schema')}"] += s.value
    return dict(out)


# --- /proc -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcStats:
    cpu_s: float  # user + system since the process started
    peak_rss_mb: float  # VmHWM


def proc_stats(pid: int) -> ProcStats:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ProcStats(0.0, 0.0)
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state is field 3
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime: fields 14 and 15 of stat
    hwm = next((int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmHWM:")), 0)
    return ProcStats(cpu, hwm / 1024)


# --- where the wait "once its node had room" goes (the operator's GPUTWIN_BIND_TRACE) --------------------

PARTS = ("loop", "copy", "policy", "pass", "bind", "watch", "scheduler")
Ready = tuple[float, float, bool, int]  # see Tracker.ready_and_bound


@dataclass(frozen=True)
class Trace:
    """An operator's bind trace: its passes' snapshot times (sorted), the resourceVersion each
    snapshot's pod copy held (0: not recorded), and each pod's successful bind."""

    snaps: list[float]
    rvs: list[int]
    binds: dict[str, dict[str, Any]]


def read_trace(path: Path) -> Trace:
    """The snapshots and each pod's successful bind, from a bind trace file."""
    snaps: list[tuple[float, int]] = []
    binds: dict[str, dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut short by SIGKILL
            if "pod" in record and record.get("ok"):
                binds.setdefault(record["pod"], record)
            elif "snap" in record and "pod" not in record:
                snaps.append((float(record["snap"]), int(record.get("rv") or 0)))
    snaps.sort()
    return Trace([t for t, _ in snaps], [rv for _, rv in snaps], binds)


def breakdown(ready_bound: dict[str, Ready], trace: Trace, waited_only: bool = False) -> dict[str, list[float]]:
    """Per part, the sorted seconds of every traced pod (times are CLOCK_MONOTONIC in both processes):

    loop: room (as the benchmark's watch saw it) -> the first pass snapshot after it;
    copy: -> the first snapshot whose pod copy held the event that gave the pod its room (or
      made it appear): the operator's watch lag (0 when the trace has no resourceVersions);
    policy: -> the snapshot of the pass that chose the pod (it could see its room, but the policy
      started others first);
    pass: that snapshot -> the pass handed the pod to the bind pool (the pass's own work);
    bind: -> the Binding call returned (bind pool backlog and the call);
    watch: -> the benchmark's watch saw the binding;
    scheduler: loop + copy + pass + bind, the scheduler's latency without the policy's choice.
    A pod decided from a snapshot taken before the benchmark saw its room counts 0 loop, copy and policy.
    `waited_only`: only the pods that waited for capacity to free (room after their creation).
    """
    parts: dict[str, list[float]] = {p: [] for p in PARTS}
    snaps, rvs = trace.snaps, trace.rvs
    for name, (ready, seen, waited, rv) in ready_bound.items():
        record = trace.binds.get(name)
        if record is None or (waited_only and not waited):
            continue
        snap, decided, bound = float(record["snap"]), float(record["decided"]), float(record["bound"])
        loop = copy = policy = 0.0
        if snap >= ready:
            i = bisect.bisect_left(snaps, ready)
            first = snaps[i] if i < len(snaps) and snaps[i] <= snap else snap
            while i < len(snaps) and snaps[i] < snap and 0 < rvs[i] < rv:
                i += 1  # this pass's copy had not seen the event yet
            visible = snaps[i] if i < len(snaps) and snaps[i] <= snap else snap
            loop, copy, policy = first - ready, visible - first, snap - visible
        values = {"loop": loop, "copy": copy, "policy": policy, "pass": decided - snap,
                  "bind": bound - decided, "watch": seen - bound}  # fmt: skip
        values["scheduler"] = loop + copy + values["pass"] + values["bind"]
        for part, value in values.items():
            parts[part].append(value)
    return {p: sorted(v) for p, v in parts.items()}
