"""The client against odd answers and odd inputs (issue 45, item 8), both clients:

- a peer (a proxy, a hostile origin) answering `Retry-After` with non-ASCII digits (`²`, `١٢`) or an
  HTTP-date written in them: on a73d9a9 `"²".isdigit()` let `float("²")` raise `ValueError` out of
  every call; now the header is ignored (the client's own backoff applies) and the failure is a
  `CardcatError`;
- `scan()` given a local path as a `str`: on a73d9a9 it read that file and uploaded it to the server;
  now a `str` is only a URL, `TypeError` is raised before anything is read or sent, and a path is
  uploaded only when it is a `pathlib.Path` (or passed as a binary file object). Checked on the wire
  (an httpx request hook) against the real server, catalog-only here: it answers `503 scan_unavailable`.
"""

from __future__ import annotations

import asyncio
import io
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cardcat.stack import Service
from cardcat_client import AsyncCardcatClient, CardcatClient, CardcatError

ODD_RETRY_AFTER = [
    "²".encode(),  # superscript two: str.isdigit() says yes, float() raises
    "١٢".encode(),  # Arabic-Indic twelve: int() and float() read it as 12
    "Mon, ٠١ Jan 2024 00:00:00 GMT".encode(),  # a date in Arabic-Indic digits: the date parser reads it
    b"\xb2",  # the same superscript two in Latin-1, as a proxy might send it
]


