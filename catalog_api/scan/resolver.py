"""Resolving a scan URL's host name without borrowing anybody else's threads.

Before, the lookup was `loop.getaddrinfo`: a blocking call on asyncio's default executor (six threads on
two cores), which the database drivers also use to resolve their host when they reconnect. A resolver
that stops answering held one of those threads per URL scan for glibc's whole timeout, so a burst of URL
scans pointing at a stalling name server starved reconnects and every other `to_thread` user.

Two resolvers, one bound each, both under the fetch's overall deadline (`url_fetch.fetch_image_url`):

- `SystemResolver` (the default): `getaddrinfo` (the system's resolver, `/etc/hosts` and
  `/etc/resolv.conf`) on a small pool of its own threads; at most `QUEUED_LOOKUPS` lookups wait for or
  hold one of them, more are refused at once. A stalled lookup only ever delays other URL scans.
- `NameserverResolver` (`CARDCAT_SCAN_DNS_SERVERS`): asks the named servers itself, A and AAAA over UDP
  on the event loop (a stub resolver, no threads at all), each server for at most `ATTEMPT_S`. For an
  operator who wants scan lookups to go to a resolver of their choosing, and for the tests, which point
  it at a server that never answers.

Either way the answer is only a list of addresses: the caller checks every one of them against the
network guard (`catalog_api.kit.netguard`) and connects to those it checked.
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import socket
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from catalog_api.kit.netguard import IPAddress, addresses_of

# Threads of the system resolver's own pool (per worker process): lookups that are this many at once
# are already waiting on the network, not on the CPU.
LOOKUP_THREADS = 4
# Lookups queued for or running on those threads (per worker process); past it a scan URL is refused
# at once instead of queueing behind a stalled resolver. The scan cap (`scan_max_in_flight`) bounds it
# in practice; this keeps the resolver bounded wherever it is used.
QUEUED_LOOKUPS = 64
# How long `NameserverResolver` waits for one server's answers before asking the next (glibc's default
# per-try timeout).
ATTEMPT_S = 5.0
_A, _AAAA, _IN = 1, 28, 1


class Unresolvable(Exception):
    """The host could not be resolved (no such name, no answer, or too many lookups at once)."""


class Resolver(Protocol):
    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        """The host's addresses, in the resolver's order; `Unresolvable` when there are none."""
        ...


class SystemResolver:
    """`getaddrinfo` on a dedicated pool of `LOOKUP_THREADS` threads, `QUEUED_LOOKUPS` at most."""

    def __init__(self, threads: int = LOOKUP_THREADS, queued: int = QUEUED_LOOKUPS) -> None:
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="scan-dns")
        self.queued = queued
        self.pending = 0
        self.lock = threading.Lock()  # one resolver may serve several event loops (tests)

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        with self.lock:
            if self.pending >= self.queued:
                raise Unresolvable("too many lookups at once")
            self.pending += 1
        try:
            loop = asyncio.get_running_loop()
            # Cancelled by the fetch's deadline while still queued, a lookup never takes a thread.
            infos = await loop.run_in_executor(
                self.pool, lambda: socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            )
        except (socket.gaierror, UnicodeError, OSError) as error:
            raise Unresolvable(str(error)) from None
        finally:
            with self.lock:
                self.pending -= 1
        addresses = addresses_of(infos)
        if not addresses:
            raise Unresolvable("no addresses")
        return addresses


class NameserverResolver:
    """A stub resolver: A and AAAA queries over UDP to `servers` in turn, on the event loop."""

    def __init__(self, servers: list[tuple[IPAddress, int]], attempt_s: float = ATTEMPT_S) -> None:
        if not servers:
            raise ValueError("no name servers")
        self.servers = servers
        self.attempt_s = attempt_s

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        for server in self.servers:
            try:
                async with asyncio.timeout(self.attempt_s):  # cancelling the gather cancels both
                    found = await asyncio.gather(
                        _query(server, host, _A), _query(server, host, _AAAA), return_exceptions=True
                    )
            except TimeoutError:
                continue  # no answer: the next server
            if any(isinstance(result, BaseException) for result in found):
                continue  # refused, unreachable, or a reply we cannot read: the next server
            addresses = [ip for result in found if isinstance(result, list) for ip in result]
            if not addresses:
                raise Unresolvable("no addresses")
            return addresses
        raise Unresolvable("no name server answered")


def parse_servers(text: str) -> list[tuple[IPAddress, int]]:
    """`CARDCAT_SCAN_DNS_SERVERS`: comma-separated IP literals, each with an optional port
    (`10.0.0.2`, `10.0.0.2:5353`, `2001:db8::53`, `[2001:db8::53]:5353`); names are not accepted."""
    servers: list[tuple[IPAddress, int]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, port = item, 53
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = int(rest.removeprefix(":")) if rest else 53
        elif item.count(":") == 1:
            host, _, given = item.partition(":")
            port = int(given)
        if not 0 < port < 65536:
            raise ValueError(f"name server port out of range: {item}")
        servers.append((ipaddress.ip_address(host), port))
    return servers


def make_resolver(servers: str) -> Resolver:
    """The resolver the settings ask for: the named servers, else the system's."""
    return NameserverResolver(parse_servers(servers)) if servers.strip() else SystemResolver()


