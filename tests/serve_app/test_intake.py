"""Scan intake against real servers: uvicorn on loopback for uploads, a self-signed HTTPS origin for URLs.

No mocks. Never does any network I/O toward a private-range address; those are checked as pure calls on
`ipaddress` objects only.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import ipaddress
import os
import socket
import struct
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from PIL import Image
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from cardcat.stack import ServerThread
from catalog_api.kit.netguard import is_public_address, parse_host_literal
from catalog_api.scan.intake import read_scan_upload
from catalog_api.scan.url_fetch import FetchPolicy, _fetch_pinned, fetch_image_url, parse_scan_url
from core.errors import APIError, UnsupportedImage, URLFetchFailed, URLNotAllowed
from core.photo import MAX_IMAGE_BYTES
from serve_app.decoding import decode_image

LOOPBACK = (ipaddress.ip_network("127.0.0.1/32"),)
PINNED_NAME = "scan-origin.invalid"  # in the certificate, but no resolver will ever answer for it


# ---------------------------------------------------------------------------------------------- images


def image_bytes(fmt: str, size: tuple[int, int] = (64, 32), mode: str = "RGB", **save: object) -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, "green" if mode != "1" else 1).save(buf, fmt, **save)
    return buf.getvalue()


def png_claiming(width: int, height: int) -> bytes:
    """A valid 1-bit PNG of width x height built row by row: a few KB on the wire, huge once decoded."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = bytes(1 + (width + 7) // 8)
    comp = zlib.compressobj(9)
    idat = b"".join(comp.compress(row) for _ in range(height)) + comp.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def noise_jpeg(size: tuple[int, int] = (256, 256)) -> bytes:
    buf = io.BytesIO()
    Image.frombytes("RGB", size, os.urandom(size[0] * size[1] * 3)).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def exif_rotated_jpeg() -> bytes:
    """40x20 stored (left half red, right half blue) with Orientation=6: displays 20x40, red on top."""
    im = Image.new("RGB", (40, 20), (0, 0, 255))
    im.paste((255, 0, 0), (0, 0, 20, 20))
    exif = Image.Exif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=95, exif=exif.tobytes())
    return buf.getvalue()


PNG = image_bytes("PNG")


