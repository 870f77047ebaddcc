"""Scans in flight are capped per worker, and scan URL lookups keep off the threads the rest of the
service shares (issue 45, item 5). Real servers only: the ingress (`cardcat serve`), a slow scanner
behind `CARDCAT_SCAN_URL`, and a DNS server on loopback that never answers."""

from __future__ import annotations

import asyncio
import io
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from PIL import Image

from cardcat.stack import PG_ADMIN_URL, ServerThread
from tests.catalog_api.helpers import failed, ok


def png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), "white").save(buffer, format="PNG")
    return buffer.getvalue()


class SlowScanner(ServerThread):
    """The scanner's `POST /scan`, answering only once `release` is set (an overloaded scanner)."""

    def __init__(self) -> None:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        self.received = 0
        self.arrived = threading.Event()
        self.release = threading.Event()

        async def scan(request: Request) -> JSONResponse:
            await request.body()
            self.received += 1
            self.arrived.set()
            while not self.release.is_set():
                await asyncio.sleep(0.05)
            return JSONResponse({"matches": [], "unidentified": None})

        super().__init__(Starlette(routes=[Route("/scan", scan, methods=["POST"])]))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/scan"


@pytest.fixture
def slow_scanner() -> Iterator[SlowScanner]:
    with SlowScanner() as server:
        yield server
        server.release.set()


def stalled_upload(base_url: str, key: str) -> socket.socket:
    """A multipart scan upload that sends its headers and 1 KB of a declared 5 MB body, then stalls."""
    port = int(base_url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port))
    head = (
        "POST /v1/scan HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {key}\r\n"
        "Content-Type: multipart/form-data; boundary=xyz\r\nContent-Length: 5000000\r\n\r\n"
        '--xyz\r\nContent-Disposition: form-data; name="image"; filename="p.png"\r\n\r\n'
    )
    sock.sendall(head.encode() + bytes(1024))
    return sock


def test_the_scan_past_the_cap_is_answered_503_at_once(fresh: Any, slow_scanner: SlowScanner) -> None:
    """Reproduces a73d9a9's unbounded scans: there, a third scan beside a stalled upload and a scan the
    scanner sits on went to the scanner too and waited with them (here it would hang past the 3 s
    timeout). Now, with `CARDCAT_SCAN_MAX_IN_FLIGHT=2`, it is answered `503 scan_unavailable` with
    `Retry-After` at once, without reaching the scanner; the catalog keeps answering, and the slots come
    back when the scans end (the stalled upload by its client going away)."""
    service = fresh("sqlite", None, CARDCAT_SCAN_URL=slow_scanner.url, CARDCAT_SCAN_MAX_IN_FLIGHT="2")
    key = service.quick_key()
    upload = stalled_upload(service.base_url, key)  # slot 1: a slow upload, holding its slot unread
    time.sleep(1.5)
    files = {"image": ("p.png", png(), "image/png")}
    headers = {"Authorization": f"Bearer {key}"}
    held: dict[str, httpx.Response] = {}

    def held_scan() -> None:  # slot 2: a scan the scanner sits on
        held["response"] = httpx.post(f"{service.base_url}/v1/scan", files=files, headers=headers, timeout=60)

    holder = threading.Thread(target=held_scan)
    holder.start()
    assert slow_scanner.arrived.wait(20), "the held scan never reached the scanner"

    with service.client(key) as client:
        client.timeout = httpx.Timeout(3.0)
        started = time.monotonic()
        response = client.post("/v1/scan", files=files)
        elapsed = time.monotonic() - started
        error = failed(response, 503, "scan_unavailable")
        assert response.headers["Retry-After"].isdigit(), response.headers
        assert elapsed < 2.0, f"took {elapsed:.1f} s"
        assert "Too many scans" in error["message"]
        assert slow_scanner.received == 1, "the refused scan never reached the scanner"
        assert ok(client.get("/v1/series", params={"limit": 1})) is not None

        upload.close()  # slot 1 back
        slow_scanner.release.set()  # slot 2 back
        holder.join(30)
        assert held["response"].status_code == 200, held["response"].text
        for _ in range(2):  # both slots free again
            assert ok(client.post("/v1/scan", files=files, timeout=30))["matches"] == []


