"""Scan intake: turn a `POST /v1/scan` request into the photo's bytes without trusting anything in it.

The two request shapes of the spec are handled here: a multipart upload (file field `image`) and a JSON
`{"url": ...}` that we fetch ourselves. Both are capped at 10 MB while streaming, photos never touch the
disk and are never logged, and URL fetches only ever reach public addresses (SSRF). Checking and
decoding the pixels is `serve_app.decoding`'s (bombs refused from the header, in the ingress and again
in the scanner).
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
import re
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, urlsplit

import certifi
import httpx
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

from catalog_api.kit.errors import (
    APIError,
    BadRequest,
    PayloadTooLarge,
    URLFetchFailed,
    URLNotAllowed,
)
from catalog_api.kit.photo import MAX_IMAGE_BYTES

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Multipart framing (boundaries, part headers, small extra fields) on top of the image itself.
MULTIPART_OVERHEAD_BYTES = 64 * 1024
# A JSON scan body only carries a URL; nothing legitimate comes close to this.
MAX_JSON_BYTES = 64 * 1024
# Sent with a 413: we stop reading mid-body, and without it uvicorn keeps draining the rest of the upload
# while the client, still sending, never sees the answer.
_CLOSE = {"Connection": "close"}


@dataclass(frozen=True)
class FetchPolicy:
    """How a scan URL may be fetched. The defaults are the spec's; tests loosen only what they must."""

    timeout_s: float = 10.0
    max_bytes: int = MAX_IMAGE_BYTES
    # ONLY for tests: networks exempt from the public-address rule (e.g. 127.0.0.1/32 for a local server).
    allowed_networks: tuple[IPNetwork, ...] = ()
    # Extra CA bundle trusted on top of the public roots (the tests' self-signed server).
    ca_file: str | None = None


def _size_text(n: int) -> str:
    return f"{n // (1024 * 1024)} MB" if n % (1024 * 1024) == 0 else f"{n} bytes"


# --------------------------------------------------------------------------------------------------
# Request body


async def read_scan_upload(request: Request, policy: FetchPolicy) -> bytes:
    """Return the raw image bytes of a scan request, whichever of the two spec shapes it uses.

    multipart/form-data with a file in field `image`, or application/json `{"url": "..."}` (fetched under
    `policy`); anything else is a BadRequest. Extra form fields and JSON keys are ignored.
    """
    media_type, params = parse_options_header(request.headers.get("content-type", ""))
    media_type = media_type.strip()
    if media_type == b"multipart/form-data":
        return await _read_multipart(request, params.get(b"boundary", b""), policy.max_bytes)
    if media_type == b"application/json":
        url = await _read_json_url(request)
        return await fetch_image_url(url, policy)
    raise BadRequest(
        "The scan body must be multipart/form-data with the photo in the file field `image`, "
        'or application/json of the form {"url": "https://..."}.'
    )


def _declared_length(request: Request) -> int | None:
    raw = request.headers.get("content-length")
    if raw is None:
        return None
    raw = raw.strip()
    if not (raw.isascii() and raw.isdigit()):
        raise BadRequest("The Content-Length header is not a valid number.")
    return int(raw)


async def _read_capped(request: Request, limit: int, too_large: APIError) -> AsyncIterator[bytes]:
    """Yield body chunks, raising `too_large` as soon as more than `limit` bytes have arrived.

    Checking the declared Content-Length first answers an oversized upload before reading any of it.
    """
    declared = _declared_length(request)
    if declared is not None and declared > limit:
        raise too_large
    total = 0
    try:
        async for chunk in request.stream():
            total += len(chunk)
            if total > limit:
                raise too_large
            if chunk:
                yield chunk
    except ClientDisconnect:
        raise BadRequest("The request body ended before it was complete.") from None


async def _read_json_url(request: Request) -> str:
    too_large = PayloadTooLarge(
        f'The JSON body is larger than {MAX_JSON_BYTES // 1024} KiB; it should only hold {{"url": "..."}}.',
        headers=dict(_CLOSE),
    )
    body = bytearray()
    async for chunk in _read_capped(request, MAX_JSON_BYTES, too_large):
        body += chunk
    try:
        payload = json.loads(bytes(body))
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("The request body is not valid JSON.") from None
    except RecursionError:  # `[[[[...` nested past the parser's depth: 64 KiB holds thousands of levels
        raise BadRequest("The request body is nested too deeply to be the expected JSON.") from None
    if not isinstance(payload, dict) or "url" not in payload:
        raise BadRequest('The JSON body must be an object with a "url" key.')
    url = payload["url"]
    if not isinstance(url, str) or not url.strip():
        raise BadRequest('The "url" in the JSON body must be a non-empty string.')
    return url.strip()


