"""`gputwin operator`: run the kopf operator in this process, against a real cluster.

Equivalent to `kopf run -m gputwin.operator.handlers --standalone --all-namespaces` (or
`--namespace NS`), plus what plain kopf cannot pass on: the namespace and backend also go to the
operator's own settings (`GPUTWIN_NAMESPACE`, `GPUTWIN_BACKEND`, `GPUTWIN_HEALTH_PORT`), so the
GPUJobs it schedules are exactly those kopf watches. Credentials: `$KUBECONFIG` (or
`~/.kube/config`), or the pod's service account inside a cluster.
"""

from __future__ import annotations

import os

import click

from gputwin.operator.config import BACKENDS, ConfigError, OperatorConfig


@click.command("operator")
@click.option(
    "--namespace",
    "-n",
    metavar="NS",
    help="Schedule the GPUJobs and TraceReplays of this namespace only (cluster-scoped "
    "kinds are always cluster-wide). Default: $GPUTWIN_NAMESPACE, else all namespaces.",
)
@click.option("--all-namespaces", "-A", is_flag=True, help="Schedule GPUJobs of every namespace.")
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    help="sim: simulated runs on wall-clock time; kubernetes: GPUJobs as pods bound to nvidia.com/gpu nodes; "
    "slurm: policies compiled and applied to the slurmctld of $SLURM_CONF. Default: $GPUTWIN_BACKEND, else sim.",
)
@click.option(
    "--health-port",
    type=click.IntRange(1, 65535),
    help="Port of /healthz and /readyz. Default: $GPUTWIN_HEALTH_PORT, else 8080.",
)
@click.option("--verbose", "-v", is_flag=True, help="Log every handler and reconcile pass (kopf --verbose).")
def operator(namespace: str | None, all_namespaces: bool, backend: str | None, health_port: int | None,
             verbose: bool) -> None:  # fmt: skip
    """Run the gputwin operator (kopf) until interrupted.

    Install the CRDs first (kubectl apply -k crds/). The operator reconciles every gputwin kind,
    schedules GPUJobs through the chosen backend and writes their statuses and events.
    """
    if namespace and all_namespaces:
        raise click.UsageError("--namespace and --all-namespaces exclude each other")
    settings = {"GPUTWIN_BACKEND": backend, "GPUTWIN_HEALTH_PORT": str(health_port) if health_port else None,
                "GPUTWIN_NAMESPACE": "" if all_namespaces else namespace}  # fmt: skip
    os.environ.update({k: v for k, v in settings.items() if v is not None})
    try:
        config = OperatorConfig.from_env()
        from gputwin.operator.service import build_backend, build_deployer

        build_backend(config.backend)
        build_deployer(config.backend)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    _run(config, verbose)


def _run(config: OperatorConfig, verbose: bool) -> None:
    import kopf

    import gputwin.operator.handlers  # noqa: F401  (registers the handlers with kopf)

    kopf.configure(verbose=verbose)
    namespaces = [config.namespace] if config.namespace else []
    kopf.run(standalone=True, clusterwide=not namespaces, namespaces=namespaces)


__all__ = ["operator"]
