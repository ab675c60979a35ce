"""The fetch policy (issue 32, item 5): which addresses a feed fetch may reach,
checked on the address each connection actually goes to, at every redirect hop.

Nothing here connects outside loopback (the suite's ``loopback_only`` guard
would fail the test): refusals are tested on resolved addresses, through a
resolver the test controls (a name that resolves to the metadata address), and
"public" is a second loopback address, 127.0.0.2, that a test-only
``classify`` calls public.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FEED_FIXTURE, FeedServer, OffLoopback, serving

from bot.cli import cli
from bot.config import load_settings
from bot.errors import ConfigError
from bot.ingest import fetch as fetching
from bot.ingest import netpolicy
from bot.ingest.netpolicy import PRIVATE, PUBLIC, FetchPolicy

RSS = b'<rss version="2.0"><channel><title>T</title><item><title>x</title></item></channel></rss>'


def options(**policy: object) -> fetching.FetchOptions:
    return fetching.FetchOptions(timeout=5, policy=FetchPolicy(**policy))  # type: ignore[arg-type]


def resolving(table: dict[str, list[str]], calls: list[str] | None = None) -> netpolicy.Resolver:
    """A resolver that knows only ``table`` (no DNS server is asked)."""
    async def resolve(host: str, port: int) -> list[str]:
        if calls is not None:
            calls.append(host)
        if host not in table:
            raise socket.gaierror(f"{host} is not in the test's table")
        return table[host]
    return resolve


def second_loopback_is_public(address: netpolicy.IPAddress) -> str:
    """The test's stand-in for the internet: 127.0.0.2 counts as public."""
    return PUBLIC if address == ipaddress.ip_address("127.0.0.2") else netpolicy.classify(address)


@pytest.fixture
def public_server() -> Iterator[FeedServer]:
    """A feed server on 127.0.0.2, "public" under ``second_loopback_is_public``."""
    with serving("127.0.0.2") as server:
        yield server


# --- the address rules, on resolved addresses ---------------------------------------------

@pytest.mark.parametrize(("address", "verdict"), [
    ("169.254.169.254", netpolicy.METADATA_RULE), ("fd00:ec2::254", netpolicy.METADATA_RULE),
    ("100.100.100.200", netpolicy.METADATA_RULE), ("168.63.129.16", netpolicy.METADATA_RULE),
    ("::ffff:169.254.169.254", netpolicy.METADATA_RULE),
    ("169.254.1.1", netpolicy.LINK_LOCAL_RULE), ("fe80::1", netpolicy.LINK_LOCAL_RULE),
    ("0.0.0.0", netpolicy.UNSPECIFIED_RULE), ("0.1.2.3", netpolicy.UNSPECIFIED_RULE),
    ("::", netpolicy.UNSPECIFIED_RULE),
    ("224.0.0.1", netpolicy.MULTICAST_RULE), ("ff02::1", netpolicy.MULTICAST_RULE),
    ("255.255.255.255", netpolicy.RESERVED_RULE), ("240.0.0.1", netpolicy.RESERVED_RULE),
    ("127.0.0.1", PRIVATE), ("127.5.6.7", PRIVATE), ("::1", PRIVATE), ("::ffff:127.0.0.1", PRIVATE),
    ("10.1.2.3", PRIVATE), ("172.18.0.2", PRIVATE), ("192.168.1.10", PRIVATE), ("fd12:3456::1", PRIVATE),
    ("100.64.0.1", PRIVATE),
    ("93.184.215.14", PUBLIC), ("2606:4700::1111", PUBLIC),
])
def test_each_address_is_classed_by_its_rule(address, verdict):
    assert netpolicy.classify(ipaddress.ip_address(address)) == verdict


def test_private_addresses_are_allowed_when_named_unless_denied_and_never_after_a_public_one():
    loopback, public = ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("93.184.215.14")
    fresh, after_public = netpolicy.Chain(), netpolicy.Chain(public_seen="93.184.215.14")
    assert FetchPolicy().verdict(loopback, fresh) is None
    assert FetchPolicy(private="deny").verdict(loopback, fresh) == netpolicy.DENIED_RULE
    assert FetchPolicy().verdict(loopback, after_public).startswith(netpolicy.REDIRECT_RULE)
    assert FetchPolicy().verdict(public, after_public) is None
    assert FetchPolicy().verdict(ipaddress.ip_address("169.254.169.254"), fresh) == netpolicy.METADATA_RULE