# ---------------------------------------------------------------------------------------------- servers


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A throwaway CA and a server certificate for localhost, 127.0.0.1 and PINNED_NAME."""
    out: Path = tmp_path_factory.mktemp("tls")
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cardcat test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.DNSName(PINNED_NAME),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = {"ca": out / "ca.pem", "cert": out / "cert.pem", "key": out / "key.pem"}
    paths["ca"].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return {k: str(v) for k, v in paths.items()}


def origin_app(hits: list[str]) -> Starlette:
    """The HTTPS image origin the URL fetcher talks to; `hits` records every path requested."""

    async def record(request: Request) -> None:
        hits.append(request.url.path)

    async def card(request: Request) -> Response:
        await record(request)
        return Response(PNG, media_type="image/png")

    async def whoami(request: Request) -> Response:
        await record(request)
        return PlainTextResponse(request.headers["host"])

    async def redirect(request: Request) -> Response:
        await record(request)
        return RedirectResponse("/card.png", status_code=302)

    async def missing(request: Request) -> Response:
        await record(request)
        return PlainTextResponse("nope", status_code=404)

    async def slow(request: Request) -> Response:
        await record(request)
        await asyncio.sleep(3)
        return Response(PNG, media_type="image/png")

    async def trickle(request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            for _ in range(50):
                yield b"x"
                await asyncio.sleep(0.2)

        await record(request)
        return StreamingResponse(body(), media_type="image/png")

    async def endless(request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            for _ in range(80):  # 5 MB, chunked, no Content-Length
                yield bytes(64 * 1024)

        await record(request)
        return StreamingResponse(body(), media_type="image/png")

    async def declared_big(request: Request) -> Response:
        await record(request)
        return Response(bytes(200_000), media_type="image/png")

    paths = {
        "/card.png": card,
        "/whoami": whoami,
        "/redirect": redirect,
        "/missing": missing,
        "/slow": slow,
        "/trickle": trickle,
        "/endless": endless,
        "/declared-big": declared_big,
    }
    return Starlette(routes=[Route(p, f) for p, f in paths.items()])


@pytest.fixture(scope="module")
def origin(tls: dict[str, str]) -> Iterator[ServerThread]:
    hits: list[str] = []
    with ServerThread(origin_app(hits), ssl_certfile=tls["cert"], ssl_keyfile=tls["key"]) as server:
        server.hits = hits  # type: ignore[attr-defined]
        yield server


@pytest.fixture(scope="module")
def test_policy(tls: dict[str, str]) -> FetchPolicy:
    return FetchPolicy(allowed_networks=LOOPBACK, ca_file=tls["ca"])


def scan_app(policy: FetchPolicy) -> Starlette:
    """Stands in for the real `POST /v1/scan` route: intake + decode, answering in the spec's envelope."""

    async def scan(request: Request) -> Response:
        try:
            data = await read_scan_upload(request, policy)
            image = await run_in_threadpool(decode_image, data)
        except APIError as exc:
            error = {"code": exc.code, "message": exc.message}
            return JSONResponse({"data": None, "error": error}, status_code=exc.status, headers=exc.headers)
        w, h = image.size
        top, bottom = image.getpixel((w // 2, 2)), image.getpixel((w // 2, h - 3))
        result = {"width": w, "height": h, "mode": image.mode, "top": top, "bottom": bottom}
        return JSONResponse({"data": result, "error": None})

    return Starlette(routes=[Route("/scan", scan, methods=["POST"])])


@pytest.fixture(scope="module")
def scan_server(test_policy: FetchPolicy, origin: ServerThread) -> Iterator[ServerThread]:
    with ServerThread(scan_app(test_policy)) as server:
        yield server


@pytest.fixture()
def client(scan_server: ServerThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{scan_server.port}", timeout=30, trust_env=False) as c:
        yield c


def error_code(response: httpx.Response) -> str:
    body = response.json()
    assert body["data"] is None and body["error"]["message"]
    return body["error"]["code"]


def fetch(url: str, policy: FetchPolicy | None = None) -> bytes:
    return asyncio.run(fetch_image_url(url, policy or FetchPolicy()))


# ---------------------------------------------------------------------------------------------- uploads


@pytest.mark.parametrize(
    ("fmt", "mime", "mode"),
    [
        ("JPEG", "image/jpeg", "RGB"),
        ("PNG", "image/png", "RGBA"),
        ("PNG", "image/png", "P"),
        ("WEBP", "image/webp", "RGB"),
    ],
)
def test_upload_valid_image(client: httpx.Client, fmt: str, mime: str, mode: str) -> None:
    r = client.post("/scan", files={"image": (f"card.{fmt.lower()}", image_bytes(fmt, mode=mode), mime)})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert (data["width"], data["height"], data["mode"]) == (64, 32, "RGB")


def test_upload_extra_fields_ignored(client: httpx.Client) -> None:
    r = client.post(
        "/scan",
        data={"name": "Pikachu", "set": "base"},
        files={"thumb": ("t.png", b"junk", "image/png"), "image": ("c.png", PNG, "image/png")},
    )
    assert r.status_code == 200, r.text


def test_upload_wrong_field_name(client: httpx.Client) -> None:
    r = client.post("/scan", files={"photo": ("card.png", PNG, "image/png")})
    assert r.status_code == 400 and error_code(r) == "bad_request"


def test_upload_empty_file(client: httpx.Client) -> None:
    r = client.post("/scan", files={"image": ("card.png", b"", "image/png")})
    assert r.status_code == 400 and error_code(r) == "bad_request"


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain", b"hello"),
        ("image/png", PNG),
        ("application/x-www-form-urlencoded", b"url=https://cards.example/x.png"),
        ("application/json", b'{"image": "x"}'),
        ("application/json", b'{"url": 5}'),
        ("application/json", b'{"url": ["https://cards.example/x.png"]}'),
        ("application/json", b'["https://cards.example/x.png"]'),
        ("application/json", b"{not json"),
        ("multipart/form-data", b"--x\r\n"),  # no boundary parameter
        ("multipart/form-data; boundary=x", b"--x\r\nContent-Disposition: form-data; name=image\r\n\r\nab"),
    ],
)
def test_bad_request_shapes(client: httpx.Client, content_type: str, body: bytes) -> None:
    r = client.post("/scan", content=body, headers={"Content-Type": content_type})
    assert r.status_code == 400 and error_code(r) == "bad_request", r.text


def test_upload_11mb_is_413(client: httpx.Client) -> None:
    r = client.post("/scan", files={"image": ("big.jpg", bytes(11 * 1024 * 1024), "image/jpeg")})
    assert r.status_code == 413 and error_code(r) == "payload_too_large"


def test_image_part_just_over_cap_is_413(client: httpx.Client) -> None:
    """Within the framing allowance overall, but the image part itself is one byte too many."""
    r = client.post("/scan", files={"image": ("big.jpg", bytes(MAX_IMAGE_BYTES + 1), "image/jpeg")})
    assert r.status_code == 413 and error_code(r) == "payload_too_large"


def test_declared_length_rejected_before_reading_body(scan_server: ServerThread) -> None:
    """Only 1 KB of a declared 11 MB body is ever sent: the answer must come without waiting for the rest."""
    head = (
        "POST /scan HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: multipart/form-data; boundary=xyz\r\n"
        f"Content-Length: {11 * 1024 * 1024}\r\n\r\n"
    ).encode()
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", scan_server.port), timeout=5) as s:
        s.sendall(head + b"--xyz\r\n" + bytes(1024))
        reply = b""
        while b"\r\n\r\n" not in reply:
            data = s.recv(65536)
            if not data:
                break
            reply += data
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert time.monotonic() - started < 3


def test_chunked_upload_over_cap_is_413_and_stops_early(client: httpx.Client) -> None:
    sent = 0
    budget = 100 * 1024 * 1024

    def body() -> Iterator[bytes]:
        nonlocal sent
        yield b"--xyz\r\nContent-Disposition: form-data; name=image; filename=a.jpg\r\n\r\n"
        while sent < budget:
            sent += 64 * 1024
            yield bytes(64 * 1024)

    r = client.post("/scan", content=body(), headers={"Content-Type": "multipart/form-data; boundary=xyz"})
    assert "content-length" not in r.request.headers
    assert r.status_code == 413 and error_code(r) == "payload_too_large"
    assert r.headers["connection"] == "close"
    assert sent < MAX_IMAGE_BYTES + 30 * 1024 * 1024, f"server kept reading: {sent} bytes sent"


def test_garbage_is_unsupported(client: httpx.Client) -> None:
    r = client.post("/scan", files={"image": ("card.jpg", os.urandom(4096), "image/jpeg")})
    assert r.status_code == 400 and error_code(r) == "unsupported_image"


def test_gif_is_unsupported(client: httpx.Client) -> None:
    r = client.post("/scan", files={"image": ("card.gif", image_bytes("GIF"), "image/gif")})
    assert r.status_code == 400 and error_code(r) == "unsupported_image"


def test_decompression_bomb_is_unsupported_quickly(client: httpx.Client) -> None:
    bomb = png_claiming(30_000, 30_000)
    assert len(bomb) < 1024 * 1024
    started = time.monotonic()
    r = client.post("/scan", files={"image": ("bomb.png", bomb, "image/png")})
    assert r.status_code == 400 and error_code(r) == "unsupported_image"
    assert "pixels" in r.json()["error"]["message"]
    assert time.monotonic() - started < 2


def test_truncated_jpeg_is_unsupported(client: httpx.Client) -> None:
    data = noise_jpeg()
    r = client.post("/scan", files={"image": ("cut.jpg", data[: len(data) // 2], "image/jpeg")})
    assert r.status_code == 400 and error_code(r) == "unsupported_image"


def test_exif_rotated_jpeg_comes_back_upright(client: httpx.Client) -> None:
    r = client.post("/scan", files={"image": ("rot.jpg", exif_rotated_jpeg(), "image/jpeg")})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert (data["width"], data["height"]) == (20, 40)
    assert data["top"][0] > 200 and data["top"][2] < 60  # red now on top
    assert data["bottom"][2] > 200 and data["bottom"][0] < 60


def test_json_url_end_to_end(client: httpx.Client, origin: ServerThread) -> None:
    r = client.post("/scan", json={"url": f"https://127.0.0.1:{origin.port}/card.png", "extra": 1})
    assert r.status_code == 200, r.text
    assert (r.json()["data"]["width"], r.json()["data"]["height"]) == (64, 32)


def test_json_url_http_refused(client: httpx.Client, origin: ServerThread) -> None:
    r = client.post("/scan", json={"url": f"http://127.0.0.1:{origin.port}/card.png"})
    assert r.status_code == 400 and error_code(r) == "url_not_allowed"


# ---------------------------------------------------------------------------------------------- decode


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")  # Pillow warns at open; we refuse
def test_decode_rejects_between_our_limit_and_pillows_hard_limit() -> None:
    with pytest.raises(UnsupportedImage, match="7000x7000"):
        decode_image(png_claiming(7000, 7000))


def test_decode_respects_max_pixels() -> None:
    with pytest.raises(UnsupportedImage, match="pixels"):
        decode_image(PNG, max_pixels=100)
    assert decode_image(PNG, max_pixels=64 * 32).size == (64, 32)


def test_decode_returns_rgb_for_other_modes() -> None:
    for mode in ("L", "1", "LA", "P"):
        assert decode_image(image_bytes("PNG", mode=mode)).mode == "RGB"


def test_decode_empty_is_unsupported() -> None:
    with pytest.raises(UnsupportedImage):
        decode_image(b"")


# ---------------------------------------------------------------------------------------------- URL fetch


def test_fetch_success_ip_literal(origin: ServerThread, test_policy: FetchPolicy) -> None:
    assert fetch(f"https://127.0.0.1:{origin.port}/card.png", test_policy) == PNG


def test_fetch_success_by_name(origin: ServerThread, test_policy: FetchPolicy) -> None:
    assert (
        fetch(f"https://localhost:{origin.port}/whoami", test_policy) == f"localhost:{origin.port}".encode()
    )


def test_fetch_connects_to_the_checked_address_only(origin: ServerThread, test_policy: FetchPolicy) -> None:
    """PINNED_NAME resolves nowhere; it is reachable only because we connect to the address we were given.

    The server sees Host = the name, and TLS verifies against the name (the certificate lists it).
    """
    url = f"https://{PINNED_NAME}:{origin.port}/whoami"
    with pytest.raises(URLFetchFailed, match="resolved"):
        fetch(url, test_policy)  # the normal path does look the name up, once, and fails
    body = asyncio.run(_fetch_pinned(parse_scan_url(url), [ipaddress.ip_address("127.0.0.1")], test_policy))
    assert body == f"{PINNED_NAME}:{origin.port}".encode()


def test_fetch_verifies_tls_against_the_host_name(origin: ServerThread, test_policy: FetchPolicy) -> None:
    """Same pinned IP (which the certificate also lists), but a name the certificate lacks: must fail."""
    target = parse_scan_url(f"https://wrong-name.invalid:{origin.port}/card.png")
    with pytest.raises(URLFetchFailed):
        asyncio.run(_fetch_pinned(target, [ipaddress.ip_address("127.0.0.1")], test_policy))


def test_fetch_refused_address_is_never_contacted(origin: ServerThread) -> None:
    before = list(origin.hits)  # type: ignore[attr-defined]
    with pytest.raises(URLNotAllowed):
        fetch(f"https://localhost:{origin.port}/card.png")  # default policy: loopback not exempt
    assert origin.hits == before  # type: ignore[attr-defined]


def test_fetch_redirect_refused(origin: ServerThread, test_policy: FetchPolicy) -> None:
    with pytest.raises(URLFetchFailed, match="redirect"):
        fetch(f"https://127.0.0.1:{origin.port}/redirect", test_policy)


def test_fetch_404(origin: ServerThread, test_policy: FetchPolicy) -> None:
    with pytest.raises(URLFetchFailed, match="404"):
        fetch(f"https://127.0.0.1:{origin.port}/missing", test_policy)


@pytest.mark.parametrize("path", ["/slow", "/trickle"])
def test_fetch_deadline_covers_the_whole_fetch(
    origin: ServerThread, test_policy: FetchPolicy, path: str
) -> None:
    """/slow never answers in time; /trickle answers at once but drips its body (no single read times out)."""
    policy = FetchPolicy(timeout_s=1.0, allowed_networks=LOOPBACK, ca_file=test_policy.ca_file)
    started = time.monotonic()
    with pytest.raises(URLFetchFailed, match="longer than 1 seconds"):
        fetch(f"https://127.0.0.1:{origin.port}{path}", policy)
    assert time.monotonic() - started < 2.5


@pytest.mark.parametrize("path", ["/endless", "/declared-big"])
def test_fetch_body_over_cap(origin: ServerThread, test_policy: FetchPolicy, path: str) -> None:
    policy = FetchPolicy(max_bytes=100_000, allowed_networks=LOOPBACK, ca_file=test_policy.ca_file)
    with pytest.raises(URLFetchFailed, match="size limit"):
        fetch(f"https://127.0.0.1:{origin.port}{path}", policy)


def test_fetch_http_refused(origin: ServerThread, test_policy: FetchPolicy) -> None:
    with pytest.raises(URLNotAllowed, match="https"):
        fetch(f"http://127.0.0.1:{origin.port}/card.png", test_policy)


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/",
        "https://localhost/",
        "https://LOCALHOST./x.png",
        "https://[::1]/",
        "https://[::ffff:127.0.0.1]/",
        "https://[::]/",
        "https://2130706433/",
        "https://0x7f000001/",
        "https://0x7f.1/",
        "https://127.1/",
        "https://0177.0.0.1/",
        "https://0/",
        "https://169.254.169.254/latest/meta-data/",
        "https://224.0.0.1/",
        "https://[ff02::1]/",
        "https://1.2.3.4.5/",
        "https://127.0.0.1 .cards.example/",
        "ftp://cards.example/x.png",
        "file:///etc/passwd",
        "https://user:pw@localhost/",
        "https://@localhost/",
        "https:///x.png",
    ],
)
def test_fetch_ssrf_refused_without_connecting(url: str) -> None:
    started = time.monotonic()
    with pytest.raises(URLNotAllowed):
        fetch(url)
    assert time.monotonic() - started < 1  # refused up front, not after a connect attempt


def test_fetch_unresolvable_name() -> None:
    with pytest.raises(URLFetchFailed, match="resolved"):
        fetch("https://nothing.invalid/x.png")


# ---------------------------------------------------------------------------------------------- pure checks


@pytest.mark.parametrize(
    "address",
    [
        "10.0.0.1",
        "10.255.255.255",
        "172.16.0.1",
        "172.31.255.254",
        "192.168.1.1",
        "100.64.0.1",
        "127.0.0.1",
        "127.255.0.1",
        "169.254.169.254",
        "0.0.0.0",
        "0.1.2.3",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "192.0.0.8",
        "192.0.2.1",
        "198.18.0.1",
        "::",
        "::1",
        "fe80::1",
        "fc00::1",
        "fd12:3456::1",
        "fec0::1",
        "ff02::1",
        "2001:db8::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::ffff:8.8.8.8",  # mapped addresses are refused outright
        "::127.0.0.1",  # IPv4-compatible
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:a00:1::",  # 6to4 of 10.0.0.1
        "2002:c0a8:101::",  # 6to4 of 192.168.1.1
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    ],
)
def test_non_public_addresses(address: str) -> None:
    assert not is_public_address(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["1.1.1.1", "8.8.4.4", "2606:4700:4700::1111", "2002:808:808::"])
def test_public_addresses(address: str) -> None:
    assert is_public_address(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("::ffff:127.0.0.1", "::ffff:7f00:1"),
        ("localhost", None),
        ("cards.example", None),
    ],
)
def test_host_literals_normalised(host: str, expected: str | None) -> None:
    parsed = parse_host_literal(host)
    assert (str(parsed) if parsed else None) == expected
