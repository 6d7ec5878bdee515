"""Template labels (movable names for versions) and a bounded sample of request bodies per template.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "template_labels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("template_id", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", utc(), nullable=False),
        sa.ForeignKeyConstraint(
            ["template_id"], ["templates.id"], name=op.f("fk_template_labels_template_id_templates"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_template_labels")),
        sa.UniqueConstraint("template_id", "label", name=op.f("uq_template_labels_template_id_label")),
    )
    op.create_table(
        "template_samples",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("template", sa.String(length=128), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", utc(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_template_samples_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_template_samples")),
    )
    op.create_index("ix_template_samples_tenant_template", "template_samples", ["tenant_id", "template", "id"])


def downgrade() -> None:
    op.drop_index("ix_template_samples_tenant_template", table_name="template_samples")
    op.drop_table("template_samples")
    op.drop_table("template_labels")