# --- real fetches (loopback only) ---------------------------------------------------------

def test_the_metadata_address_is_refused_without_connecting(loopback_only: OffLoopback):
    with pytest.raises(netpolicy.AddressRefused) as refused:
        fetching.fetch("http://169.254.169.254/latest/meta-data/", options())
    assert "169.254.169.254" in refused.value.message and "metadata" in refused.value.message
    assert refused.value.message.startswith("http://169.254.169.254/latest/meta-data/: ")
    assert refused.value.hint
    assert loopback_only.attempts == []  # the guard saw no attempt either


def test_a_name_that_resolves_to_the_metadata_address_is_refused(loopback_only: OffLoopback):
    policy = {"resolver": resolving({"feeds.rebind.test": ["169.254.169.254"],
                                     "v6.rebind.test": ["fe80::1%2", "fd00:ec2::254"]})}
    expected = {"http://feeds.rebind.test/rss":
                "169.254.169.254 (feeds.rebind.test) port 80: a cloud metadata address",
                "https://v6.rebind.test:8443/rss":
                "fe80::1 (v6.rebind.test) port 8443: a link-local address"}
    for url, named in expected.items():
        with pytest.raises(netpolicy.AddressRefused) as refused:
            fetching.fetch(url, options(**policy))
        assert named in refused.value.message, refused.value.message
    assert "1 other address(es) of v6.rebind.test" in refused.value.message
    assert loopback_only.attempts == []


def test_the_checked_address_is_the_one_connected_to(feed_server):
    """Resolved once, per connection: a second answer (rebinding) is never asked for."""
    feed_server.serve("/feed.xml", RSS)
    port = feed_server.httpd.server_port
    calls: list[str] = []
    answers = iter([["127.0.0.1"], ["169.254.169.254"]])

    async def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return next(answers)

    got = fetching.fetch(f"http://feeds.rebind.test:{port}/feed.xml", options(resolver=rebinding))
    assert got.body == RSS and calls == ["feeds.rebind.test"]
    assert feed_server.requests[0][1]["Host"] == f"feeds.rebind.test:{port}"
    # of a mixed answer, only the allowed address is tried
    mixed = resolving({"mixed.test": ["169.254.169.254", "127.0.0.1"]})
    assert fetching.fetch(f"http://mixed.test:{port}/feed.xml", options(resolver=mixed)).body == RSS


def test_a_redirect_from_a_public_address_to_loopback_is_refused(feed_server, public_server):
    feed_server.serve("/inner.xml", RSS)
    inner = feed_server.url("/inner.xml")
    outer = public_server.serve("/feed.xml", b"", status=302, headers={"Location": inner})
    fetch_options = options(classify=second_loopback_is_public)
    with fetching.make_client(fetch_options) as client:
        # the loopback feed named directly is fetched, and its connection is not reused later
        assert fetching.fetch(inner, fetch_options, client=client).body == RSS
        with pytest.raises(netpolicy.AddressRefused) as refused:
            fetching.fetch(outer, fetch_options, client=client)
    message = refused.value.message
    assert message.startswith(outer + ": refused to connect to 127.0.0.1 port")
    assert f"redirected to {inner}" in message and netpolicy.REDIRECT_RULE in message
    assert "(after 127.0.0.2)" in message
    assert [path for path, _ in feed_server.requests] == ["/inner.xml"]  # once, when named
    assert [path for path, _ in public_server.requests] == ["/feed.xml"]


def test_a_redirect_to_another_loopback_port_follows_only_from_a_loopback_origin(feed_server):
    with serving() as other:
        other.serve("/moved.xml", RSS)
        origin = feed_server.serve("/feed.xml", b"", status=301,
                                   headers={"Location": other.url("/moved.xml")})
        # the operator named a loopback host: its redirect within loopback is followed
        assert fetching.fetch(origin, options()).body == RSS
        # DIGESTBOT_FEED_PRIVATE=deny: not even the first hop
        with pytest.raises(netpolicy.AddressRefused, match="127.0.0.1 port .*DIGESTBOT_FEED_PRIVATE=deny"):
            fetching.fetch(origin, options(private="deny"))
        assert [path for path, _ in other.requests] == ["/moved.xml"]


