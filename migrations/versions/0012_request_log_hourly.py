"""The request log's hourly roll-ups: the stats sums per tenant, UTC hour, template, miss cause and
error code (gateway/db/hourly.py), and the doctor's loss sums per tenant, hour, order cause and
cold cause (gateway/db/doctor_hourly.py), each kept by an AFTER INSERT trigger on request_log and
back-filled here from the rows already logged, so the overview, the stats API and the doctor read
hours, not requests.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from gateway.db import doctor_hourly, doctor_queries, hourly

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        hourly.TABLE,
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("template", sa.String(128), nullable=False),
        sa.Column("miss_cause", sa.String(16), nullable=False),
        sa.Column("error_code", sa.String(64), nullable=False),
        *(sa.Column(name, sa.BigInteger(), nullable=False) for name in hourly.SUMS),
        sa.PrimaryKeyConstraint(*hourly.KEYS, name=f"pk_{hourly.TABLE}"),
    )
    # the trigger first: creating it locks request_log against other writers until this migration
    # commits, so the back-fill below sees every row the trigger will not
    for statement in hourly.create_trigger_sql(dialect):
        op.execute(statement)
    op.execute(hourly.backfill_sql(dialect))
    op.create_table(
        doctor_hourly.TABLE,
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("order_cause", sa.String(32), nullable=False),
        sa.Column("cold_cause", sa.String(32), nullable=False),
        *(sa.Column(name, sa.BigInteger(), nullable=False) for name in doctor_queries.SUMS),
        sa.PrimaryKeyConstraint(*doctor_hourly.KEYS, name=f"pk_{doctor_hourly.TABLE}"),
    )
    for statement in doctor_hourly.create_trigger_sql(dialect):
        op.execute(sa.text(statement))
    op.execute(sa.text(doctor_hourly.backfill_sql(dialect)))


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for statement in [*doctor_hourly.drop_trigger_sql(dialect), *hourly.drop_trigger_sql(dialect)]:
        op.execute(statement)
    op.drop_table(doctor_hourly.TABLE)
    op.drop_table(hourly.TABLE)
