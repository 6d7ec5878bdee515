"""Per-tenant requests-per-minute and tokens-per-minute limits (NULL: the settings' default).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch_op:
        batch_op.add_column(sa.Column("requests_per_minute", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("tokens_per_minute", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tenants") as batch_op:
        batch_op.drop_column("tokens_per_minute")
        batch_op.drop_column("requests_per_minute")
