"""llm readings (issue 34): cached answers of the optional language model, its daily usage,
and the editor's section introductions

Revision ID: l1_llm_readings
Revises: t1_theme_choices
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = 'l1_llm_readings'
down_revision: str | None = 't1_theme_choices'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'llm_readings',
        sa.Column('key', sa.String(length=64), nullable=False),
        sa.Column('kind', sa.String(length=10), nullable=False),
        sa.Column('model', sa.String(length=200), nullable=False),
        sa.Column('answer', sa.JSON(), nullable=True),
        sa.Column('error', sa.String(length=300), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('key', name=op.f('pk_llm_readings')),
    )
    op.create_table(
        'llm_usage',
        sa.Column('day', sa.String(length=10), nullable=False),
        sa.Column('calls', sa.Integer(), nullable=False),
        sa.Column('cache_hits', sa.Integer(), nullable=False),
        sa.Column('last_success_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('last_failure_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('last_failure', sa.String(length=300), nullable=True),
        sa.PrimaryKeyConstraint('day', name=op.f('pk_llm_usage')),
    )
    op.create_table(
        'draft_intros',
        sa.Column('week', sa.String(length=10), nullable=False),
        sa.Column('section', sa.String(length=200), nullable=False),
        sa.Column('text', sa.Text(), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('week', 'section', name=op.f('pk_draft_intros')),
    )


def downgrade() -> None:
    op.drop_table('draft_intros')
    op.drop_table('llm_usage')
    op.drop_table('llm_readings')
