"""Send benchmark for themes per reader (issue 36): the same send with and without choices.

Target, in one run: 3,000 confirmed subscribers, a third of them with a theme
choice; the send (digest built, rendered, frozen and delivered, as
`digestbot send` does it) reaches >= 80 % of the messages per second of the
same send where nobody chose.

The choices are drawn at random (fixed seed) from the themes file: one to
three themes each, so they are many and mostly different, the worst case for
"one render per distinct copy". Same harness as bench/send.py: an aiosmtpd
sink in its own process, each send a fresh child process on a fresh copy of
the database, one SMTP connection; the two sends take turns, three times,
and each side's best turn counts (the least disturbed by other work).
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from common import Row, run_standalone  # noqa: E402
from send import BOT_RUN, SERVER, WEEK, _env, child, setup_db  # noqa: E402

N = 3_000
TURNS = 3


def add_choices(url: str, share: float = 1 / 3, seed: int = 36) -> int:
    """Give every third subscriber 1-3 random themes; returns how many distinct choices."""
    from sqlalchemy import select

    from bot import choices, db
    from bot.models import Subscriber
    from bot.themes import load_themes

    keys = choices.theme_keys(load_themes(None))
    rng = random.Random(seed)
    engine = db.make_engine(url)
    chosen: set[str] = set()
    with db.transaction(db.session_factory(engine)) as session:
        subs = session.scalars(select(Subscriber).order_by(Subscriber.id)).all()
        for sub in subs[:: round(1 / share)]:
            sub.themes = choices.encode(rng.sample(keys, rng.randint(1, 3)))
            chosen.add(str(sub.themes))
    engine.dispose()
    return len(chosen)


def run() -> list[Row]:
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        with tempfile.TemporaryDirectory() as tmp:
            plain_db, chosen_db = Path(tmp) / "plain.sqlite3", Path(tmp) / "chosen.sqlite3"
            setup_db(plain_db, N)
            shutil.copy(plain_db, chosen_db)
            distinct = add_choices(f"sqlite:///{chosen_db}")
            plain_rates, chosen_rates = [], []
            for turn in range(TURNS):
                for source, rates in ((plain_db, plain_rates), (chosen_db, chosen_rates)):
                    fresh = Path(tmp) / f"turn{turn}-{source.name}"
                    shutil.copy(source, fresh)  # a fresh, unsent copy for every turn
                    result = child(BOT_RUN, _env(f"sqlite:///{fresh}", port), WEEK)
                    assert result["sent"] == N, result
                    rates.append(N / result["seconds"])
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    plain, chosen = max(plain_rates), max(chosen_rates)
    share = chosen / plain
    turns = ", ".join(f"{p:.0f}/{c:.0f}" for p, c in zip(plain_rates, chosen_rates, strict=True))
    return [
        Row("choices", f"N={N:,}, nobody chose: whole send", f"{plain:.0f} msg/s", "baseline", True),
        Row("choices", f"N={N:,}, a third chose ({distinct} distinct choices)", f"{chosen:.0f} msg/s",
            "", True),
        Row("choices", "the turns: without / with choices, msg/s", turns, "", True),
        Row("choices", "share of the send without choices", f"{share:.0%}", ">= 80 %", share >= 0.8),
    ]


if __name__ == "__main__":
    run_standalone(run)
