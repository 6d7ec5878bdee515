"""The canonical counterfactual in the request log: four nullable integer columns, the stats
indexes widened to cover them, a covering index for the doctor's per-tenant sums and one for its
cross-tenant system-prefix lookups.

Rows written before this revision keep NULL in the new columns (no counterfactual measured).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NEW_COLUMNS = ("canonical_cached_tokens", "canonical_prompt_tokens", "static_prefix_tokens", "system_prefix_tokens")
OLD_STATS = ("status", "template", "miss_cause", "error_code",
             "prompt_tokens", "cached_tokens", "shadow_cached_tokens", "completion_tokens", "ttft_ms")
NEW_STATS = (*OLD_STATS, "canonicalized", "canonical_cached_tokens", "canonical_prompt_tokens")
SYSTEM_INDEX = ("system_hash", "tools_hash", "canonicalized", "tenant_id", "created_at")
DOCTOR_INDEX = (
    "tenant_id", "created_at", "canonicalized", "was_canonical", "miss_cause", "sections_found", "dynamic_patterns",
    "prompt_tokens", "cached_tokens", "shadow_cached_tokens", "canonical_cached_tokens", "canonical_prompt_tokens",
    "static_prefix_tokens", "system_prefix_tokens",
)


def create_stats_indexes(stats_columns: tuple[str, ...]) -> None:
    op.create_index("ix_request_log_tenant_created", "request_log", ["tenant_id", "created_at", *stats_columns])
    op.create_index("ix_request_log_created", "request_log", ["created_at", "tenant_id", *stats_columns])


def drop_stats_indexes() -> None:
    op.drop_index("ix_request_log_created", table_name="request_log")
    op.drop_index("ix_request_log_tenant_created", table_name="request_log")


def upgrade() -> None:
    drop_stats_indexes()
    with op.batch_alter_table("request_log") as batch_op:
        for name in NEW_COLUMNS:
            batch_op.add_column(sa.Column(name, sa.Integer(), nullable=True))
    create_stats_indexes(NEW_STATS)
    op.create_index("ix_request_log_system", "request_log", list(SYSTEM_INDEX))
    op.create_index("ix_request_log_doctor", "request_log", list(DOCTOR_INDEX))


def downgrade() -> None:
    op.drop_index("ix_request_log_doctor", table_name="request_log")
    op.drop_index("ix_request_log_system", table_name="request_log")
    drop_stats_indexes()
    with op.batch_alter_table("request_log") as batch_op:
        for name in reversed(NEW_COLUMNS):
            batch_op.drop_column(name)
    create_stats_indexes(OLD_STATS)
