"""Puts tests/ on sys.path, so a folder's conftest can import shared helper modules such as
tests/cluster_builders.py, whether pytest runs the whole suite or a single file; and offers the
real Kubernetes control plane's fixtures (`k8s_bin`, `kube`, `kubectl`, `crds`: tests/k8s_control_plane.py)
to every folder, so a session starts at most one control plane.

pytest's default `prepend` import mode already inserts this file's folder when it loads it (before
any conftest below it); the explicit insert keeps that true under other import modes.
"""

import sys
from pathlib import Path

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from k8s_control_plane import crds, k8s_bin, kube, kubectl  # noqa: E402,F401  (fixtures, for every folder)
