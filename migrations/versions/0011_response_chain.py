"""Stored responses know their conversation: `chain_id` is the id of the first response of the
chain a response continues (NULL for a first turn, whose own id is its chain's), so every turn of
a conversation routes by one key to the node that holds the previous turns' KV.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("responses") as batch:
        batch.add_column(sa.Column("chain_id", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("responses") as batch:
        batch.drop_column("chain_id")
