"""Active health and load checks of the remotes, on the app's event loop.

Every `settings.routing.health_interval_s`, each remote's health URL is fetched (radixgate
/healthz, vLLM and SGLang /health): a failure marks it down (routing/health.py), a success while
it is down (after its cooldown, as the half-open probe) brings it back up. Its load URL (radixgate
/v1/load, vLLM and SGLang /metrics) feeds the router's LoadTracker (routing/load.py). Passive
checks (request errors and timeouts) mark remotes down between two rounds.

KV events (routing/kv_subscriber.py): the subscribers configured per remote start with the monitor;
a radixgate remote without a configured endpoint is asked for its own (GET /kv_event_sources) at
every round while it is up, and a new start id there (the node restarted) drops its index. A failed
check drops it too (the node may come back empty); events rebuild it. The subscribers stop with the
monitor.
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
        self._configured: set[str] | None = None

    async def run(self) -> None:
        for subscriber in self.router.kv_events.values():
            subscriber.start()
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s) as http:
                while True:
                    await asyncio.gather(*(self.check(http, r) for r in self.router.remotes), return_exceptions=True)
                    await asyncio.sleep(self.interval_s)
        finally:
            await asyncio.gather(*(s.stop() for s in self.router.kv_events.values()), return_exceptions=True)

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
        subscriber = self.router.kv_events.get(remote.name)
        if not is_ok:
            health.record_failure(reason)
            if subscriber is not None:
                subscriber.reset(reason)
            return
        health.record_success()
        if remote.load_url is not None:
            await self.read_load(http, remote)
        if remote.kind == "radixgate" and remote.name not in self.configured:
            await self.read_kv_event_source(http, remote)

    @property
    def configured(self) -> set[str]:
        """Remotes whose KV-event endpoint the settings give (never rediscovered)."""
        if self._configured is None:
            self._configured = {name for name, s in self.router.kv_events.items() if not s.is_discovered}
        return self._configured

    async def read_kv_event_source(self, http: httpx.AsyncClient, remote: RemoteBackend) -> None:
        """Subscribe to a radixgate node's events as it reports them; drop its index when it restarted."""
        from gateway.routing.kv_subscriber import KVEventSubscriber

        try:
            response = await http.get(remote.root_url + "/kv_event_sources",
                                      headers={"Authorization": f"Bearer {remote.api_key}"})
            response.raise_for_status()
            sources = response.json().get("sources") or []
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            log.debug("KV event sources of %s unreadable: %r", remote.name, exc)
            return
        current = self.router.kv_events.get(remote.name)
        source = sources[0] if sources and isinstance(sources[0], dict) and sources[0].get("endpoint") else None
        if source is None:
            if current is not None:
                log.info("backend %s publishes no KV events any more: routing on the predicted index", remote.name)
                await current.stop()
                del self.router.kv_events[remote.name]
            return
        if current is not None and current.source_endpoint == source["endpoint"]:
            if current.start_id is not None and source.get("start_id") != current.start_id:
                current.reset("the node restarted")
            current.start_id = source.get("start_id")
            return
        if current is not None:
            await current.stop()
        subscriber = KVEventSubscriber(remote.name, source["endpoint"], topic=source.get("topic") or "",
                                       replay_endpoint=source.get("replay_endpoint"),
                                       block_size=source.get("block_size"), node_url=remote.root_url)
        subscriber.is_discovered = True
        subscriber.start_id = source.get("start_id")
        self.router.kv_events[remote.name] = subscriber
        subscriber.start()

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
