"""What the digest and the site are called: DIGESTBOT_TITLE, else the first
feed's own title, else a neutral name in the edition's language.

The title is never a guess about the feed's field: a feed of database papers
is not an "RL Weekly". It is read where settings meet the database
(``titled``), so the CLI, the web app and each send name the digest alike.
"""

from __future__ import annotations

import dataclasses

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from bot.config import Settings
from bot.ingest.queries import first_feed_title


def digest_title(settings: Settings, session: Session) -> str:
    """DIGESTBOT_TITLE if set, else the first feed's own title, else the neutral default."""
    if settings.title:
        return settings.title
    return first_feed_title(session) or neutral_title(settings.language)


def neutral_title(language: str) -> str:
    """The name of a digest with no title and no titled feed ("Weekly digest")."""
    from bot.templating import default_title

    return default_title(language)


def titled(settings: Settings, factory: sessionmaker[Session]) -> Settings:
    """``settings`` with its title filled in (``digest_title``); a database
    that cannot be read yet (no schema) gives the neutral default."""
    if settings.title:
        return settings
    try:
        with factory() as session:
            title = digest_title(settings, session)
    except SQLAlchemyError:
        title = neutral_title(settings.language)
    return dataclasses.replace(settings, title=title)
