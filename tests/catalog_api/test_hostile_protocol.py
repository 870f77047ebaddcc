"""Row 11 of issue 17 on the real server: what uvicorn parses, which URLs the scanner refuses, and an
OpenAPI document that lists exactly the statuses the server sends.

- A request uvicorn cannot parse (a `Content-Length` that is not a number, negative, or two that
  disagree) is answered `400 bad_request` in the `{data, error}` envelope, not uvicorn's plain text.
- `https://h:0/` is refused as `url_not_allowed` (port 0 is not "no port", so not 443).
- `/openapi.json` lists, per operation, the statuses a probe of that operation actually gets (no `422`,
  `304` on conditional GETs, the `Range` statuses of the file routes); only `429` and `500` are
  documented without being provoked here (`test_ratelimit.py` provokes 429).
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from cardcat.stack import Service, launch
from catalog_api.access.file_access import sign_bound
from catalog_api.kit.settings import Settings
from catalog_api.prices.snapshot_files import sign
from catalog_api.scan.url_fetch import FetchPolicy, fetch_image_url
from core.errors import URLNotAllowed

NEVER_PROVOKED = {"429", "500"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, feed_dir: Path) -> Iterator[Service]:
    svc = launch("sqlite", tmp_path_factory.mktemp("protocol"), feed_dir)
    yield svc
    svc.stop()


def raw_exchange(base_url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send bytes as they are (no client library would send a bad Content-Length) and read the answer
    to the end: the server closes the connection after a parse error."""
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


@pytest.mark.parametrize(
    "content_length",
    [
        b"Content-Length: abc",
        b"Content-Length: -1",
        b"Content-Length: 1e3",
        b"Content-Length: 3\r\nContent-Length: 4",
    ],
)
@pytest.mark.parametrize("path", [b"/v1/cards", b"/health"])
def test_an_unparseable_content_length_is_a_400_envelope(
    server: Service, path: bytes, content_length: bytes
) -> None:
    request = b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n" + content_length + b"\r\n\r\nabc"
    status, headers, body = raw_exchange(server.base_url, request)
    assert status == 400
    assert headers["content-type"] == "application/json"
    assert int(headers["content-length"]) == len(body)
    envelope = httpx.Response(400, content=body).json()
    assert envelope["data"] is None and envelope["error"]["code"] == "bad_request"
    assert envelope["error"]["message"]


def test_h11_answers_in_the_envelope_too(tmp_path: Path) -> None:
    """`cardcat serve` runs our httptools protocol; our h11 one (for a uvicorn run with h11) must answer
    alike. The real app under the real uvicorn, in this process."""
    import threading

    import uvicorn

    from cardcat.stack import free_port
    from catalog_api.app import create_app
    from catalog_api.kit.http_protocol import EnvelopeH11Protocol

    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'h11.db'}", data_dir=tmp_path))
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, http=EnvelopeH11Protocol, lifespan="off", log_level="error"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        request = b"POST /v1/cards HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"
        status, headers, body = raw_exchange(f"http://127.0.0.1:{port}", request)
        assert status == 400 and headers["content-type"] == "application/json"
        assert httpx.Response(400, content=body).json()["error"]["code"] == "bad_request"
    finally:
        server.should_exit = True
        thread.join(10)


def test_a_malformed_request_line_is_a_400_envelope(server: Service) -> None:
    status, _, body = raw_exchange(server.base_url, b"GET /v1/cards HTTP/1.1 extra\r\nHost: x\r\n\r\n")
    assert status == 400 and httpx.Response(400, content=body).json()["error"]["code"] == "bad_request"


