"""Fetching a scan photo from a client's URL: public https hosts only, one deadline, a size cap.

The URL is read and its addresses judged by the kit's one network guard (`catalog_api.kit.netguard`,
shared with webhook delivery); this module adds what only the scan needs: https only, the spec's
refusal messages (`URLNotAllowed`, `URLFetchFailed`), no redirects, no compressed bodies, and the 10 MB
cap counted on the wire. Photos are held in memory only, never written or logged.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from dataclasses import dataclass, field

import certifi
import httpx

from catalog_api.kit.netguard import (
    PROBLEMS,
    IPAddress,
    IPNetwork,
    Reason,
    Target,
    URLRejected,
    is_public_address,
    parse_url,
)
from catalog_api.scan.resolver import Resolver, SystemResolver, Unresolvable
from core.errors import URLFetchFailed, URLNotAllowed
from core.photo import MAX_IMAGE_BYTES

# The resolver of a policy that names none: getaddrinfo on its own threads, never asyncio's default
# executor (`catalog_api.scan.resolver`).
SYSTEM_RESOLVER = SystemResolver()

# The words a client reads when its URL is refused, by the guard's reason: the guard's, as sentences.
REFUSALS: dict[Reason, str] = {
    **{reason: problem[0].upper() + problem[1:] + "." for reason, problem in PROBLEMS.items()},
    "scheme": "Only https URLs can be scanned.",
}


@dataclass(frozen=True)
class FetchPolicy:
    """How a scan URL may be fetched. The defaults are the spec's; tests loosen only what they must."""

    timeout_s: float = 10.0
    max_bytes: int = MAX_IMAGE_BYTES
    # ONLY for tests: networks exempt from the public-address rule (e.g. 127.0.0.1/32 for a local server).
    allowed_networks: tuple[IPNetwork, ...] = ()
    # Extra CA bundle trusted on top of the public roots (the tests' self-signed server).
    ca_file: str | None = None
    # Who resolves the host (`CARDCAT_SCAN_DNS_SERVERS`); None: the system's, on threads of its own.
    resolver: Resolver | None = field(default=None, compare=False)


def size_text(n: int) -> str:
    return f"{n // (1024 * 1024)} MB" if n % (1024 * 1024) == 0 else f"{n} bytes"


def parse_scan_url(url: str) -> Target:
    """Split and validate a scan URL; refuses anything but a plain https URL naming a sane host."""
    try:
        return parse_url(url, ("https",))
    except URLRejected as refused:
        raise URLNotAllowed(REFUSALS[refused.reason]) from None


def _address_allowed(ip: IPAddress, policy: FetchPolicy) -> bool:
    return any(ip in net for net in policy.allowed_networks) or is_public_address(ip)


async def _resolve(target: Target, resolver: Resolver) -> list[IPAddress]:
    """Resolve the host once; this exact list is what gets checked and then connected to."""
    if target.literal is not None:
        return [target.literal]
    try:
        return await resolver.resolve(target.host, target.port)
    except Unresolvable:
        raise URLFetchFailed(f"The host {target.host} could not be resolved.") from None


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
    target = parse_scan_url(url)
    try:
        async with asyncio.timeout(policy.timeout_s):
            addresses = await _resolve(target, policy.resolver or SYSTEM_RESOLVER)
            if not all(_address_allowed(ip, policy) for ip in addresses):
                raise URLNotAllowed(f"The host {target.host} resolves to a non-public address.")
            return await _fetch_pinned(target, addresses, policy)
    except TimeoutError:
        raise URLFetchFailed(
            f"Fetching the URL took longer than {policy.timeout_s:g} seconds and was stopped."
        ) from None


async def _fetch_pinned(target: Target, addresses: list[IPAddress], policy: FetchPolicy) -> bytes:
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
            request = client.build_request(
                "GET",
                httpx.URL(target.url_for(ip)),
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
    too_large = URLFetchFailed(f"The image at the URL exceeded the size limit of {size_text(max_bytes)}.")
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
