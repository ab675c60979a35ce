"""several instances (issue 16): send claims with leases, named leases, shared rate limits

Revision ID: 0005
Revises: 0004
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('deliveries') as batch:
        batch.add_column(sa.Column('claimed_by', sa.String(length=200), nullable=True))
        batch.add_column(sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True))
    # the whole-digest send lock gives way to claims on rows (bot.send.claims)
    with op.batch_alter_table('digests') as batch:
        batch.drop_column('lock_owner')
        batch.drop_column('lock_expires_at')
    op.create_table(
        'leases',
        sa.Column('name', sa.String(length=100), nullable=False),
        sa.Column('owner', sa.String(length=200), nullable=False),
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('name', name=op.f('pk_leases')),
    )
    op.create_table(
        'rate_hits',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('bucket', sa.String(length=300), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_rate_hits')),
    )
    op.create_index(op.f('ix_rate_hits_bucket'), 'rate_hits', ['bucket'], unique=False)
    op.create_index(op.f('ix_rate_hits_at'), 'rate_hits', ['at'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_rate_hits_at'), table_name='rate_hits')
    op.drop_index(op.f('ix_rate_hits_bucket'), table_name='rate_hits')
    op.drop_table('rate_hits')
    op.drop_table('leases')
    with op.batch_alter_table('digests') as batch:
        batch.add_column(sa.Column('lock_owner', sa.String(length=100), nullable=True))
        batch.add_column(sa.Column('lock_expires_at', sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table('deliveries') as batch:
        batch.drop_column('lease_until')
        batch.drop_column('claimed_by')
