"""The gputwin side of benchmarks/kube_scale.py: its cluster objects, a ServiceAccount kubeconfig,
and `gputwin operator --all-namespaces` as a subprocess (CPU and peak RSS over its restarts, its
forecast period and the forecast rounds its log reports)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kube_scale_lib import ProcStats, free_port, proc_stats, stop_process
from kube_scale_plane import GPUS_PER_NODE, LEAVES, ROOT, TASK_TYPE, Plane, leaf_of

OPERATOR_NS, OPERATOR_SA = "gputwin-bench", "operator"

# --- the gputwin side ---------------------------------------------------------------------------------


def cluster_objects(nodes: int) -> list[dict[str, Any]]:
    """SwitchTopology, GPUPartition and SchedulingPolicy describing exactly the KWOK nodes."""
    groups: list[dict[str, Any]] = []
    for leaf in range(LEAVES):
        members = [i for i in range(nodes) if leaf_of(i, nodes) == leaf]
        if members:
            groups.append({"switch": f"leaf{leaf}", "nodes": f"bench-node-[{members[0]}-{members[-1]}]",
                           "gpusPerNode": GPUS_PER_NODE})  # fmt: skip
    leaves = sorted({g["switch"] for g in groups}, key=lambda s: int(s[4:]))
    meta = {"apiVersion": "gputwin.io/v1alpha1"}
    return [
        {**meta, "kind": "SwitchTopology", "metadata": {"name": "bench"},
         "spec": {"switches": [{"name": "spine"}, *({"name": s, "parent": "spine"} for s in leaves)],
                  "nodeGroups": groups}},
        {**meta, "kind": "SchedulingPolicy", "metadata": {"name": "bench-fifo"},
         "spec": {"queue": {"policy": "fifo", "backfill": True}, "placement": {"policy": "consolidate"}}},
        {**meta, "kind": "GPUPartition", "metadata": {"name": "bench"},
         "spec": {"topology": "bench", "taskTypes": [TASK_TYPE], "nodes": f"bench-node-[0-{nodes - 1}]",
                  "policy": "bench-fifo"}},
    ]  # fmt: skip


def operator_kubeconfig(plane: Plane) -> Path:
    """A kubeconfig with a ServiceAccount token (cluster-admin), so APF counts the operator apart
    (made once per control plane: the backlog phase and phase B share it)."""
    kube = plane.kube
    if (plane.state / "operator-kubeconfig").is_file():
        return plane.state / "operator-kubeconfig"
    kube.create("/api/v1/namespaces", {"metadata": {"name": OPERATOR_NS}})
    kube.create(f"/api/v1/namespaces/{OPERATOR_NS}/serviceaccounts", {"metadata": {"name": OPERATOR_SA}})
    kube.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "metadata": {"name": "gputwin-bench-operator"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": OPERATOR_SA, "namespace": OPERATOR_NS}],
    })  # fmt: skip
    answer = kube.create(f"/api/v1/namespaces/{OPERATOR_NS}/serviceaccounts/{OPERATOR_SA}/token",
                         {"spec": {"expirationSeconds": 86400}})  # fmt: skip
    path = plane.state / "operator-kubeconfig"
    path.write_text(kube.kubeconfig_text(answer["status"]["token"]))
    path.chmod(0o600)
    return path


def prepare_gputwin(plane: Plane, nodes: int) -> Path:
    """The CRDs and the cluster objects applied (idempotent); the operator's kubeconfig."""
    plane.kubectl_run("apply", "-f", str(ROOT / "crds"))
    plane.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    plane.kubectl_run("apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in cluster_objects(nodes)))
    return operator_kubeconfig(plane)


def gputwin_command() -> list[str]:
    script = Path(sys.executable).with_name("gputwin")
    if script.is_file():
        return [str(script)]
    found = shutil.which("gputwin")
    return [found] if found else [sys.executable, "-c", "from gputwin.cli.main import main; main()"]


class Operator:
    """`gputwin operator` as a subprocess; CPU and peak RSS summed/maxed over its restarts."""

    def __init__(self, plane: Plane, kubeconfig: Path, forecast_period: float | None = None) -> None:
        self.plane, self.kubeconfig = plane, kubeconfig
        self.forecast_period = forecast_period  # GPUTWIN_FORECAST_SECONDS (0: off); None: the operator's default
        self.port = free_port()
        self.log_path = plane.state / "logs" / "gputwin-operator.log"
        self.trace_path = plane.state / "logs" / "gputwin-bind-trace.jsonl"  # both processes of a --restart
        self.proc: subprocess.Popen[bytes] | None = None
        self.cpu_s, self.rss_mb, self.restarts = 0.0, 0.0, 0
        self._last: ProcStats | None = None  # the running process's latest /proc reading

    def start(self) -> None:
        # The pods it makes or binds tolerate KWOK's taint, as the benchmark's own pods do.
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "GPUTWIN_BACKEND": "kubernetes",
               "GPUTWIN_HEALTH_PORT": str(self.port),
               "GPUTWIN_TOLERATED_TAINTS": "nvidia.com/gpu,kwok.x-k8s.io/node",
               "GPUTWIN_BIND_TRACE": str(self.trace_path)}  # fmt: skip
        if self.forecast_period is not None:
            env["GPUTWIN_FORECAST_SECONDS"] = f"{self.forecast_period:g}"
        # KUBE_SCALE_PYSPY=FOLDER: each operator process under `py-spy record` (raw, all threads, idle
        # too) for its first KUBE_SCALE_PYSPY_SECONDS (default 60): py-spy writes the file itself then.
        spy, seconds = os.environ.get("KUBE_SCALE_PYSPY"), os.environ.get("KUBE_SCALE_PYSPY_SECONDS", "60")
        prefix = ["py-spy", "record", "--idle", "-r", "25", "-d", seconds, "-f", "raw", "-o",
                  f"{spy}/operator-{time.time():.0f}.txt", "--"] if spy else []  # fmt: skip
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen([*prefix, *gputwin_command(), "operator", "--all-namespaces"], env=env,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip

    def wait_ready(self, timeout: float = 120) -> str:
        """'' once /readyz answers 200, else why not (the process's last words)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                return f"gputwin operator exited ({self.proc.returncode}): {self.last_words()}"
            if self.plane.kube.http_status(f"http://127.0.0.1:{self.port}/readyz") == 200:
                return ""
            time.sleep(0.2)
        return f"gputwin operator not ready after {timeout:.0f} s: {self.last_words()}"

    def last_words(self) -> str:
        lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines() if ln.strip()]
        errors = [ln for ln in lines if "Error" in ln or "error" in ln]
        return (errors or lines or ["(no output)"])[-1].strip()[:400]

    def forecast_rounds(self) -> int:
        """Forecast rounds done so far, as the operators' log says (every operator of this control plane
        writes it, so a phase counts the difference over its span)."""
        return self._logged("forecast round: ")

    def failed_passes(self) -> int:
        """Reconcile passes that failed so far (each rebuilds the operator's state from the API server;
        pods it placed in that pass may be deleted as orphans and made again)."""
        return self._logged("reconcile pass failed")

    def _logged(self, text: str) -> int:
        if not self.log_path.is_file():
            return 0
        return self.log_path.read_text(errors="replace").count(text)

    def sample(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self._last = proc_stats(self.proc.pid)

    def _account(self) -> None:
        """Add the ended process's last reading (its /proc is gone once it has been reaped)."""
        if self._last is not None:
            self.cpu_s += self._last.cpu_s
            self.rss_mb = max(self.rss_mb, self._last.peak_rss_mb)
            self._last = None

    def start_counting(self) -> None:
        """CPU seconds count from now (not its start-up), like kube-scheduler's in phase A."""
        assert self.proc is not None
        self.cpu_s -= proc_stats(self.proc.pid).cpu_s

    def kill_and_restart(self) -> None:
        assert self.proc is not None
        self.sample()
        self.proc.kill()
        self.proc.wait()
        self._account()
        self.restarts += 1
        self.start()

    def stop(self) -> None:
        if self.proc is None:
            return
        self.sample()
        stop_process(self.proc)
        self._account()
        self.proc = None