class OddPeer:
    """An HTTP/1.1 peer on loopback that answers every request with `status` and the raw `Retry-After`
    bytes it is given (no HTTP library would write non-ASCII header bytes for us), and counts requests."""

    def __init__(self, status: int, retry_after: bytes) -> None:
        self.status, self.retry_after = status, retry_after
        self.requests = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            buffered = b""
            while True:
                while b"\r\n\r\n" not in buffered:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buffered += chunk
                head, _, buffered = buffered.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":", 1)[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                while len(buffered) < length:
                    buffered += conn.recv(65536)
                buffered = buffered[length:]
                self.requests += 1
                body = b'{"data":null,"error":{"code":"rate_limited","message":"slow down"}}'
                conn.sendall(
                    b"HTTP/1.1 %d Odd\r\nContent-Type: application/json\r\nRetry-After: %s\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (self.status, self.retry_after, len(body), body)
                )

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(params=ODD_RETRY_AFTER, ids=["superscript", "arabic-indic", "arabic-indic-date", "latin-1"])
def odd_429(request: pytest.FixtureRequest) -> Iterator[OddPeer]:
    peer = OddPeer(429, request.param)
    yield peer
    peer.close()


def test_an_odd_retry_after_is_ignored_not_raised(odd_429: OddPeer) -> None:
    """a73d9a9: `ValueError: could not convert string to float: '²'` from `cat.health()`."""
    cat = CardcatClient(odd_429.url, api_key="cc_x", max_retries=2, backoff_base=0.01)
    with cat, pytest.raises(CardcatError) as refused:
        cat.health()
    assert (refused.value.status, refused.value.code) == (429, "rate_limited")
    assert refused.value.retry_after is None, "not a delay the client can read: treated as absent"
    assert cat.stats.retries == 2 and odd_429.requests == 3, "retried on its own backoff, not 12 s"


def test_the_async_client_ignores_an_odd_retry_after(odd_429: OddPeer) -> None:
    async def run() -> CardcatError:
        async with AsyncCardcatClient(odd_429.url, api_key="cc_x", max_retries=1, backoff_base=0.01) as cat:
            try:
                await cat.health()
            except CardcatError as error:
                return error
        raise AssertionError("no error")

    error = asyncio.run(run())
    assert (error.status, error.code, error.retry_after) == (429, "rate_limited", None)
    assert odd_429.requests == 2


def test_an_odd_retry_after_on_a_5xx_is_ignored() -> None:
    peer = OddPeer(503, "١٢".encode())
    try:
        cat = CardcatClient(peer.url, max_retries=1, backoff_base=0.01, max_retry_wait=60)
        with cat, pytest.raises(CardcatError) as unavailable:
            cat.health()
    finally:
        peer.close()
    assert unavailable.value.status == 503 and unavailable.value.retry_after is None
    assert peer.requests == 2


# --------------------------------------------------------------------------------------------- scan()


class Sent:
    """The requests a client put on the wire (an httpx request hook), with their bodies."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> None:
        request.read()
        self.requests.append(request)


@pytest.fixture(scope="module")
def catalog_only(tmp_path_factory: pytest.TempPathFactory, feed_dir: Path) -> Iterator[Service]:
    from cardcat.stack import launch

    service = launch("sqlite", tmp_path_factory.mktemp("scan-paths"), feed_dir)
    yield service
    service.stop()


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "id_ed25519"
    path.write_bytes(b"\xff\xd8\xff-----BEGIN OPENSSH PRIVATE KEY----- not for the server")
    return path


def test_a_str_is_never_read_as_a_local_file(catalog_only: Service, secret_file: Path) -> None:
    """a73d9a9 uploaded `secret_file`'s bytes to the server for `scan(str(secret_file))`."""
    sent = Sent()
    http = httpx.Client(event_hooks={"request": [sent]}, timeout=30)
    with (
        http,
        CardcatClient(catalog_only.base_url, api_key=catalog_only.quick_key(), http_client=http) as cat,
    ):
        for text in (str(secret_file), "file://" + str(secret_file), "~/.ssh/id_ed25519", "photo.jpg"):
            with pytest.raises(TypeError, match=r"pathlib\.Path"):
                cat.scan(text)
        assert sent.requests == [], "nothing was sent"
        with pytest.raises(TypeError, match="binary mode"):
            cat.scan(io.StringIO("text"))  # type: ignore[arg-type]
        with pytest.raises(CardcatError):
            cat.scan("HTTPS://example.com/card.jpg")  # a str URL: sent as the JSON shape
    assert [r.headers["content-type"] for r in sent.requests] == ["application/json"]
    assert sent.requests[0].content == b'{"url":"HTTPS://example.com/card.jpg"}'


def uploads(catalog_only: Service, sources: list[Any]) -> list[bytes]:
    """Each source scanned by the sync client: the multipart bodies sent (the server answers each
    `503 scan_unavailable`: no scanner here)."""
    sent = Sent()
    http = httpx.Client(event_hooks={"request": [sent]}, timeout=30)
    with (
        http,
        CardcatClient(catalog_only.base_url, api_key=catalog_only.quick_key(), http_client=http) as cat,
    ):
        for source in sources:
            with pytest.raises(CardcatError) as unavailable:
                cat.scan(source)
            assert (unavailable.value.status, unavailable.value.code) == (503, "scan_unavailable")
    assert all(r.headers["content-type"].startswith("multipart/form-data") for r in sent.requests)
    return [r.content for r in sent.requests]


def test_a_path_a_file_object_or_bytes_are_uploaded(catalog_only: Service, secret_file: Path) -> None:
    data = secret_file.read_bytes()
    with secret_file.open("rb") as handle:
        bodies = uploads(catalog_only, [secret_file, handle, io.BytesIO(data), data])
    assert len(bodies) == 4 and all(data in body for body in bodies)
    assert b'filename="id_ed25519"' in bodies[0] and b'filename="id_ed25519"' in bodies[1]


def test_the_async_client_takes_paths_only_as_path(catalog_only: Service, secret_file: Path) -> None:
    async def run() -> tuple[int, str]:
        async with AsyncCardcatClient(catalog_only.base_url, api_key=catalog_only.quick_key()) as cat:
            with pytest.raises(TypeError, match=r"pathlib\.Path"):
                await cat.scan(str(secret_file))
            assert cat.stats.responses == 0
            try:
                await cat.scan(secret_file)
            except CardcatError as error:
                return error.status, error.code
        raise AssertionError("the catalog-only server answered a scan")

    assert asyncio.run(run()) == (503, "scan_unavailable")
