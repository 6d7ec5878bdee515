"""Admin keys become rows that can be listed and revoked: display prefix, origin, revoked_at.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("admin_keys") as batch_op:
        batch_op.add_column(sa.Column("prefix", sa.String(32), nullable=True))
        batch_op.add_column(sa.Column("origin", sa.String(16), nullable=False, server_default="unknown"))
        batch_op.add_column(sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("admin_keys") as batch_op:
        batch_op.drop_column("revoked_at")
        batch_op.drop_column("origin")
        batch_op.drop_column("prefix")
