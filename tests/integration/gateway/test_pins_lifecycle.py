"""Pins are committed before they are pinned: a pin the engine refuses (the cache's cap on pinned
pages) is a 409 that leaves no row, and two concurrent pins that only fit the quota one at a time
give one 201 and one 409 (one live row)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from sqlalchemy import func, select

from gateway.db.models import Pin
from gateway.main import create_app
from tests.support.app import admin_headers, make_settings

pytestmark = pytest.mark.slow

SYSTEMS = (
    "You are the billing assistant of Nimbus Storage. Explain invoices, refunds and plan changes in two "
    "short sentences, quoting the exact amounts from the account and never guessing a figure you lack.",
    "You are the network assistant of Nimbus Storage. Explain private endpoints, firewall rules and "
    "bandwidth limits in two short sentences, naming the exact setting a customer has to change first.",
)


def live_rows(gw) -> int:
    with gw.session_factory() as session:
        return session.scalar(select(func.count(Pin.id)).where(Pin.deleted_at.is_(None)))


async def new_tenant(client: httpx.AsyncClient, name: str, quota: int) -> dict:
    created = await client.post("/admin/tenants", json={"name": name, "pin_quota_tokens": quota}, headers=admin_headers())
    assert created.status_code == 201, created.text
    return {"Authorization": f"Bearer {created.json()['api_key']['key']}"}


def test_pin_refused_by_the_engine_leaves_no_row_and_concurrent_pins_at_quota_one_wins(tmp_path, engine):
    async def scenario() -> dict:
        app = create_app(make_settings(tmp_path), engine=engine)
        async with app.router.lifespan_context(app):
            gw = app.state.gw
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
                auth = await new_tenant(client, "pinner", 100_000)
                engine.set_pin_capacity(1)
                try:
                    capped = await client.post("/v1/pins", json={"system": SYSTEMS[0]}, headers=auth)
                finally:
                    engine.set_pin_capacity(None)
                rows_after_cap = live_rows(gw)
                sizes = []
                for system in SYSTEMS:  # learn each pin's size, then unpin it
                    made = await client.post("/v1/pins", json={"system": system}, headers=auth)
                    assert made.status_code == 201, made.text
                    sizes.append(made.json()["num_tokens"])
                    assert (await client.delete(f"/v1/pins/{made.json()['id']}", headers=auth)).status_code == 200
                racer = await new_tenant(client, "racer", max(sizes))
                both = await asyncio.gather(*(client.post("/v1/pins", json={"system": s}, headers=racer) for s in SYSTEMS))
                out = {"capped": capped, "rows_after_cap": rows_after_cap, "sizes": sizes,
                       "race": sorted(r.status_code for r in both), "race_codes": [r.json() for r in both],
                       "live_rows": live_rows(gw), "pins_stats": engine.stats()["cache"]["num_pins"]}
                for made in both:  # leave the shared engine as it was
                    if made.status_code == 201:
                        await client.delete(f"/v1/pins/{made.json()['id']}", headers=racer)
                return out

    num_pins_before = engine.stats()["cache"]["num_pins"]
    out = asyncio.run(scenario())
    assert out["capped"].status_code == 409, out["capped"].text
    assert out["capped"].json()["error"]["code"] == "pin_capacity_exceeded"
    assert out["rows_after_cap"] == 0
    assert sum(out["sizes"]) > max(out["sizes"])  # the quota fits one pin, never both
    assert out["race"] == [201, 409], out["race_codes"]
    assert out["live_rows"] == 1
    assert out["pins_stats"] == num_pins_before + 1
