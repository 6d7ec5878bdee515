"""Models on SQLite and PostgreSQL: aware UTC timestamps both ways, unique names and key hashes,
keys deleted with their tenant, and session_scope committing or rolling back in one place."""

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError, StatementError

from gateway.db import ApiKey, Pin, Template, TemplateVersion, Tenant, make_engine, make_session_factory, session_scope


@pytest.fixture
def factory(migrated_url):  # noqa: F811
    engine = make_engine(migrated_url)
    yield make_session_factory(engine)
    engine.dispose()


def test_timestamps_come_back_as_the_same_aware_utc_instant(factory):
    tokyo = timezone(timedelta(hours=9))
    created = datetime(2026, 5, 1, 9, 30, 15, 123456, tzinfo=tokyo)
    with session_scope(factory) as session:
        session.add(Tenant(name="acme", created_at=created))
    with factory() as session:
        stored = session.scalars(select(Tenant)).one().created_at
    assert stored == created and stored.utcoffset() == timedelta(0)


def test_naive_timestamps_are_refused(factory):
    with pytest.raises(StatementError, match="naive datetime"):
        with session_scope(factory) as session:
            session.add(Tenant(name="acme", created_at=datetime(2026, 5, 1)))


def test_defaults_fill_a_new_tenant(factory):
    with session_scope(factory) as session:
        session.add(Tenant(name="acme"))
    with factory() as session:
        tenant = session.scalars(select(Tenant)).one()
    assert tenant.pin_quota_tokens == 0 and tenant.store_prompts is False and tenant.cache_group is None
    assert tenant.created_at.tzinfo is not None


def test_tenant_names_and_key_hashes_are_unique(factory):
    with session_scope(factory) as session:
        session.add(Tenant(name="acme"))
    with pytest.raises(IntegrityError):
        with session_scope(factory) as session:
            session.add(Tenant(name="acme"))
    with session_scope(factory) as session:
        tenant = session.scalars(select(Tenant)).one()
        session.add(ApiKey(tenant_id=tenant.id, key_hash="h1", prefix="rg-abc"))
    with pytest.raises(IntegrityError):
        with session_scope(factory) as session:
            session.add(ApiKey(tenant_id=tenant.id, key_hash="h1", prefix="rg-abd"))


def test_deleting_a_tenant_deletes_its_keys_templates_and_pins(factory):
    with session_scope(factory) as session:
        tenant = Tenant(name="acme")
        session.add(tenant)
        session.flush()
        template = Template(tenant_id=tenant.id, name="mine")
        session.add_all([ApiKey(tenant_id=tenant.id, key_hash="h1", prefix="rg-1"), template,
                         Pin(tenant_id=tenant.id, namespace="acme", num_tokens=64, token_hash="t")])
        session.flush()
        session.add(TemplateVersion(template_id=template.id, version=1, source="{{ system }}"))
    with session_scope(factory) as session:
        session.execute(Tenant.__table__.delete())
    with factory() as session:
        for model in (ApiKey, Template, TemplateVersion, Pin):
            assert session.scalar(select(func.count()).select_from(model)) == 0, model.__name__


def test_session_scope_rolls_back_when_the_block_raises(factory):
    with pytest.raises(RuntimeError):
        with session_scope(factory) as session:
            session.add(Tenant(name="acme"))
            session.flush()
            raise RuntimeError("handler failed")
    with factory() as session:
        assert session.scalar(select(func.count()).select_from(Tenant)) == 0
