"""`gputwin export …`: a declared cluster in another system's vocabulary; `kueue` writes Kueue's objects.

`export kueue` loads the cluster as `simulate` does, converts its tenancy (`gputwin.api.kueue`) and
writes one multi-document YAML stream to `--out` (a temporary file beside it renamed into place, so
`--out` is the whole export or what it was before) or to stdout. What does not map is said twice:
one `note:` line each on stderr, and the same lines as comments at the top of the YAML.
"""

from __future__ import annotations

from pathlib import Path

import click

from gputwin.adapters.traces.writers import write_atomically
from gputwin.api.kueue import export_kueue, render_yaml
from gputwin.api.loader import load_cluster, read_documents


@click.group()
def export() -> None:
    """Write a declared cluster for another system: Kueue's ClusterQueues, Cohorts, LocalQueues and flavors."""


@export.command()
@click.option("--cluster", "cluster_path", required=True, type=click.Path(path_type=Path),
              help="The cluster's resources: a YAML file or folder (SwitchTopology, GPUPartitions with quotas, "
                   "SchedulingPolicies).")  # fmt: skip
@click.option("--namespace", default=None,
              help="Put every LocalQueue in this namespace (named TENANT.PARTITION); default: one namespace "
                   "per tenant, named like it, LocalQueues named like the partition.")  # fmt: skip
@click.option(
    "--out",
    "out_path",
    default="-",
    show_default=True,
    help="The YAML file to write (replaced whole, or left as it was on an error); - for stdout.",
)
def kueue(cluster_path: Path, namespace: str | None, out_path: str) -> None:
    """Write the tenancy as Kueue v1beta2 ResourceFlavors, Cohorts, ClusterQueues and LocalQueues (YAML)."""
    cluster = load_cluster(cluster_path)
    where = {f"{d.resource.kind}/{d.resource.metadata.name}": d.where for d in read_documents(cluster_path)}
    result = export_kueue(cluster, namespace=namespace, where=where, source=str(cluster_path))
    text = render_yaml(result, cluster_path.name)
    if out_path == "-":
        click.echo(text, nl=False)
    else:
        with write_atomically(Path(out_path)) as stream:
            stream.write(text)
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