class _Answer(asyncio.DatagramProtocol):
    """Takes the first datagram carrying our query id (the socket is connected to the server, so only
    its datagrams arrive at all)."""

    def __init__(self, query_id: int, answered: asyncio.Future[bytes]) -> None:
        self.query_id, self.answered = query_id, answered

    def datagram_received(self, data: bytes, addr: object) -> None:
        if len(data) >= 2 and int.from_bytes(data[:2], "big") == self.query_id and not self.answered.done():
            self.answered.set_result(data)

    def error_received(self, exc: Exception) -> None:  # e.g. ICMP port unreachable
        if not self.answered.done():
            self.answered.set_exception(exc)


async def _query(server: tuple[IPAddress, int], host: str, qtype: int) -> list[IPAddress]:
    loop = asyncio.get_running_loop()
    query_id = secrets.randbits(16)
    answered: asyncio.Future[bytes] = loop.create_future()
    family = socket.AF_INET6 if server[0].version == 6 else socket.AF_INET
    transport, _ = await loop.create_datagram_endpoint(
        lambda: _Answer(query_id, answered), remote_addr=(str(server[0]), server[1]), family=family
    )
    try:
        transport.sendto(_question(query_id, host, qtype))
        return _addresses(await answered, query_id, qtype)
    finally:
        transport.close()


def _question(query_id: int, host: str, qtype: int) -> bytes:
    """A standard query, recursion desired, for `host` (an ASCII name the network guard validated)."""
    labels = [label.encode("ascii") for label in host.rstrip(".").split(".")]
    if any(not 0 < len(label) < 64 for label in labels):
        raise ValueError("a label of the host name is empty or longer than 63 bytes")
    name = b"".join(bytes([len(label)]) + label for label in labels) + b"\0"
    return struct.pack("!6H", query_id, 0x0100, 1, 0, 0, 0) + name + struct.pack("!2H", qtype, _IN)


def _addresses(reply: bytes, query_id: int, qtype: int) -> list[IPAddress]:
    """The A (or AAAA) records in a reply's answer section; ValueError for a reply we cannot read."""
    try:
        reply_id, flags, questions, answers, _, _ = struct.unpack_from("!6H", reply)
        if reply_id != query_id or not flags & 0x8000:
            raise ValueError("not the answer to our query")
        if flags & 0x0200:
            raise ValueError("truncated answer")  # a name with too many addresses for UDP: refused
        if flags & 0x000F:
            return []  # NXDOMAIN, refused, server failure: no addresses
        offset = 12
        for _ in range(questions):
            offset = _skip_name(reply, offset) + 4
        found: list[IPAddress] = []
        for _ in range(answers):
            offset = _skip_name(reply, offset)
            rtype, rclass, _ttl, length = struct.unpack_from("!2HIH", reply, offset)
            offset += 10
            data = reply[offset : offset + length]
            if len(data) != length:
                raise ValueError("record runs past the reply")
            offset += length
            if rclass != _IN or rtype != qtype:
                continue  # a CNAME on the way, or something else we did not ask for
            if qtype == _A and length == 4:
                found.append(ipaddress.IPv4Address(data))
            elif qtype == _AAAA and length == 16:
                found.append(ipaddress.IPv6Address(data))
        return found
    except (struct.error, IndexError):
        raise ValueError("malformed reply") from None


def _skip_name(reply: bytes, offset: int) -> int:
    """The offset just past the (possibly compressed) name at `offset`."""
    while True:
        length = reply[offset]
        if length & 0xC0 == 0xC0:
            return offset + 2
        if length & 0xC0:
            raise ValueError("unknown label type")
        offset += 1 + length
        if length == 0:
            return offset