class _ImagePartCollector:
    """Multipart callbacks keeping only the first `image` part in memory; every other part is dropped."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.image: bytearray | None = None
        self.too_large = False
        self.finished = False
        self._in_image = False
        self._field = bytearray()
        self._value = bytearray()
        self._disposition = b""

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self._part_begin,
            "on_header_field": lambda d, s, e: self._field.extend(d[s:e]),
            "on_header_value": lambda d, s, e: self._value.extend(d[s:e]),
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
            "on_end": self._end,
        }

    def _part_begin(self) -> None:
        self._disposition = b""
        self._field.clear()
        self._value.clear()

    def _header_end(self) -> None:
        if bytes(self._field).strip().lower() == b"content-disposition":
            self._disposition = bytes(self._value)
        self._field.clear()
        self._value.clear()

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        self._in_image = options.get(b"name") == b"image" and self.image is None
        if self._in_image:
            self.image = bytearray()

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if not self._in_image or self.too_large:
            return
        assert self.image is not None
        if len(self.image) + (end - start) > self.max_bytes:
            self.too_large = True  # stop buffering; the caller raises after this write
            return
        self.image.extend(data[start:end])

    def _part_end(self) -> None:
        self._in_image = False

    def _end(self) -> None:
        self.finished = True


async def _read_multipart(request: Request, boundary: bytes, max_bytes: int) -> bytes:
    """Stream-parse the multipart body in memory (never Starlette's disk-spooling form parser)."""
    if not boundary:
        raise BadRequest("The multipart Content-Type header has no boundary.")
    too_large = PayloadTooLarge(f"The image is larger than {_size_text(max_bytes)}.", headers=dict(_CLOSE))
    collector = _ImagePartCollector(max_bytes)
    try:
        parser = MultipartParser(boundary, collector.callbacks())
        async for chunk in _read_capped(request, max_bytes + MULTIPART_OVERHEAD_BYTES, too_large):
            parser.write(chunk)
            if collector.too_large:
                raise too_large
        parser.finalize()
    except FormParserError:
        raise BadRequest("The multipart body is malformed.") from None
    if collector.image is None:
        raise BadRequest("The multipart body has no file in the field `image`.")
    if not collector.finished:
        raise BadRequest("The multipart body ended before its closing boundary.")
    if not collector.image:
        raise BadRequest("The uploaded image file is empty.")
    return bytes(collector.image)


# --------------------------------------------------------------------------------------------------
# URL checks (pure functions: no network I/O)

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


def _address_allowed(ip: IPAddress, policy: FetchPolicy) -> bool:
    return any(ip in net for net in policy.allowed_networks) or is_public_address(ip)


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
class _Target:
    host: str  # ASCII host name, or the canonical text of an IP literal
    port: int
    path: str  # path plus query, as sent
    literal: IPAddress | None

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == 443 else f"{host}:{self.port}"


def _parse_url(url: str) -> _Target:
    """Split and validate a scan URL; refuses anything but a plain https URL naming a sane host."""
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise URLNotAllowed("The URL contains spaces or control characters.")
    try:
        parts: SplitResult = urlsplit(url)
        given_port = parts.port
    except ValueError:
        raise URLNotAllowed("The URL could not be parsed.") from None
    if given_port == 0:  # `:0` is a port nothing listens on, not "no port" (which is 443)
        raise URLNotAllowed("The URL's port is not valid.")
    port = 443 if given_port is None else given_port
    if parts.scheme.lower() != "https":
        raise URLNotAllowed("Only https URLs can be scanned.")
    if "@" in parts.netloc:
        raise URLNotAllowed("The URL must not contain a user name or password.")
    host = parts.hostname or ""
    if not host:
        raise URLNotAllowed("The URL has no host.")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    if parts.netloc.startswith("["):  # bracketed IPv6 literal
        try:
            literal: IPAddress | None = ipaddress.IPv6Address(host)
        except ValueError:
            raise URLNotAllowed("The URL's IPv6 address is not valid.") from None
        return _Target(str(literal), port, path, literal)

    try:
        host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise URLNotAllowed("The URL's host name is not valid.") from None
    host = host.removesuffix(".")
    if len(host) > 253 or not _HOSTNAME_RE.match(host):
        raise URLNotAllowed("The URL's host name is not valid.")
    literal = parse_host_literal(host)
    if literal is not None:
        return _Target(str(literal), port, path, literal)
    if _NUMERIC_LABEL_RE.match(host.rsplit(".", 1)[-1]):
        # Neither a valid IPv4 literal nor a DNS name (no top-level domain is numeric).
        raise URLNotAllowed("The URL's host is not a valid host name or IPv4 address.")
    return _Target(host, port, path, None)


async def _resolve(target: _Target) -> list[IPAddress]:
    """Resolve the host once; this exact list is what gets checked and then connected to."""
    if target.literal is not None:
        return [target.literal]
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError):
        raise URLFetchFailed(f"The host {target.host} could not be resolved.") from None
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        ip = ipaddress.ip_address(sockaddr[0])
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise URLFetchFailed(f"The host {target.host} could not be resolved.")
    return addresses


