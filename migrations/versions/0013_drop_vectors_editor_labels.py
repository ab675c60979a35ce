"""drop the sentence vectors (issue 33), keep the editor's placements as labels

The grouping no longer reads a sentence encoder (it cost 0.5 s of CPU an entry for less than
it added, docs/grouping.md), so the stored vectors go. The editor's `draft move` and
`exclude` are kept per feed in ``editor_labels``, which the grouping's editor reader follows.

Revision ID: g1_drop_vectors
Revises: o1_subscriber_name
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = 'g1_drop_vectors'
down_revision: str | None = 'o1_subscriber_name'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_table('entry_vectors')
    op.create_table(
        'editor_labels',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('feed_id', sa.Integer(), nullable=True),
        sa.Column('entry_id', sa.Integer(), nullable=True),
        sa.Column('week', sa.String(length=10), nullable=False),
        sa.Column('action', sa.String(length=10), nullable=False),
        sa.Column('section', sa.String(length=300), nullable=False),
        sa.Column('theme_key', sa.String(length=200), nullable=True),
        sa.Column('title', sa.Text(), nullable=False),
        sa.Column('summary', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['feed_id'], ['feeds.id'], name=op.f('fk_editor_labels_feed_id_feeds'),
                                ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['entry_id'], ['entries.id'], name=op.f('fk_editor_labels_entry_id_entries'),
                                ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_editor_labels')),
    )
    op.create_index(op.f('ix_editor_labels_feed_id'), 'editor_labels', ['feed_id'])


def downgrade() -> None:
    op.drop_index(op.f('ix_editor_labels_feed_id'), table_name='editor_labels')
    op.drop_table('editor_labels')
    op.create_table(
        'entry_vectors',
        sa.Column('entry_id', sa.Integer(), nullable=False),
        sa.Column('encoder', sa.String(length=100), nullable=False),
        sa.Column('vector', sa.LargeBinary(), nullable=False),
        sa.Column('latent', sa.LargeBinary(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['entry_id'], ['entries.id'], name=op.f('fk_entry_vectors_entry_id_entries'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('entry_id', name=op.f('pk_entry_vectors')),
    )
