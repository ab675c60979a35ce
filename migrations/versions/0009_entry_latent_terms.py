"""entry latent terms (issue 12): beside each sentence vector, the encoder's strongest latent terms

A stored vector without them is read again by the next poll (both are stored
together), so a database upgraded from 0008 fills the column on its own.

Revision ID: 0009
Revises: 0008
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('entry_vectors') as batch:
        batch.add_column(sa.Column('latent', sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('entry_vectors') as batch:
        batch.drop_column('latent')