def test_the_server_still_answers_after_parse_errors(server: Service) -> None:
    for _ in range(20):
        raw_exchange(server.base_url, b"POST /v1/cards HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
    with server.client(server.key) as client:
        assert client.get("/v1/series", params={"limit": "1"}).status_code == 200


@pytest.mark.parametrize(
    "url", ["https://h:0/", "https://example.com:0/card.jpg", "https://[2606:4700:4700::1111]:0/"]
)
def test_port_zero_is_not_allowed(url: str) -> None:
    with pytest.raises(URLNotAllowed):
        asyncio.run(fetch_image_url(url, FetchPolicy()))


# ------------------------------------------------------------------------------------- OpenAPI vs reality


def place_files(server: Service) -> dict[str, str]:
    """A face in the image store and a published snapshot, written where the server reads them, and a
    URL for the snapshot signed with the deployment's own file secret."""
    settings = Settings(data_dir=server.data_dir, database_url=server.db.url)
    key = "ab" + "0" * 62
    face = settings.images_dir / key[:2] / f"{key}-high.jpg"
    face.parent.mkdir(parents=True, exist_ok=True)
    face.write_bytes(b"\xff\xd8" + b"\x00" * 200 + b"\xff\xd9")
    name = "card_prices-2026-01-01-0123456789abcdef.ndjson.gz"
    settings.snapshot_dir.mkdir(parents=True, exist_ok=True)
    (settings.snapshot_dir / name).write_bytes(gzip.compress(b'{"id": 1}\n' * 50))
    expires = int(time.time()) + 3600
    signed = f"/files/snapshots/{name}?expires={expires}&signature={sign(settings, name, expires)}"
    missing = "card_prices-2026-01-02-0123456789abcdef.ndjson.gz"
    missing_signature = sign(settings, missing, expires)
    missing_signed = f"/files/snapshots/{missing}?expires={expires}&signature={missing_signature}"
    # The bulk files the catalog sync built, and a well-formed name no build wrote.
    with httpx.Client(base_url=server.base_url, headers={"Authorization": f"Bearer {server.key}"}) as client:
        bulk = "/files/" + client.get("/v1/bulk").json()["data"]["items"][0]["url"].split("/files/", 1)[1]
    # Bulk URLs are bound to a key (`key=<id>` under the signature): the server's own key for a name no
    # build wrote (404), and a key id no key has (403, as for a revoked key).
    key_id = int(parse_qs(urlsplit(bulk).query)["key"][0])
    absent = "cards-0123456789abcdef.ndjson.gz"
    absent_signature = sign_bound(settings, "bulk/" + absent, expires, key_id)
    absent_signed = f"/files/bulk/{absent}?expires={expires}&key={key_id}&signature={absent_signature}"
    bulk_name = bulk.split("?")[0].rsplit("/", 1)[1]
    unknown_key = 10**9
    revoked_signature = sign_bound(settings, "bulk/" + bulk_name, expires, unknown_key)
    revoked_signed = (
        f"/files/bulk/{bulk_name}?expires={expires}&key={unknown_key}&signature={revoked_signature}"
    )
    return {
        "image": f"/images/{key}/high.jpg",
        "snapshot": signed,
        "missing_snapshot": missing_signed,
        "bulk": bulk,
        "missing_bulk": absent_signed,
        "revoked_bulk": revoked_signed,
    }


def probes(server: Service, files: dict[str, str]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Requests per documented operation meant to provoke each status it could send."""
    key = {"Authorization": f"Bearer {server.key}"}
    stale = {**key, "If-None-Match": "*"}
    lists = {
        "/v1/cards": {"q": ""},
        "/v1/series": {"q": ""},
        "/v1/expansions": {"q": ""},
        "/v1/products": {"q": ""},
        "/v1/movers": {"window": "1y"},
    }
    table: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for path, bad in lists.items():
        table[("get", path)] = [
            {"url": path, "headers": key},
            {"url": path, "headers": stale},
            {"url": path, "headers": key, "params": bad},
            {"url": path},
        ]
    for path, real in {
        "/v1/cards/{card_id}": "base1-4",
        "/v1/series/{series_id}": "base",
        "/v1/expansions/{expansion_id}": "base1",
    }.items():
        concrete = path.split("{")[0]
        table[("get", path)] = [
            {"url": concrete + real, "headers": key},
            {"url": concrete + real, "headers": stale},
            {"url": concrete + "no-such-id", "headers": key},
            {"url": concrete + real, "headers": key, "params": {"lang": "xx"}},
            {"url": concrete + real},
        ]
    with httpx.Client(base_url=server.base_url, headers=key) as client:
        product = client.get("/v1/products", params={"limit": "1"}).json()["data"]["items"][0]["id"]
    table[("get", "/v1/products/{product_id}")] = [
        {"url": f"/v1/products/{product}", "headers": key},
        {"url": f"/v1/products/{product}", "headers": stale},
        {"url": "/v1/products/no-such-id", "headers": key},
        {"url": f"/v1/products/{product}", "headers": key, "params": {"lang": "xx"}},
        {"url": f"/v1/products/{product}"},
    ]
    for path, real in {
        "/v1/cards/{card_id}/prices": "base1-4",
        "/v1/products/{product_id}/prices": str(product),
    }.items():
        concrete = path.replace("{card_id}", real).replace("{product_id}", real)
        table[("get", path)] = [
            {"url": concrete, "headers": key},
            {"url": concrete, "headers": stale},
            {"url": concrete, "headers": key, "params": {"from": "yesterday"}},
            {"url": path.replace("{card_id}", "no-such-id").replace("{product_id}", "1"), "headers": key},
            {"url": concrete},
        ]
    table[("get", "/v1/bulk")] = [
        {"url": "/v1/bulk", "headers": key},
        {"url": "/v1/bulk", "headers": stale},
        {"url": "/v1/bulk"},
    ]
    table[("post", "/v1/scan")] = [{"url": "/v1/scan", "headers": key, "json": {"url": "https://h/"}}]
    table[("post", "/v1/scan/page")] = [
        {"url": "/v1/scan/page", "headers": key, "json": {"url": "https://h/"}}
    ]
    # Scan batches: no scanner here, so no batch can be made; what a catalog-only server sends is checked
    # (test_batches.py, with the scanner, sends the rest).
    batch = "/v1/scan/batches/bat_" + "0" * 24
    table[("post", "/v1/scan/batches")] = [
        {"url": "/v1/scan/batches", "headers": key},
        {"url": "/v1/scan/batches"},
    ]
    table[("post", "/v1/scan/batches/{batch_id}/photos")] = [
        {"url": batch + "/photos", "headers": key, "files": {"image": ("a.jpg", b"x", "image/jpeg")}},
        {"url": batch + "/photos"},
    ]
    table[("post", "/v1/scan/batches/{batch_id}/close")] = [{"url": batch + "/close", "headers": key}]
    for suffix in ("", "/results", "/export"):
        table[("get", "/v1/scan/batches/{batch_id}" + suffix)] = [
            {"url": batch + suffix, "headers": key},
            {"url": "/v1/scan/batches/..%2F..%2Fsecrets.json" + suffix, "headers": key},
            {"url": batch + suffix},
        ]
    table[("get", "/v1/scan/batches/{batch_id}/export")].append(
        {"url": batch + "/export", "headers": key, "params": {"format": "xlsx"}}
    )
    table[("delete", "/v1/scan/batches/{batch_id}")] = [{"url": batch, "headers": key}, {"url": batch}]
    table[("get", "/health")] = [{"url": "/health"}, {"url": "/health", "headers": {"If-None-Match": "*"}}]
    image, snapshot = files["image"], files["snapshot"]
    table[("get", "/images/{key}/{size}.jpg")] = [
        {"url": image},
        {"url": image, "headers": {"Range": "bytes=0-9"}},
        {"url": image, "headers": {"Range": "bytes=oops"}},
        {"url": image, "headers": {"Range": "bytes=9000-"}},
        {"url": "/images/" + "cd" * 32 + "/high.jpg"},
    ]
    table[("get", "/files/snapshots/{file_name}")] = [
        {"url": snapshot},
        {"url": snapshot, "headers": {"Range": "bytes=0-9"}},
        {"url": snapshot, "headers": {"Range": "bytes=oops"}},
        {"url": snapshot, "headers": {"Range": "bytes=90000-"}},
        {"url": snapshot.replace("signature=", "signature=0")},
        {"url": files["missing_snapshot"]},
    ]
    bulk = files["bulk"]
    table[("get", "/files/bulk/{file_name}")] = [
        {"url": bulk},
        {"url": bulk, "headers": {"Range": "bytes=0-9"}},
        {"url": bulk, "headers": {"Range": "bytes=oops"}},
        {"url": bulk, "headers": {"Range": "bytes=90000000-"}},
        {"url": bulk.replace("signature=", "signature=0")},
        {"url": files["missing_bulk"]},
        {"url": files["revoked_bulk"]},
    ]
    return table


def test_openapi_lists_the_statuses_the_server_sends(server: Service) -> None:
    spec = httpx.get(f"{server.base_url}/openapi.json").json()
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    table = probes(server, place_files(server))
    documented_operations = {(m, p) for p, ops in spec["paths"].items() for m in ops}
    assert documented_operations == set(table), "every documented operation is probed"
    mismatches = []
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        for (method, path), requests in table.items():
            seen = {str(client.request(method.upper(), **request).status_code) for request in requests}
            documented = set(spec["paths"][path][method]["responses"])
            if path.startswith("/v1/scan"):  # no scanner here: only what a catalog-only server sends
                missing: set[str] = set()
            else:
                missing = documented - seen - NEVER_PROVOKED
            if seen - documented or missing:
                mismatches.append(f"{method} {path}: sent {sorted(seen)}, documented {sorted(documented)}")
    assert not mismatches, "\n".join(mismatches)