def test_a_redirect_never_leads_to_a_local_file(feed_server, tmp_path):
    local = tmp_path / "secret.xml"
    local.write_bytes(RSS)
    for target in (local.as_uri(), "file:///etc/shadow"):
        url = feed_server.serve("/feed.xml", b"", status=302, headers={"Location": target})
        with pytest.raises(netpolicy.AddressRefused) as refused:
            fetching.fetch(url, options())
        assert "refused to follow a redirect to file:" in refused.value.message
        assert netpolicy.SCHEME_RULE in refused.value.message


def test_a_poll_records_the_refusal_with_the_address_and_the_rule(make_settings, fresh_db):
    from bot.ingest import poll_feeds

    settings = make_settings(feed_urls="http://169.254.169.254/latest/meta-data/")
    [result] = poll_feeds(settings, fresh_db.factory)
    assert result.status == "error"
    assert result.error is not None and "169.254.169.254" in result.error and "metadata" in result.error
    assert result.hint


def test_feed_private_is_allow_or_deny():
    assert load_settings({"DIGESTBOT_FEED_PRIVATE": "deny"}).feed_private == "deny"
    assert load_settings({}).feed_private == "allow"
    with pytest.raises(ConfigError, match="DIGESTBOT_FEED_PRIVATE"):
        load_settings({"DIGESTBOT_FEED_PRIVATE": "sometimes"})


# --- local files: only where the operator types them --------------------------------------

def test_an_opml_file_cannot_name_local_files(fresh_db, tmp_path, feed_server):
    local = tmp_path / "local.xml"
    local.write_bytes(FEED_FIXTURE.read_bytes())
    served = feed_server.serve("/a.xml", RSS)
    listing = tmp_path / "feeds.opml"
    listing.write_text(f"""<?xml version="1.0"?><opml version="2.0"><body>
      <outline text="shadow" xmlUrl="file:///etc/shadow"/>
      <outline text="local" xmlUrl="{local.as_uri()}"/>
      <outline text="bare" xmlUrl="{local}"/>
      <outline text="web" xmlUrl="{served}"/>
    </body></opml>""", encoding="utf-8")
    env = {"DIGESTBOT_DATABASE_URL": fresh_db.url}
    result = CliRunner().invoke(cli, ["feeds", "import", str(listing)], env=env)
    assert result.exit_code == 0, result.output
    assert "1 added, 0 restored, 0 already there, 3 skipped" in result.output
    assert result.output.count("is a local file path, refused here") == 3
    listed = CliRunner().invoke(cli, ["feeds", "list", "--format", "json"], env=env)
    assert [row["url"] for row in json.loads(listed.output)] == [served]
    # the same path typed by the operator is a feed
    typed = CliRunner().invoke(cli, ["feeds", "add", str(local)], env=env)
    assert typed.exit_code == 0 and "added feed" in typed.output


def test_a_local_path_from_elsewhere_is_refused_by_check_url(tmp_path):
    from bot.errors import BotError
    from bot.ingest.feeds import check_url

    path = str(tmp_path / "feed.xml")
    assert check_url(path) == str(Path(path).resolve())  # typed by the operator
    for url in (path, "file:///etc/shadow", "C:\\feeds\\x.xml"):
        with pytest.raises(BotError, match="local file path, refused here"):
            check_url(url, typed=False)
    assert check_url("https://example.org/feed", typed=False) == "https://example.org/feed"


# --- the suite's own guard ----------------------------------------------------------------

def test_the_suite_refuses_and_records_a_connection_outside_loopback(loopback_only: OffLoopback):
    before = len(loopback_only.attempts)
    with socket.socket() as sock, pytest.raises(PermissionError, match="loopback only"):
        sock.connect(("192.0.2.1", 9))

    async def through_asyncio() -> None:
        await asyncio.open_connection("192.0.2.2", 9)

    with pytest.raises(PermissionError):
        asyncio.run(through_asyncio())
    with pytest.raises(PermissionError):
        socket.create_connection(("192.0.2.3", 9), timeout=1)
    tried = loopback_only.attempts[before:]
    assert [t.split()[0] for t in tried] == ["'192.0.2.1'", "'192.0.2.2'", "'192.0.2.3'"]
    del loopback_only.attempts[before:]  # seen: this test is the one that must try
    with socket.socket() as sock:  # loopback is fine (nothing listens on port 9: refused)
        assert sock.connect_ex(("127.0.0.1", 9)) != 0
    assert loopback_only.attempts[before:] == []