class StallingDNS:
    """A DNS server on 127.0.0.1 (UDP) that reads every query and never answers, like a wedged resolver."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.queries = 0
        self.thread = threading.Thread(target=self._swallow, daemon=True)

    def _swallow(self) -> None:
        while True:
            try:
                data, _ = self.sock.recvfrom(4096)
            except OSError:
                return
            if len(data) > 12:
                self.queries += 1

    def __enter__(self) -> StallingDNS:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


URL_SCANS = 24  # four times asyncio's default executor on two cores (six threads)


def _url_scans(base_url: str, key: str, outcomes: list[tuple[int, str, float]]) -> None:
    async def one(client: httpx.AsyncClient, n: int) -> None:
        started = time.monotonic()
        response = await client.post("/v1/scan", json={"url": f"https://card-{n}.stall.example/p.jpg"})
        code = response.json()["error"]["code"] if response.status_code != 200 else ""
        outcomes.append((response.status_code, code, time.monotonic() - started))

    async def run() -> None:
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as client:
            await asyncio.gather(*(one(client, n) for n in range(URL_SCANS)))

    asyncio.run(run())


def _drop_connections(database_url: str) -> int:
    """End every server connection to the service's database (its pool must reconnect)."""
    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchall()
    return len(rows)


def test_stalled_url_lookups_leave_catalog_reads_and_reconnects_alone(
    fresh: Any, feed_dir: Path, tmp_path: Path
) -> None:
    """Reproduces a73d9a9's shared resolver threads: there, each URL scan resolved its host with
    `loop.getaddrinfo` on asyncio's default executor (six threads on two cores), which the database
    driver also uses to resolve its host when it reconnects, so URL scans stuck on a stalling resolver
    starved reconnects; and there was no way to name the resolver, so on a73d9a9 this test already fails
    where it checks that the scans reached the stalling server. Now, with `CARDCAT_SCAN_DNS_SERVERS`
    naming a server that never answers, 24 URL scans sit in DNS (A and AAAA queries arrive) while
    catalog reads, each with a new key (looked up in the database) and after every database connection
    was ended (the pool reconnects, resolving `localhost` on the default executor), answer promptly; the
    scans then end as `400 url_fetch_failed` when the lookup's own timeout passes."""
    service = fresh("postgresql", feed_dir)
    with StallingDNS() as dns:
        url = service.start(
            CARDCAT_DATABASE_URL=service.db.url.replace("127.0.0.1", "localhost"),
            CARDCAT_SCAN_DNS_SERVERS=f"127.0.0.1:{dns.port}",
            CARDCAT_SCAN_URL="http://127.0.0.1:9/scan",  # never reached: every lookup stalls
            CARDCAT_RESPONSE_CACHE_MB="0",
        )
        outcomes: list[tuple[int, str, float]] = []
        scans = threading.Thread(target=_url_scans, args=(url, service.quick_key(), outcomes))
        scans.start()
        deadline = time.monotonic() + 4
        while dns.queries < 2 * URL_SCANS and time.monotonic() < deadline:
            time.sleep(0.05)
        assert dns.queries >= 2 * URL_SCANS, f"only {dns.queries} lookups reached the stalling server"
        assert _drop_connections(service.db.url) > 0
        slowest = 0.0
        for query in ("pikachu", "charizard", None):
            with service.client(base_url=url) as client:  # a new key: looked up in the database
                started = time.monotonic()
                params = {"limit": 3, **({"q": query} if query else {})}
                assert ok(client.get("/v1/cards", params=params))["items"]
                slowest = max(slowest, time.monotonic() - started)
        assert not outcomes, f"the URL scans should still be waiting on DNS: {outcomes}"
        assert slowest < 2.0, f"a catalog read took {slowest:.1f} s while URL lookups stalled"
        scans.join(60)
    assert len(outcomes) == URL_SCANS
    assert {(status, code) for status, code, _ in outcomes} == {(400, "url_fetch_failed")}, outcomes
    assert max(seconds for *_, seconds in outcomes) < 9, outcomes
