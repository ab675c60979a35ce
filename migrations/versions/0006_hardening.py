"""hardening (issue 10)

Revision ID: 0006
Revises: 0005
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # the web copy of a digest whose email shows only DIGESTBOT_MAX_ENTRIES entries
    with op.batch_alter_table('digests') as batch:
        batch.add_column(sa.Column('archive_html', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('digests') as batch:
        batch.drop_column('archive_html')
