"""Host-tier hits in the request log: host_cached_tokens (of cached_tokens, the tokens the engine
copied in from its host KV tier), covered by the stats indexes.

Rows written before this revision read 0 (no host tier then).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_STATS = ("status", "template", "miss_cause", "error_code",
             "prompt_tokens", "cached_tokens", "shadow_cached_tokens", "completion_tokens", "ttft_ms",
             "canonicalized", "canonical_cached_tokens", "canonical_prompt_tokens")
NEW_STATS = (*OLD_STATS, "host_cached_tokens")


def create_stats_indexes(stats_columns: tuple[str, ...]) -> None:
    op.create_index("ix_request_log_tenant_created", "request_log", ["tenant_id", "created_at", *stats_columns])
    op.create_index("ix_request_log_created", "request_log", ["created_at", "tenant_id", *stats_columns])


def drop_stats_indexes() -> None:
    op.drop_index("ix_request_log_created", table_name="request_log")
    op.drop_index("ix_request_log_tenant_created", table_name="request_log")


def upgrade() -> None:
    drop_stats_indexes()
    with op.batch_alter_table("request_log") as batch_op:
        batch_op.add_column(sa.Column("host_cached_tokens", sa.Integer(), nullable=False, server_default="0"))
    create_stats_indexes(NEW_STATS)


def downgrade() -> None:
    drop_stats_indexes()
    with op.batch_alter_table("request_log") as batch_op:
        batch_op.drop_column("host_cached_tokens")
    create_stats_indexes(OLD_STATS)
