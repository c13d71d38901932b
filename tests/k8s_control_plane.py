"""A real Kubernetes control plane for tests (etcd + kube-apiserver + kube-controller-manager + KWOK).

Imported by tests/conftest.py, so every folder (tests/k8s, tests/operator, tests/adapters/kube, …)
shares ONE definition of each fixture, hence one control plane per session. Fixtures:
- ``k8s_bin``: the folder of binaries built by ``scripts/k8s/build.sh``. Missing binaries skip the test
  with the reason shown, except under CI (``CI`` set, e.g. ``CI=true``), where they are an error:
  CI runs ``build.sh`` first, so a missing binary there is a broken build, not an optional extra.
- ``kube`` (session): the path of a kubeconfig. ``GPUTWIN_KUBECONFIG`` names an existing cluster to use
  as is; otherwise ``scripts/k8s/start.sh --with-controller-manager`` starts one on 127.0.0.1 for the
  session and ``scripts/k8s/stop.sh`` stops it at the end.
- ``kubectl`` (session): runs kubectl against ``kube``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ci_rule import skip_or_fail  # tests/ci_rule.py
from polling import wait_for  # tests/polling.py

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts" / "k8s"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok")


def bin_dir() -> Path:
    """The cache folder build.sh fills (one source of truth: scripts/k8s/lib.sh)."""
    out = subprocess.run(
        ["bash", "-c", 'source "$1" && k8s_bin_dir', "_", str(SCRIPTS / "lib.sh")],
        check=True, capture_output=True, text=True,
    )
    return Path(out.stdout.strip())


def missing_binaries(folder: Path) -> list[str]:
    return [name for name in BINARIES if not os.access(folder / name, os.X_OK)]


def built_binaries() -> Path:
    """The built binaries' folder; a missing one skips the test (fails it under CI), saying how to build."""
    folder = bin_dir()
    missing = missing_binaries(folder)
    if missing:
        skip_or_fail(
            f"Kubernetes test binaries missing in {folder} ({', '.join(missing)}): "
            "run `bash scripts/k8s/build.sh` (about 15 min once, then cached)"
        )
    return folder


@pytest.fixture(scope="session")
def k8s_bin() -> Path:
    return built_binaries()


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    given = os.environ.get("GPUTWIN_KUBECONFIG")
    if given:
        path = Path(given)
        if not path.is_file():
            pytest.fail(f"GPUTWIN_KUBECONFIG={given} is not a file", pytrace=False)
        yield path
        return
    built_binaries()  # start.sh finds them itself; check first for the message
    state = tmp_path_factory.mktemp("k8s-state")
    started = subprocess.run(
        ["bash", str(SCRIPTS / "start.sh"), "--state", str(state), "--with-controller-manager"],
        capture_output=True, text=True, timeout=180, check=False,
    )
    if started.returncode != 0:
        subprocess.run(["bash", str(SCRIPTS / "stop.sh"), "--state", str(state)], timeout=60, check=False)
        pytest.fail(f"scripts/k8s/start.sh failed ({started.returncode}):\n{started.stderr}", pytrace=False)
    try:
        yield state / "kubeconfig"
    finally:
        subprocess.run(["bash", str(SCRIPTS / "stop.sh"), "--state", str(state)], timeout=60, check=False)


@dataclass(frozen=True)
class Kubectl:
    binary: Path
    kubeconfig: Path
    cache_dir: Path  # kubectl's discovery cache: per session, not ~/.kube/cache (a new port every run)

    def env(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "KUBECACHEDIR": str(self.cache_dir)}

    def run(self, *args: str, input: str | None = None, check: bool = True,
            timeout: float = 90) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.binary), *args], input=input, capture_output=True, text=True,
            env=self.env(), timeout=timeout, check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)


@pytest.fixture(scope="session")
def kubectl(kube: Path, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    binary = bin_dir() / "kubectl"
    if not os.access(binary, os.X_OK):
        # Only reachable with GPUTWIN_KUBECONFIG: then any kubectl on PATH will do.
        found = shutil.which("kubectl")
        if found is None:
            skip_or_fail(f"{binary} missing and no kubectl on PATH: run `bash scripts/k8s/build.sh`")
        binary = Path(str(found))
    return Kubectl(binary, kube, tmp_path_factory.mktemp("kubectl-cache"))


# The gputwin CRDs (crds/), for the tests that need them installed.
CRD_NAMES = tuple(
    f"{plural}.gputwin.io"
    for plural in ("switchtopologies", "gpupartitions", "schedulingpolicies", "gpujobs", "tracereplays")
)


@pytest.fixture(scope="session")
def crds(kubectl: Kubectl) -> Iterator[None]:
    """crds/ applied and Established once per test session; removed at its end if we installed them.

    Session scope on purpose: a per-module delete raced the next module's install on a loaded
    machine ("create not allowed while custom resource definition is terminating"). Tests never
    delete these CRDs; each cleans up its own objects. The teardown only matters with
    GPUTWIN_KUBECONFIG (a cluster that outlives the session): it polls until the CRDs are gone and
    fails loudly if they are not, so the next session cannot meet them terminating.
    """
    existing = kubectl.run("get", "crd", *CRD_NAMES, "--ignore-not-found", "-o", "name").stdout.split()
    kubectl.run("apply", "-k", str(ROOT / "crds"))
    kubectl.run("wait", "--for=condition=Established", "--timeout=120s", *(f"crd/{n}" for n in CRD_NAMES))
    yield
    if not existing:
        kubectl.run("delete", "crd", *CRD_NAMES, "--ignore-not-found", "--wait=false")
        wait_for(
            "the gputwin CRDs to be deleted",
            lambda: not kubectl.run("get", "crd", *CRD_NAMES, "--ignore-not-found", "-o", "name").stdout.split(),
            timeout=300, interval=1,
        )
