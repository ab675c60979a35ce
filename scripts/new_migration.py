"""Write a new Alembic migration from the difference between models and schema.

usage: python scripts/new_migration.py "what changed"

It migrates a scratch SQLite file to the current head, then lets Alembic's
autogenerate compare it with bot/models.py.
"""

import sys
import tempfile
from pathlib import Path

from alembic import command

from bot import db


def main() -> None:
    message = sys.argv[1] if len(sys.argv) > 1 else "schema change"
    with tempfile.TemporaryDirectory() as tmp:
        engine = db.make_engine(f"sqlite:///{Path(tmp) / 'scratch.sqlite3'}")
        db.upgrade(engine)
        cfg = db.alembic_config(engine)
        # write into the source tree, not the installed copy
        cfg.set_main_option("script_location", str(Path(__file__).parent.parent / "migrations"))
        command.revision(cfg, message=message, autogenerate=True)


if __name__ == "__main__":
    main()
