"""The one network guard: how a URL given to us by someone else is read, and which addresses we connect to.

Two features connect where they are told: webhook delivery (an operator's endpoint URL) and scanning a
photo by URL (a client's). Both parse the URL here, into the same `Target`, and both refuse addresses
that are not public with `is_public_address` (SSRF). The rules are the stricter of the two copies they
replace: port 0 and hosts whose last label is numeric but which are no valid IPv4 address are refused
for both. Each caller keeps its own words for a refusal (`URLRejected.reason` picks them) and its own
resolver (async for the scan, blocking for the deliverer's thread), and connects only to the addresses
it checked, never through a second lookup, so DNS rebinding cannot redirect it.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

Reason = Literal[
    "control", "unparsable", "port", "scheme", "userinfo", "no_host", "ipv6", "hostname", "numeric"
]


# What is wrong with a refused URL, as a sentence fragment; each caller words its audience's refusals
# from these, changing only what it says its own way.
PROBLEMS: dict[Reason, str] = {
    "control": "the URL contains spaces or control characters",
    "unparsable": "the URL could not be parsed",
    "port": "the URL's port is not valid",
    "scheme": "the URL's scheme is not accepted",
    "userinfo": "the URL must not contain a user name or password",
    "no_host": "the URL has no host",
    "ipv6": "the URL's IPv6 address is not valid",
    "hostname": "the URL's host name is not valid",
    "numeric": "the URL's host is not a valid host name or IPv4 address",
}


class URLRejected(ValueError):
    """A URL that may not be used, and why (`reason`); the caller words it for its own audience."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(reason)
        self.reason: Reason = reason


_EXTRA_BLOCKED_V4 = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",  # "this network"
        "100.64.0.0/10",  # shared address space (carrier-grade NAT)
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # TEST-NET-1
        "192.88.99.0/24",  # 6to4 relay anycast
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # TEST-NET-2
        "203.0.113.0/24",  # TEST-NET-3
        "240.0.0.0/4",  # reserved, incl. broadcast
    )
)
_EXTRA_BLOCKED_V6 = tuple(
    ipaddress.ip_network(n)
    for n in (
        "::/96",  # IPv4-compatible (deprecated), also :: and ::1
        "::ffff:0:0/96",  # IPv4-mapped
        "64:ff9b:1::/48",  # local-use NAT64
        "100::/64",  # discard-only
        "2001::/23",  # IETF protocol assignments, incl. Teredo 2001::/32
        "2001:db8::/32",  # documentation
        "fc00::/7",  # unique local
        "fec0::/10",  # site-local (deprecated)
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 address tunnels to (mapped, compatible, NAT64, 6to4, Teredo)."""
    found: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    packed = ip.packed
    if packed[:12] == bytes(12) or ip in _NAT64:
        found.append(ipaddress.IPv4Address(packed[12:]))
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    return found


def is_public_address(ip: IPAddress) -> bool:
    """True only for globally routable unicast addresses, including any IPv4 an IPv6 address embeds."""
    if getattr(ip, "scope_id", None):
        return False
    if (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_unspecified
        or ip.is_reserved
        or not ip.is_global
    ):
        return False
    if isinstance(ip, ipaddress.IPv4Address):
        return not any(ip in net for net in _EXTRA_BLOCKED_V4)
    if ip.is_site_local or any(ip in net for net in _EXTRA_BLOCKED_V6):
        return False
    return all(is_public_address(v4) for v4 in _embedded_ipv4(ip))


_HOSTNAME_RE = re.compile(r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$")
_NUMERIC_LABEL_RE = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")


def parse_host_literal(host: str) -> IPAddress | None:
    """The IP a host string denotes as a literal, read the way the C resolver would, else None.

    `inet_aton` semantics cover the decimal, hex, octal and short IPv4 forms (`2130706433`, `0x7f.1`,
    `0177.0.0.1`, `127.1`), which getaddrinfo would also accept as addresses. The caller must have
    validated the characters first: glibc's inet_aton ignores anything after a space.
    """
    try:
        return ipaddress.IPv6Address(host) if ":" in host else ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class Target:
    """Where a URL points, split so that a connection can go to a checked IP with the right Host/SNI."""

    scheme: str
    host: str  # ASCII host name, or the canonical text of an IP literal
    port: int
    path: str  # path plus query, as sent
    literal: IPAddress | None

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    def url_for(self, ip: IPAddress) -> str:
        """The URL with the host replaced by one of its checked addresses."""
        host = f"[{ip}]" if ip.version == 6 else str(ip)
        return f"{self.scheme}://{host}:{self.port}{self.path}"


def parse_url(url: str, schemes: Sequence[str]) -> Target:
    """Split and validate a URL of one of `schemes`, naming a sane host; `URLRejected` otherwise."""
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise URLRejected("control")
    try:
        parts = urlsplit(url)
        given_port = parts.port
    except ValueError:
        raise URLRejected("unparsable") from None
    if given_port == 0:  # `:0` is a port nothing listens on, not "no port"
        raise URLRejected("port")
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        raise URLRejected("scheme")
    port = given_port or (443 if scheme == "https" else 80)
    if "@" in parts.netloc:
        raise URLRejected("userinfo")
    host = parts.hostname or ""
    if not host:
        raise URLRejected("no_host")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    if parts.netloc.startswith("["):  # bracketed IPv6 literal
        try:
            literal: IPAddress | None = ipaddress.IPv6Address(host)
        except ValueError:
            raise URLRejected("ipv6") from None
        return Target(scheme, str(literal), port, path, literal)

    try:
        host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise URLRejected("hostname") from None
    host = host.removesuffix(".")
    if len(host) > 253 or not _HOSTNAME_RE.match(host):
        raise URLRejected("hostname")
    literal = parse_host_literal(host)
    if literal is not None:
        return Target(scheme, str(literal), port, path, literal)
    if _NUMERIC_LABEL_RE.match(host.rsplit(".", 1)[-1]):
        # Neither a valid IPv4 literal nor a DNS name (no top-level domain is numeric).
        raise URLRejected("numeric")
    return Target(scheme, host, port, path, None)


def addresses_of(infos: Iterable[tuple[Any, ...]]) -> list[IPAddress]:
    """The distinct addresses in `getaddrinfo` results, in the resolver's order."""
    addresses: list[IPAddress] = []
    for *_, sockaddr in infos:
        try:
            ip = ipaddress.ip_address(sockaddr[0])
        except ValueError:
            continue
        if ip not in addresses:
            addresses.append(ip)
    return addresses
