"""theme choices (issue 36): the themes each reader chose, the choice each
ledger row was made with, and each digest's copy per distinct choice

``subscribers.themes`` and ``deliveries.themes`` hold a canonical choice:
theme keys, sorted, joined by commas; NULL means every section. A row
created before this migration has NULL, so it goes out as before. A
``digest_variants`` row with ``copy_of`` set holds no copy of its own: its
choice gets the same copy as that one's (the same sections that week).

Revision ID: t1_theme_choices
Revises: 0009
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = 't1_theme_choices'
down_revision: str | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('subscribers') as batch:
        batch.add_column(sa.Column('themes', sa.Text(), nullable=True))
    with op.batch_alter_table('deliveries') as batch:
        batch.add_column(sa.Column('themes', sa.Text(), nullable=True))
    op.create_table(
        'digest_variants',
        sa.Column('digest_id', sa.Integer(), nullable=False),
        sa.Column('themes', sa.String(length=1000), nullable=False),
        sa.Column('subject', sa.String(length=500), nullable=False),
        sa.Column('html', sa.Text(), nullable=False),
        sa.Column('text', sa.Text(), nullable=False),
        sa.Column('copy_of', sa.String(length=1000), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['digest_id'], ['digests.id'], ondelete='CASCADE',
                                name=op.f('fk_digest_variants_digest_id_digests')),
        sa.PrimaryKeyConstraint('digest_id', 'themes', name=op.f('pk_digest_variants')),
    )


def downgrade() -> None:
    op.drop_table('digest_variants')
    with op.batch_alter_table('deliveries') as batch:
        batch.drop_column('themes')
    with op.batch_alter_table('subscribers') as batch:
        batch.drop_column('themes')
