"""The gputwin.io/v1alpha1 API: typed custom resources and the loader that turns them into a cluster.

    from gputwin.api import load_cluster
    cluster = load_cluster(Path("manifests/samples/two-leaf.yaml"))   # -> gputwin.core.model.ClusterSpec

Models live in `gputwin.api.v1alpha1`; cross-object checks in `gputwin.api.validate`.
"""

from gputwin.api.loader import load_cluster, load_documents, read_documents
from gputwin.api.problems import ClusterError, Problem
from gputwin.api.resources import demo_cluster_path
from gputwin.api.validate import Document, check_cluster

__all__ = [
    "ClusterError",
    "Document",
    "Problem",
    "check_cluster",
    "demo_cluster_path",
    "load_cluster",
    "load_documents",
    "read_documents",
]
