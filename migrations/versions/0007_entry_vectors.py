"""entry vectors (issue 12): each entry's sentence vector, for the grouping's learned model

Revision ID: 0007
Revises: 0006
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'entry_vectors',
        sa.Column('entry_id', sa.Integer(), nullable=False),
        sa.Column('encoder', sa.String(length=100), nullable=False),
        sa.Column('vector', sa.LargeBinary(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['entry_id'], ['entries.id'], name=op.f('fk_entry_vectors_entry_id_entries'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('entry_id', name=op.f('pk_entry_vectors')),
    )


def downgrade() -> None:
    op.drop_table('entry_vectors')
