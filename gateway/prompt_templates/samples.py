"""A small, bounded sample of the request bodies that named each tenant template.

The template studio prefills its editor from it and replays it in the what-if estimate
(gateway/insight/what_if.py). At most `limit` bodies are kept per (tenant, template name):
recording one more deletes the oldest. Bodies larger than MAX_BODY_CHARS are not kept.
Recording is opt-out: RADIXGATE_TEMPLATE_SAMPLE_SIZE=0 turns it off, and a tenant can drop
its samples with DELETE /v1/templates/{name}/samples.

Functions take a session and never commit, except `store_sample`, the gateway's best-effort write of
one sample in its own session (the chat path queues it on the SideWriter, gateway/db/side_writer.py).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import delete, select
from sqlalchemy.exc import SQLAlchemyError

from gateway.db.models import TemplateSample

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger("gateway.prompt_templates")

MAX_BODY_CHARS = 64_000


@dataclass(frozen=True)
class Sample:
    id: int
    body: dict
    created_at: datetime


def record_sample(session: Session, tenant_id: int, template: str, body: dict, limit: int) -> bool:
    """Keep `body` as the newest sample of (tenant, template), dropping the oldest past `limit`.
    False (nothing stored) when limit <= 0 or the body is too large."""
    text = json.dumps(body, ensure_ascii=False, sort_keys=True)
    if limit <= 0 or len(text) > MAX_BODY_CHARS:
        return False
    session.add(TemplateSample(tenant_id=tenant_id, template=template, body=text))
    session.flush()
    keep = select(TemplateSample.id).where(*scope(tenant_id, template)).order_by(TemplateSample.id.desc()).limit(limit)
    session.execute(delete(TemplateSample).where(*scope(tenant_id, template), TemplateSample.id.not_in(keep)))
    return True


def store_sample(session_factory: sessionmaker[Session], tenant_id: int, template: str, body: dict, limit: int) -> None:
    """record_sample in its own committed session; a failure is logged, never raised."""
    from gateway.db.session import session_scope

    try:
        with session_scope(session_factory) as session:
            record_sample(session, tenant_id, template, body, limit)
    except SQLAlchemyError as exc:
        log.warning("could not keep a sample of template %r: %s", template, type(exc).__name__)


def list_samples(session: Session, tenant_id: int, template: str, limit: int) -> list[Sample]:
    """The newest `limit` samples of (tenant, template), oldest first (the order they were sent)."""
    rows = session.scalars(
        select(TemplateSample).where(*scope(tenant_id, template)).order_by(TemplateSample.id.desc()).limit(limit)
    ).all()
    return [Sample(row.id, json.loads(row.body), row.created_at) for row in reversed(rows)]


def delete_samples(session: Session, tenant_id: int, template: str) -> int:
    """Drop every sample of (tenant, template); returns how many there were."""
    result = session.execute(delete(TemplateSample).where(*scope(tenant_id, template)))
    return result.rowcount or 0


def scope(tenant_id: int, template: str) -> tuple:
    return TemplateSample.tenant_id == tenant_id, TemplateSample.template == template
