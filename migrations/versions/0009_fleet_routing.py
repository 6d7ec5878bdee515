"""Fleet routing in the request log: predicted hit, failovers, and cached_tokens that may be unknown.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("request_log") as batch_op:
        batch_op.add_column(sa.Column("predicted_cached_tokens", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("failovers", sa.Integer(), nullable=True))
        batch_op.alter_column("cached_tokens", existing_type=sa.Integer(), nullable=True)


def downgrade() -> None:
    op.execute("UPDATE request_log SET cached_tokens = 0 WHERE cached_tokens IS NULL")
    with op.batch_alter_table("request_log") as batch_op:
        batch_op.alter_column("cached_tokens", existing_type=sa.Integer(), nullable=False)
        batch_op.drop_column("failovers")
        batch_op.drop_column("predicted_cached_tokens")
