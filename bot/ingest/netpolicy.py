"""Which addresses a feed fetch may connect to: checked on the address each
connection actually goes to, at every redirect hop.

The rules (docs/security-network.md says why):

- never: link-local (169.254.0.0/16, fe80::/10), unspecified (0.0.0.0/8,
  ::), multicast, reserved and broadcast addresses, and the cloud metadata
  addresses (``METADATA``), whoever names them;
- a private or loopback address (10/8, 172.16/12, 192.168/16, 127/8, fc00::/7,
  100.64/10, ...) when the operator named it (an RSSHub in the same compose
  network), unless ``DIGESTBOT_FEED_PRIVATE=deny``; never after a public
  address in the same fetch (a public feed redirecting inwards);
- any public address.

How it is enforced: ``PolicyBackend`` is the httpcore network backend of the
fetch client. It resolves the host itself, checks every address, and connects
to a checked address (the IP, not the name: nothing resolves it a second time,
so a DNS answer that changes between check and connect changes nothing).
Keep-alive is off in that client, so every request of a redirect chain opens
its own connection and passes the check; the chain's memory (``Chain``: has a
public address been seen yet?) lives in a context variable set per fetch.

Pure except for ``system_resolver`` and ``PolicyBackend.connect_tcp``.
"""

from __future__ import annotations

import asyncio
import contextvars
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from bot.errors import FeedError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]

# Instance metadata services, which hand out cloud credentials: AWS, GCP,
# Azure, OpenStack, DigitalOcean, Oracle (169.254.169.254, also link-local),
# AWS over IPv6 and its ECS task endpoint, Azure's wire server, Alibaba Cloud.
METADATA = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "fd00:ec2::254", "168.63.129.16", "100.100.100.200",
))
UNSPECIFIED_V4 = ipaddress.ip_network("0.0.0.0/8")  # "this network": 0.x reaches this host on Linux

PUBLIC = "public"
PRIVATE = "private"
# a refused address: the rule that refuses it, as the error names it
METADATA_RULE = "a cloud metadata address is never fetched"
LINK_LOCAL_RULE = "a link-local address (169.254.0.0/16, fe80::/10) is never fetched"
UNSPECIFIED_RULE = "an unspecified address (0.0.0.0/8, ::) is never fetched"
MULTICAST_RULE = "a multicast address is never fetched"
RESERVED_RULE = "a reserved or broadcast address is never fetched"
DENIED_RULE = "a private or loopback address, and DIGESTBOT_FEED_PRIVATE=deny"
REDIRECT_RULE = "a redirect from a public address to a private or loopback one is refused"
SCHEME_RULE = "a redirect leads only to http(s), never to a local file or another scheme"


def classify(address: IPAddress) -> str:
    """``PUBLIC``, ``PRIVATE`` (loopback included) or the rule that refuses it."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or _ipv4_compatible(address)
        if embedded is not None:
            return classify(embedded)
    if address in METADATA:
        return METADATA_RULE
    if address.is_unspecified or (isinstance(address, ipaddress.IPv4Address)
                                  and address in UNSPECIFIED_V4):
        return UNSPECIFIED_RULE
    if address.is_link_local:
        return LINK_LOCAL_RULE
    if address.is_multicast:
        return MULTICAST_RULE
    if address.is_loopback:  # before "reserved": ::1 lies in the reserved ::/8
        return PRIVATE
    if address.is_reserved or address == ipaddress.IPv4Address("255.255.255.255"):
        return RESERVED_RULE
    if address.is_global:
        return PUBLIC
    return PRIVATE  # loopback, RFC 1918, unique-local, shared (100.64/10), documentation ranges


def _ipv4_compatible(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """``::a.b.c.d`` (deprecated, but the kernel still routes it as IPv4 on some systems)."""
    if int(address) >> 32 == 0 and int(address) > 1:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


class AddressRefused(FeedError):
    """The fetch policy refused to connect (or to follow a redirect)."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The host's addresses, from the system's resolver (getaddrinfo), in its order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class FetchPolicy:
    """The rules a fetch client applies. ``classify`` and ``resolver`` are there
    for the tests: a test treats a second loopback address as "public", or
    resolves a name to the metadata address, without any real network."""

    private: str = "allow"  # DIGESTBOT_FEED_PRIVATE: allow | deny
    resolver: Resolver = system_resolver
    classify: Callable[[IPAddress], str] = classify

    def verdict(self, address: IPAddress, chain: Chain) -> str | None:
        """None if ``address`` may be connected to now, else the rule that refuses it."""
        kind = self.classify(address)
        if kind == PUBLIC:
            return None
        if kind != PRIVATE:
            return kind
        if self.private == "deny":
            return DENIED_RULE
        if chain.public_seen:
            return REDIRECT_RULE + f" (after {chain.public_seen})"
        return None


