"""Active health and load checks of the remotes, on the app's event loop.

Every `settings.routing.health_interval_s`, each remote's health URL is fetched (radixgate
/healthz, vLLM and SGLang /health): a failure marks it down (routing/health.py), a success while
it is down (after its cooldown, as the half-open probe) brings it back up. Its load URL (radixgate
/v1/load, vLLM and SGLang /metrics) feeds the router's LoadTracker (routing/load.py). Passive
checks (request errors and timeouts) mark remotes down between two rounds.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import httpx

from gateway.routing.health import DOWN
from gateway.routing.load import requests_from_metrics

if TYPE_CHECKING:
    from gateway.routing.remote import RemoteBackend
    from gateway.routing.router import Router

log = logging.getLogger("gateway.routing")


class HealthMonitor:
    def __init__(self, router: Router, interval_s: float, timeout_s: float = 5.0) -> None:
        self.router = router
        self.interval_s = interval_s
        self.timeout_s = timeout_s

    async def run(self) -> None:
        async with httpx.AsyncClient(timeout=self.timeout_s) as http:
            while True:
                await asyncio.gather(*(self.check(http, r) for r in self.router.remotes), return_exceptions=True)
                await asyncio.sleep(self.interval_s)

    async def check(self, http: httpx.AsyncClient, remote: RemoteBackend) -> None:
        """One round for one remote: health (unless it is cooling down), then load."""
        health = remote.health
        if health.state == DOWN:
            return
        try:
            response = await http.get(remote.health_url, headers={"Authorization": f"Bearer {remote.api_key}"})
            is_ok = response.status_code < 500
        except httpx.HTTPError as exc:
            is_ok = False
            reason = f"health check failed: {type(exc).__name__}"
        else:
            reason = f"health check answered {response.status_code}"
        if not is_ok:
            health.record_failure(reason)
            return
        health.record_success()
        if remote.load_url is not None:
            await self.read_load(http, remote)

    async def read_load(self, http: httpx.AsyncClient, remote: RemoteBackend) -> None:
        loads = self.router.loads
        try:
            response = await http.get(remote.load_url, headers={"Authorization": f"Bearer {remote.api_key}"})
            response.raise_for_status()
            if remote.kind == "radixgate":
                loads.report(remote.name, int(response.json()["tokens_in_flight"]))
            else:
                loads.report(remote.name, requests_from_metrics(response.text) * loads.mean_tokens_per_request(remote.name))
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            log.debug("load of %s unreadable: %r", remote.name, exc)