# --------------------------------------------------------------------------------------------------
# URL fetch


@functools.lru_cache(maxsize=8)
def _ssl_context(ca_file: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=certifi.where())
    if ca_file:
        ctx.load_verify_locations(cafile=ca_file)
    return ctx


async def fetch_image_url(url: str, policy: FetchPolicy) -> bytes:
    """Fetch a scan image from a public https URL under the spec's rules.

    The host is resolved once and every address must be public (else URLNotAllowed); the connection goes
    to a checked address, never through a second lookup, so DNS rebinding cannot redirect it. No redirects,
    a single deadline over resolve+connect+TLS+body, and the size cap enforced while streaming.
    """
    target = _parse_url(url)
    try:
        async with asyncio.timeout(policy.timeout_s):
            addresses = await _resolve(target)
            if not all(_address_allowed(ip, policy) for ip in addresses):
                raise URLNotAllowed(f"The host {target.host} resolves to a non-public address.")
            return await _fetch_pinned(target, addresses, policy)
    except TimeoutError:
        raise URLFetchFailed(
            f"Fetching the URL took longer than {policy.timeout_s:g} seconds and was stopped."
        ) from None


async def _fetch_pinned(target: _Target, addresses: list[IPAddress], policy: FetchPolicy) -> bytes:
    """GET `target` from the given (already checked) addresses in turn, with Host and SNI = the host name.

    TLS is verified against the host name (httpcore's `sni_hostname` extension sets server_hostname),
    while the TCP connection goes to the IP in the request URL. Proxies from the environment are ignored
    (trust_env=False): a proxy would resolve the name again.
    """
    last_error = "no address to connect to"
    async with httpx.AsyncClient(
        verify=_ssl_context(policy.ca_file),
        trust_env=False,
        follow_redirects=False,
        timeout=httpx.Timeout(policy.timeout_s),
    ) as client:
        for ip in addresses:
            ip_host = f"[{ip}]" if ip.version == 6 else str(ip)
            request = client.build_request(
                "GET",
                httpx.URL(f"https://{ip_host}:{target.port}{target.path}"),
                headers={
                    "Host": target.host_header,
                    "Accept": "image/jpeg, image/png, image/webp",
                    "Accept-Encoding": "identity",
                    "User-Agent": "cardcat-scan/1",
                },
                extensions={"sni_hostname": target.host},
            )
            try:
                response = await client.send(request, stream=True)
            except httpx.ConnectError:
                last_error = "the connection or TLS handshake failed"
                continue  # try the next checked address
            except (httpx.HTTPError, OSError):
                raise URLFetchFailed(f"The URL could not be fetched from {target.host}.") from None
            try:
                return await _read_response(response, policy.max_bytes)
            finally:
                await response.aclose()
    raise URLFetchFailed(f"The URL could not be fetched from {target.host}: {last_error}.")


async def _read_response(response: httpx.Response, max_bytes: int) -> bytes:
    """The body exactly as sent, at most `max_bytes` of it.

    We asked for `Accept-Encoding: identity` and read with `aiter_raw`, so nothing is ever inflated: a
    reply that is compressed anyway (a 405-byte brotli body can inflate to gigabytes) is refused before
    any of its body is read, and the cap counts the bytes that actually crossed the wire.
    """
    if 300 <= response.status_code < 400:
        raise URLFetchFailed("The URL answered with a redirect; redirects are not followed.")
    if not 200 <= response.status_code < 300:
        raise URLFetchFailed(f"The URL answered with HTTP status {response.status_code}.")
    encodings = [
        token.strip().lower()
        for value in response.headers.get_list("content-encoding")
        for token in value.split(",")
    ]
    if any(token not in ("", "identity") for token in encodings):
        raise URLFetchFailed(
            "The URL answered with a compressed body (Content-Encoding: "
            f"{', '.join(t for t in encodings if t)}); only uncompressed images are fetched."
        )
    too_large = URLFetchFailed(f"The image at the URL exceeded the size limit of {_size_text(max_bytes)}.")
    declared = response.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > max_bytes:
        raise too_large
    body = bytearray()
    try:
        async for chunk in response.aiter_raw():
            if len(body) + len(chunk) > max_bytes:
                raise too_large
            body += chunk
    except (httpx.HTTPError, OSError):
        raise URLFetchFailed("The connection broke while downloading the image.") from None
    return bytes(body)