@dataclass
class Chain:
    """One fetch's redirect chain, as the policy remembers it."""

    feed: str = ""  # the feed's URL, where the chain starts
    url: str = ""  # the request being made (the feed's URL, then each redirect's)
    public_seen: str | None = None  # the first public address connected to


CHAIN: contextvars.ContextVar[Chain] = contextvars.ContextVar("digestbot_fetch_chain")


def current_chain() -> Chain:
    """This fetch's chain; a fetch that set none gets one of its own (no memory)."""
    try:
        return CHAIN.get()
    except LookupError:
        chain = Chain()
        CHAIN.set(chain)
        return chain


class PolicyBackend(httpcore.AsyncNetworkBackend):
    """Resolve, check, then connect to the checked address (see the module docstring)."""

    def __init__(self, policy: FetchPolicy, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.policy = policy
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        chain = current_chain()
        candidates = await self._addresses(host, port)
        refused: list[tuple[IPAddress, str]] = []
        failure: Exception | None = None
        for address in candidates:
            rule = self.policy.verdict(address, chain)
            if rule is not None:
                refused.append((address, rule))
                continue
            try:
                stream = await self.inner.connect_tcp(str(address), port, timeout=timeout,
                                                      local_address=local_address,
                                                      socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
                continue
            if chain.public_seen is None and self.policy.classify(address) == PUBLIC:
                chain.public_seen = str(address)
            return stream
        if failure is not None:
            raise failure
        raise _refusal(host, port, refused, chain)

    async def _addresses(self, host: str, port: int) -> list[IPAddress]:
        try:
            return [ipaddress.ip_address(host.strip("[]"))]
        except ValueError:
            pass
        try:
            found = await self.policy.resolver(host, port)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from None
        addresses = []
        for item in found:
            try:
                addresses.append(ipaddress.ip_address(item.split("%", 1)[0]))
            except ValueError:
                continue
        if not addresses:
            raise httpcore.ConnectError(f"{host} has no address")
        return addresses

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        raise AddressRefused(f"refused to connect to the socket {path}", hint="feeds are fetched over TCP")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def _refusal(host: str, port: int, refused: list[tuple[IPAddress, str]], chain: Chain) -> AddressRefused:
    address, rule = refused[0]
    named = f"{address}" if str(address) == host.strip("[]") else f"{address} ({host})"
    where = f" (redirected to {chain.url})" if chain.url and chain.url != chain.feed else ""
    others = f"; and {len(refused) - 1} other address(es) of {host}" if len(refused) > 1 else ""
    if rule == DENIED_RULE:
        hint = "a feed on your own network is allowed when DIGESTBOT_FEED_PRIVATE is not deny"
    elif rule.startswith(REDIRECT_RULE):
        hint = ("a public feed may not send the bot into your own network; name the inner "
                "address yourself if you mean it")
    else:
        hint = "the bot never fetches these addresses; check the feed URL"
    return AddressRefused(f"refused to connect to {named} port {port}{where}: {rule}{others}",
                          hint=hint)


class PolicyTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with ``PolicyBackend`` under it and keep-alive off.

    httpx 0.28 takes no network backend (encode/httpx#3749 adds one); the pool
    it builds is replaced with one of the same settings and our backend."""

    def __init__(self, policy: FetchPolicy, *, verify: bool = True) -> None:
        super().__init__(verify=verify, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify, trust_env=False),
            max_connections=100, max_keepalive_connections=0,
            network_backend=PolicyBackend(policy))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        chain = current_chain()
        if request.url.scheme not in ("http", "https"):
            raise AddressRefused(f"refused to follow a redirect to {request.url}: {SCHEME_RULE}",
                                 hint="a local feed file is named by the operator, never by a server")
        chain.url = str(request.url)
        return await super().handle_async_request(request)
