"""The request log's tenant-hour roll-up: the stats sums per tenant and UTC hour only, plus the
prefill cost model's two sums (gateway/db/tenant_hourly.py), kept by an AFTER INSERT trigger on
request_log and back-filled here, so the overview's per-tenant totals, series and cost model read
about one row per tenant-hour.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from gateway.db import hourly, tenant_hourly

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        tenant_hourly.TABLE,
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        *(sa.Column(name, sa.BigInteger(), nullable=False) for name in hourly.SUMS),
        sa.Column("prefill_ttft_ms", sa.Float(), nullable=False),
        sa.Column("prefill_tokens", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(*tenant_hourly.KEYS, name=f"pk_{tenant_hourly.TABLE}"),
    )
    # the trigger before the back-fill (as in 0012: it locks out other writers until this commits)
    for statement in tenant_hourly.create_trigger_sql(dialect):
        op.execute(sa.text(statement))
    op.execute(sa.text(tenant_hourly.backfill_sql(dialect)))


def downgrade() -> None:
    for statement in hourly.drop_trigger_sql(op.get_bind().dialect.name, tenant_hourly.TABLE):
        op.execute(statement)
    op.drop_table(tenant_hourly.TABLE)
