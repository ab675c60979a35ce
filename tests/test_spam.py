"""A real digest and a real confirmation mail, as the bot writes them (DKIM
signed, in both languages), scored by SpamAssassin with local rules only
(``spamassassin -L -t``, Debian's package): no rule that the content or
headers could avoid may fire. The rules hit are printed either way.

Allowed are only rules about how the test reaches SpamAssassin (straight
from the outbox, not through a relay: no Received headers) and the 0-point
note that the mail has an HTML part.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import BASE_URL, FROM_ADDR, REPLY_TO, FreshDB
from smtp import add_subscribers
from test_digest import poll_fixture

from bot import mailer, subscribers, subscriptions
from bot.config import Settings
from bot.mailer import dkim
from bot.send import send_digest
from bot.tokens import Tokens

UNAVOIDABLE = {
    "NO_RECEIVED",  # informational (-0.0): the test scores the mail before any server saw it
    "NO_RELAYS",  # informational (-0.0): likewise, no relay
    "HTML_MESSAGE",  # 0.0: it has an HTML part, as a newsletter does
}

pytestmark = pytest.mark.skipif(shutil.which("spamassassin") is None,
                                reason="spamassassin is not installed (sh scripts/install-system-deps.sh "
                                       "installs Debian's package)")


def score(path: Path, home: Path) -> tuple[set[str], str]:
    """The rules ``spamassassin -L -t`` hits on a message, and its report.

    HOME is a fresh folder: SpamAssassin keeps per-user Bayes data there and
    learns from what it scores, which would make one run depend on the last.
    """
    home.mkdir(exist_ok=True)
    with path.open("rb") as fh:
        result = subprocess.run(["spamassassin", "-L", "-t"], stdin=fh, capture_output=True,
                                timeout=300, env={"HOME": str(home), "PATH": "/usr/bin:/bin"})
    output = result.stdout.decode("utf-8", "replace")
    status = re.search(r"^X-Spam-Status: (.*?)\n(?!\s)", output, re.M | re.S)
    assert status, output[-2000:] + result.stderr.decode(errors="replace")
    tests = re.search(r"tests=(.*?)\s+autolearn=", " ".join(status.group(1).split()))
    rules = {r for r in (tests.group(1) if tests else "").replace(" ", "").split(",") if r and r != "none"}
    report = output[output.find("Content analysis details"):]
    return rules, report


@pytest.mark.parametrize("language", ["zh", "en"])
def test_digest_and_confirmation_trigger_no_avoidable_rule(
        language: str, fresh_db: FreshDB, tmp_path: Path,
        make_settings: Callable[..., Settings]) -> None:
    key = tmp_path / "dkim.pem"
    dkim.write_key(key, dkim.generate_key())
    settings = make_settings(base_url=BASE_URL, from_addr=FROM_ADDR, reply_to=REPLY_TO,
                             language=language, dkim_key_file=str(key),
                             bounce_address="bounces@news.example.org", verp="true")
    poll_fixture(settings, fresh_db.factory)
    add_subscribers(fresh_db.factory, ["reader@example.com"])
    add_subscribers(fresh_db.factory, ["new.reader@example.com"], status="pending")
    assert send_digest(settings, fresh_db.factory, "2026-W40").sent == 1
    outbox = Path(settings.outbox_dir)
    [digest_file] = list(outbox.glob("*.eml"))
    with fresh_db.factory() as session:
        pending = subscribers.subscriber_by_key(session, "new.reader@example.com")
        assert pending is not None
        sender = mailer.make_sender(settings)
        subscriptions.send_confirmation(settings, Tokens.from_settings(settings), sender, pending)
        sender.close()
    [confirm_file] = [p for p in outbox.glob("*.eml") if p != digest_file]

    failures = []
    for what, path in (("digest", digest_file), ("confirmation", confirm_file)):
        assert b"DKIM-Signature:" in path.read_bytes()
        rules, report = score(path, tmp_path / f"home-{what}")
        print(f"--- {language} {what}: {sorted(rules)}\n{report}")
        avoidable = rules - UNAVOIDABLE
        if avoidable:
            failures.append(f"{what}: {sorted(avoidable)}\n{report}")
    assert not failures, "avoidable SpamAssassin rules hit:\n" + "\n".join(failures)
