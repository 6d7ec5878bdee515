"""The doctor's covering index also holds the system-prefix key (system_hash, tools_hash), so its
isolation figures (first sightings per system prefix) and its count of distinct tool lists read
the index alone, as its loss sums already do, instead of one table row per request in the window.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_DOCTOR_INDEX = (
    "tenant_id", "created_at", "canonicalized", "was_canonical", "miss_cause", "sections_found", "dynamic_patterns",
    "prompt_tokens", "cached_tokens", "shadow_cached_tokens", "canonical_cached_tokens", "canonical_prompt_tokens",
    "static_prefix_tokens", "system_prefix_tokens",
)
NEW_DOCTOR_INDEX = (*OLD_DOCTOR_INDEX, "system_hash", "tools_hash")


def recreate_doctor_index(columns: tuple[str, ...]) -> None:
    op.drop_index("ix_request_log_doctor", table_name="request_log")
    op.create_index("ix_request_log_doctor", "request_log", list(columns))


def upgrade() -> None:
    recreate_doctor_index(NEW_DOCTOR_INDEX)


def downgrade() -> None:
    recreate_doctor_index(OLD_DOCTOR_INDEX)
