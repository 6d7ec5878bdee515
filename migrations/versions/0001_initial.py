"""Initial schema: tenants, keys, admin keys, templates and versions, pins, request log, engine stats.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("pin_quota_tokens", sa.Integer(), nullable=False),
        sa.Column("cache_group", sa.String(length=128), nullable=True),
        sa.Column("max_concurrency", sa.Integer(), nullable=True),
        sa.Column("store_prompts", sa.Boolean(), nullable=False),
        sa.Column("created_at", utc(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenants")),
        sa.UniqueConstraint("name", name=op.f("uq_tenants_name")),
    )
    op.create_table(
        "admin_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key_hash", sa.String(length=128), nullable=False),
        sa.Column("created_at", utc(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_admin_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_admin_keys_key_hash")),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("key_hash", sa.String(length=128), nullable=False),
        sa.Column("prefix", sa.String(length=32), nullable=False),
        sa.Column("created_at", utc(), nullable=False),
        sa.Column("last_used_at", utc(), nullable=True),
        sa.Column("revoked_at", utc(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_api_keys_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    op.create_index(op.f("ix_api_keys_tenant_id"), "api_keys", ["tenant_id"])
    op.create_table(
        "templates",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("created_at", utc(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_templates_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_templates")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f("uq_templates_tenant_id_name")),
    )
    op.create_table(
        "template_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("template_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("created_at", utc(), nullable=False),
        sa.ForeignKeyConstraint(
            ["template_id"],
            ["templates.id"],
            name=op.f("fk_template_versions_template_id_templates"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_template_versions")),
        sa.UniqueConstraint("template_id", "version", name=op.f("uq_template_versions_template_id_version")),
    )
    op.create_table(
        "pins",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("namespace", sa.String(length=256), nullable=False),
        sa.Column("template", sa.String(length=128), nullable=True),
        sa.Column("num_tokens", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("ttl_seconds", sa.Integer(), nullable=True),
        sa.Column("expires_at", utc(), nullable=True),
        sa.Column("created_at", utc(), nullable=False),
        sa.Column("deleted_at", utc(), nullable=True),
        sa.Column("hits", sa.Integer(), nullable=False),
        sa.Column("spec_json", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_pins_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pins")),
    )
    op.create_index(op.f("ix_pins_tenant_id"), "pins", ["tenant_id"])
    create_request_log()
    op.create_table(
        "engine_stat_snapshots",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", utc(), nullable=False),
        sa.Column("backend", sa.String(length=128), nullable=True),
        sa.Column("cached_tokens", sa.Integer(), nullable=False),
        sa.Column("pinned_tokens", sa.Integer(), nullable=False),
        sa.Column("evictable_tokens", sa.Integer(), nullable=False),
        sa.Column("num_evictions", sa.Integer(), nullable=False),
        sa.Column("stats_json", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_engine_stat_snapshots")),
    )
    op.create_index(op.f("ix_engine_stat_snapshots_created_at"), "engine_stat_snapshots", ["created_at"])


def create_request_log() -> None:
    hashes = ("system", "tools", "context", "history", "dynamic", "question")
    op.create_table(
        "request_log",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", utc(), nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=True),
        sa.Column("api_key_id", sa.Integer(), nullable=True),
        sa.Column("template", sa.String(length=128), nullable=True),
        sa.Column("template_version", sa.Integer(), nullable=True),
        sa.Column("model", sa.String(length=256), nullable=True),
        sa.Column("backend", sa.String(length=128), nullable=True),
        sa.Column("sections_found", sa.String(length=128), nullable=True),
        sa.Column("dynamic_hoisted", sa.Boolean(), nullable=False),
        sa.Column("was_canonical", sa.Boolean(), nullable=False),
        sa.Column("canonicalized", sa.Boolean(), nullable=False),
        sa.Column("dynamic_patterns", sa.String(length=512), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("shadow_cached_tokens", sa.Integer(), nullable=True),
        sa.Column("ttft_ms", sa.Float(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        *(sa.Column(f"{name}_hash", sa.String(length=32), nullable=True) for name in hashes),
        sa.Column("miss_cause", sa.String(length=16), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_request_log")),
    )
    # covering indexes for the stats queries: tenant/time or time/tenant, then every column they read
    stats_columns = [
        "status", "template", "miss_cause", "error_code",
        "prompt_tokens", "cached_tokens", "shadow_cached_tokens", "completion_tokens", "ttft_ms",
    ]
    op.create_index("ix_request_log_tenant_created", "request_log", ["tenant_id", "created_at", *stats_columns])
    op.create_index("ix_request_log_created", "request_log", ["created_at", "tenant_id", *stats_columns])
    op.create_index("ix_request_log_tenant_ttft", "request_log", ["tenant_id", "ttft_ms", "created_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_engine_stat_snapshots_created_at"), table_name="engine_stat_snapshots")
    op.drop_table("engine_stat_snapshots")
    op.drop_index("ix_request_log_tenant_ttft", table_name="request_log")
    op.drop_index("ix_request_log_created", table_name="request_log")
    op.drop_index("ix_request_log_tenant_created", table_name="request_log")
    op.drop_table("request_log")
    op.drop_index(op.f("ix_pins_tenant_id"), table_name="pins")
    op.drop_table("pins")
    op.drop_table("template_versions")
    op.drop_table("templates")
    op.drop_index(op.f("ix_api_keys_tenant_id"), table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_table("admin_keys")
    op.drop_table("tenants")
