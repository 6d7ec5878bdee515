"""The cache doctor on request logs written by the real gateway and engine (no seeded rows)."""

from __future__ import annotations

import pytest

from gateway.doctor.diagnosis import diagnose
from tests.support.app import create_tenant, wait_for_log_rows

pytestmark = pytest.mark.slow

STATIC_RULES = " ".join(
    f"Rule {i}: answer politely, cite the policy section, and never reveal internal ticket notes." for i in range(12)
)
NUM_REQUESTS = 5


def dated_body(day: int, **fields) -> dict:
    system = f"Today is 2026-11-{day:02d}. You are the support assistant of Acme. {STATIC_RULES}"
    messages = [{"role": "system", "content": system}, {"role": "user", "content": f"Question number {day}?"}]
    return {"model": "default", "messages": messages, "max_tokens": 2, "temperature": 0, **fields}


def test_doctor_blames_the_date_when_canonicalization_is_off(client):
    raw = create_tenant(client, "raw-dates")
    canon = create_tenant(client, "canon-dates")
    for day in range(1, NUM_REQUESTS + 1):
        for tenant, canonicalize in ((raw, False), (canon, True)):
            response = client.post("/v1/chat/completions", json=dated_body(day, canonicalize=canonicalize),
                                   headers=tenant["headers"])
            assert response.status_code == 200, response.text
    gw = client.app.state.gw
    wait_for_log_rows(gw, 2 * NUM_REQUESTS)
    with gw.session_factory() as session:
        raw_diagnosis = diagnose(session, raw["id"])
        canon_diagnosis = diagnose(session, canon["id"])
    top = raw_diagnosis.causes[0]
    assert top.code == "dynamic_content" and top.num_requests == NUM_REQUESTS - 1
    assert "date_iso" in top.detail or "today_is" in top.detail
    assert raw_diagnosis.speedup.speedup > 1.5
    # The canonicalized twin hits its hoisted static prefix and loses no repeat to the date.
    assert canon_diagnosis.hit_rate > 0.5 > raw_diagnosis.hit_rate
    assert "dynamic_content" not in {cause.code for cause in canon_diagnosis.causes}
    assert canon_diagnosis.raw_hit_rate < canon_diagnosis.hit_rate
    # raw-dates sent the same system prompt first, but in raw order: nothing canonical to share.
    assert "isolation" not in {cause.code for cause in canon_diagnosis.causes}


def test_raw_requests_log_the_canonical_rendering_they_would_have_been_served(client):
    from sqlalchemy import select

    from gateway.db.models import RequestLog

    raw = create_tenant(client, "raw-twin")
    canon = create_tenant(client, "canon-twin")
    for day in (1, 2):
        for tenant, canonicalize in ((raw, False), (canon, True)):
            response = client.post("/v1/chat/completions", json=dated_body(day, canonicalize=canonicalize),
                                   headers=tenant["headers"])
            assert response.status_code == 200, response.text
    gw = client.app.state.gw
    wait_for_log_rows(gw, 4)
    with gw.session_factory() as session:
        def rows(tenant):
            query = select(RequestLog).where(RequestLog.tenant_id == tenant["id"]).order_by(RequestLog.created_at)
            return list(session.scalars(query))

        raw_rows, canon_rows = rows(raw), rows(canon)
    for raw_row, canon_row in zip(raw_rows, canon_rows):
        # the counterfactual is the canonical prompt exactly: same length, same static prefix, same hit
        assert raw_row.canonical_prompt_tokens == canon_row.prompt_tokens == canon_row.canonical_prompt_tokens
        assert raw_row.static_prefix_tokens == canon_row.static_prefix_tokens >= raw_row.system_prefix_tokens > 0
        assert raw_row.canonical_cached_tokens == canon_row.canonical_cached_tokens == canon_row.cached_tokens
    assert raw_rows[1].canonical_cached_tokens > raw_rows[1].cached_tokens  # the date broke only the raw order
