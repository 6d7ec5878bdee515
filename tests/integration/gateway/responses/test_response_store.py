"""Stored responses on SQLite and PostgreSQL: saved whole, read back only by their own tenant, deleted, paged."""

from __future__ import annotations

import pytest

from gateway.db import Tenant, make_engine, make_session_factory, session_scope
from gateway.responses import store
from gateway.responses.items import normalize_input, output_items
from gateway.responses.schemas import InputTokensDetails, ResponseObject, ResponseUsage


@pytest.fixture
def sessions(migrated_url):
    engine = make_engine(migrated_url)
    factory = make_session_factory(engine)
    with session_scope(factory) as session:
        session.add_all([Tenant(id=1, name="owner"), Tenant(id=2, name="other")])
    yield factory
    engine.dispose()


def a_response(response_id: str, previous: str | None = None) -> ResponseObject:
    usage = ResponseUsage(input_tokens=30, input_tokens_details=InputTokensDetails(cached_tokens=16, cache_write_tokens=14),
                          output_tokens=5, total_tokens=35)
    return ResponseObject(id=response_id, created_at=1_796_000_000, status="completed", model="m",
                          output=output_items("Paris.", None), previous_response_id=previous, usage=usage,
                          metadata={"run": "7"})


def test_a_saved_response_reads_back_whole_for_its_tenant_only(sessions):
    items = normalize_input("Capital of France? " + "é" * 10)
    with session_scope(sessions) as session:
        store.save_response(session, 1, a_response("resp_1"), items)
    with session_scope(sessions) as session:
        turn = store.load_turn(session, 1, "resp_1")
        assert store.load_turn(session, 2, "resp_1") is None
        assert store.load_turn(session, 1, "resp_unknown") is None
    assert turn.response == a_response("resp_1").model_copy(update={"output": turn.response.output})
    assert turn.input_items == items
    assert turn.conversation() == [*items, *turn.response.output]


def test_delete_removes_only_the_tenants_own_response(sessions):
    with session_scope(sessions) as session:
        store.save_response(session, 1, a_response("resp_1"), normalize_input("hi"))
    with session_scope(sessions) as session:
        assert store.delete_response(session, 2, "resp_1") is False
    with session_scope(sessions) as session:
        assert store.delete_response(session, 1, "resp_1") is True
        assert store.delete_response(session, 1, "resp_1") is False
        assert store.load_turn(session, 1, "resp_1") is None


def test_input_items_page_in_either_order_after_an_id():
    items = normalize_input([{"role": "user", "content": str(n)} for n in range(5)])
    ids = [item["id"] for item in items]
    first = store.page_items(items, 2, "desc", None)
    assert [i["id"] for i in first.data] == [ids[4], ids[3]] and first.has_more
    assert (first.first_id, first.last_id) == (ids[4], ids[3])
    rest = store.page_items(items, 10, "desc", first.last_id)
    assert [i["id"] for i in rest.data] == ids[2::-1] and not rest.has_more
    assert [i["id"] for i in store.page_items(items, 3, "asc", ids[1]).data] == ids[2:5]
    assert store.page_items(items, 3, "asc", "msg_unknown") is None
