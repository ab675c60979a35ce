"""deliverability (issue 14): bounces and complaints

- ``mailbox_messages``: every mail read from the bounce mailbox, once, with
  what it was taken for (bounce, delayed, complaint, unsubscribe, ignored)
- ``deliveries.feedback`` / ``feedback_at``: what came back after the relay
  took a message; an index on ``deliveries.message_id``, which bounces name
- ``subscribers.complained_at`` / ``status_reason`` (the state 'complained'
  needs no schema change: ``status`` is a string)

Revision ID: 0004
Revises: 0003
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('subscribers') as batch:
        batch.add_column(sa.Column('complained_at', sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column('status_reason', sa.String(length=20), nullable=True))
    with op.batch_alter_table('deliveries') as batch:
        batch.add_column(sa.Column('feedback', sa.String(length=20), nullable=True))
        batch.add_column(sa.Column('feedback_at', sa.DateTime(timezone=True), nullable=True))
        batch.create_index(batch.f('ix_deliveries_message_id'), ['message_id'], unique=False)
    op.create_table(
        'mailbox_messages',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('key', sa.String(length=64), nullable=False),
        sa.Column('kind', sa.String(length=20), nullable=False),
        sa.Column('message_id', sa.String(length=300), nullable=True),
        sa.Column('sender', sa.String(length=320), nullable=True),
        sa.Column('subject', sa.String(length=500), nullable=True),
        sa.Column('address', sa.String(length=320), nullable=True),
        sa.Column('subscriber_id', sa.Integer(), nullable=True),
        sa.Column('digest_id', sa.Integer(), nullable=True),
        sa.Column('detail', sa.Text(), nullable=True),
        sa.Column('processed_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['subscriber_id'], ['subscribers.id'],
                                name=op.f('fk_mailbox_messages_subscriber_id_subscribers'),
                                ondelete='SET NULL'),
        sa.ForeignKeyConstraint(['digest_id'], ['digests.id'],
                                name=op.f('fk_mailbox_messages_digest_id_digests'),
                                ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_mailbox_messages')),
        sa.UniqueConstraint('key', name=op.f('uq_mailbox_messages_key')),
    )
    op.create_index(op.f('ix_mailbox_messages_kind'), 'mailbox_messages', ['kind'], unique=False)
    op.create_index(op.f('ix_mailbox_messages_subscriber_id'), 'mailbox_messages',
                    ['subscriber_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_mailbox_messages_subscriber_id'), table_name='mailbox_messages')
    op.drop_index(op.f('ix_mailbox_messages_kind'), table_name='mailbox_messages')
    op.drop_table('mailbox_messages')
    with op.batch_alter_table('deliveries') as batch:
        batch.drop_index(batch.f('ix_deliveries_message_id'))
        batch.drop_column('feedback_at')
        batch.drop_column('feedback')
    with op.batch_alter_table('subscribers') as batch:
        batch.drop_column('status_reason')
        batch.drop_column('complained_at')
