"""the editor's desk (issue 13): draft edits and approvals

Three tables keyed by the ISO week: ``draft_weeks`` (the editor's note,
section order, approval, and the scheduled send's hold and reminder),
``draft_entries`` (an entry left out of, or moved within, a week's draft)
and ``draft_sections`` (a section renamed for a week).

Revision ID: 0003
Revises: 0002
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'draft_weeks',
        sa.Column('week', sa.String(length=10), nullable=False),
        sa.Column('note', sa.Text(), nullable=False),
        sa.Column('section_order', sa.JSON(), nullable=False),
        sa.Column('approved_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('approved_by', sa.String(length=100), nullable=True),
        sa.Column('held_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('reminded_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('week', name=op.f('pk_draft_weeks')),
    )
    op.create_table(
        'draft_entries',
        sa.Column('week', sa.String(length=10), nullable=False),
        sa.Column('entry_id', sa.Integer(), nullable=False),
        sa.Column('excluded', sa.Boolean(), nullable=False),
        sa.Column('section', sa.String(length=200), nullable=True),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['entry_id'], ['entries.id'],
                                name=op.f('fk_draft_entries_entry_id_entries'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('week', 'entry_id', name=op.f('pk_draft_entries')),
    )
    op.create_index(op.f('ix_draft_entries_entry_id'), 'draft_entries', ['entry_id'], unique=False)
    op.create_table(
        'draft_sections',
        sa.Column('week', sa.String(length=10), nullable=False),
        sa.Column('section', sa.String(length=200), nullable=False),
        sa.Column('name', sa.String(length=200), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('week', 'section', name=op.f('pk_draft_sections')),
    )


def downgrade() -> None:
    op.drop_table('draft_sections')
    op.drop_index(op.f('ix_draft_entries_entry_id'), table_name='draft_entries')
    op.drop_table('draft_entries')
    op.drop_table('draft_weeks')
