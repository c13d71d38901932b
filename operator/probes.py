"""Liveness, readiness and metrics over HTTP for the operator's Deployment: `/healthz`, `/readyz`, `/metrics`.

A small aiohttp server (aiohttp comes with kopf) on `OperatorConfig.health_port`
(`GPUTWIN_HEALTH_PORT`, default 8080). Each endpoint answers 200 or 503 with a JSON body of what
the `OperatorService` knows (passes, failures, the last error, the next event):

- `/healthz` (liveness): the reconcile loop runs and no pass has hung; a failing API server does
  NOT make the operator unhealthy (restarting it would not help), only unready.
- `/readyz` (readiness): the last reconcile pass succeeded.
- `/metrics`: the operator's Prometheus metrics (`gputwin.operator.metrics`), text format; on the
  same port so one Service/PodMonitor port covers probes and scraping.

kopf's own `--liveness=http://0.0.0.0:8080/healthz` flag is not used: it answers 200 as soon as
kopf runs, before the operator has read a single object, and knows nothing about our loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from gputwin.operator.metrics import METRICS, OperatorMetrics, exposition
from gputwin.operator.service import OperatorService, Probe


def _endpoint(probe: Callable[[], Probe]) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def answer(_: web.Request) -> web.Response:
        result = probe()
        return web.json_response(result.detail, status=200 if result.ok else 503)

    return answer


def _metrics_endpoint(metrics: OperatorMetrics) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def answer(_: web.Request) -> web.Response:
        body, content_type = exposition(metrics)
        # aiohttp refuses a charset inside content_type=, so the full header is set as is.
        return web.Response(body=body, headers={"Content-Type": content_type})

    return answer


async def serve_probes(
    service: OperatorService, port: int, host: str = "0.0.0.0", metrics: OperatorMetrics = METRICS
) -> web.AppRunner:
    """Start serving `/healthz`, `/readyz` and `/metrics`; stop with `await runner.cleanup()`."""
    app = web.Application()
    app.router.add_get("/healthz", _endpoint(service.liveness))
    app.router.add_get("/readyz", _endpoint(service.readiness))
    app.router.add_get("/metrics", _metrics_endpoint(metrics))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


__all__ = ["serve_probes"]
