"""Fleet routing per tenant, from the request log: available vs routed vs delivered hit rates.

Over rows an edge router routed (predicted_cached_tokens is set): available = the canonical
shadow's hit (one unbounded cache of all the domain's traffic), routed = the router's predicted hit
on the node it chose, delivered = the node's own cached_tokens over rows that report one. Each is
token-weighted over its own rows; None when its denominator is 0. The session is never committed.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from gateway.db.models import RequestLog as R
from gateway.db.models import Tenant


def routing_by_tenant(session: Session, since: datetime | None, until: datetime | None) -> list[dict]:
    known = R.cached_tokens.is_not(None)
    query = (
        select(R.tenant_id, Tenant.name, func.count(), func.sum(R.prompt_tokens), func.sum(R.predicted_cached_tokens),
               func.sum(case((known, R.cached_tokens), else_=0)), func.sum(case((known, R.prompt_tokens), else_=0)),
               func.sum(R.canonical_cached_tokens), func.sum(R.canonical_prompt_tokens), func.sum(R.failovers))
        .outerjoin(Tenant, Tenant.id == R.tenant_id)
        .where(R.predicted_cached_tokens.is_not(None), R.status == "ok",
               *([R.created_at >= since] if since else []), *([R.created_at < until] if until else []))
        .group_by(R.tenant_id, Tenant.name)
    )
    rows = []
    for tenant_id, name, n, prompt, predicted, cached, known_prompt, canon_cached, canon_prompt, failovers in session.execute(query):
        rows.append({
            "tenant_id": tenant_id, "tenant": name or f"tenant {tenant_id}", "requests": n,
            "available_hit_rate": ratio(canon_cached, canon_prompt),
            "routed_hit_rate": ratio(predicted, prompt),
            "delivered_hit_rate": ratio(cached, known_prompt),
            "failovers": int(failovers or 0),
        })
    return rows


def ratio(numerator, denominator) -> float | None:
    return (numerator or 0) / denominator if denominator else None
