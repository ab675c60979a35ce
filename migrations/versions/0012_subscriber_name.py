"""subscriber names and section descriptions (issue 35)

- ``subscribers.name``: an optional name, from a CSV import's ``name`` column
  or the console; exported and shown in the console, never required.
- ``draft_sections.description``: the editor's description of a section for
  one week (NULL: the theme's own; "" : none). A row may now carry only a
  description, so ``name`` "" means "not renamed".

Revision ID: o1_subscriber_name
Revises: l1_llm_readings
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = 'o1_subscriber_name'
down_revision: str | None = 'l1_llm_readings'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('subscribers') as batch:
        batch.add_column(sa.Column('name', sa.String(length=200), nullable=True))
    with op.batch_alter_table('draft_sections') as batch:
        batch.add_column(sa.Column('description', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('draft_sections') as batch:
        batch.drop_column('description')
    with op.batch_alter_table('subscribers') as batch:
        batch.drop_column('name')
