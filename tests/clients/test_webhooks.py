"""`verify_webhook` on real deliveries: the real `cardcat webhooks add` secret, a real catalog sync and
the real deliverer (`cardcat events deliver --once`) posting to a receiver on loopback; then the same
bytes tampered with, replayed late, or checked with the wrong secret."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from cardcat.stack import Service, create_database
from cardcat_client import WebhookVerificationError, verify_webhook


@dataclass
class Post:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """Records every post (raw bytes and headers as they arrived) and answers 204."""

    posts: list[Post] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                receiver.posts.append(Post(dict(self.headers.items()), body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"


@pytest.fixture(scope="module")
def delivered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Post]]]:
    from catalog_api.ingest.demo_catalog import write_demo_catalog

    root = tmp_path_factory.mktemp("webhooks")
    service = Service(
        create_database("sqlite", root), root / "data", {"CARDCAT_WEBHOOKS_ALLOW_PRIVATE": "true"}
    )
    receiver = Receiver().start()
    try:
        service.cli("db", "upgrade")
        secret = service.cli("webhooks", "add", receiver.url).stdout.strip().splitlines()[-1]
        service.cli("catalog", "sync", "--from", str(write_demo_catalog(Path(root) / "feed")), "--quiet")
        counts = json.loads(service.cli("events", "deliver", "--once").stdout)
        assert counts["delivered"] >= 3 and len(receiver.posts) == counts["delivered"]
        yield secret, receiver.posts
    finally:
        assert receiver.server is not None
        receiver.server.shutdown()
        service.stop()


def test_real_deliveries_verify(delivered: tuple[str, list[Post]]) -> None:
    secret, posts = delivered
    names = set()
    for post in posts:
        event = verify_webhook(post.body, post.headers, secret)
        sent = json.loads(post.body)
        assert event.model_dump(exclude={"created_at"}, exclude_unset=True) == {
            k: v for k, v in sent.items() if k != "created_at"
        }
        assert event.created_at == datetime.fromisoformat(sent["created_at"])
        assert event.id.startswith("evt_") and event.id == post.headers["webhook-id"]
        assert Webhook(secret).verify(post.body, post.headers) == json.loads(post.body)  # the reference
        names.add(event.name)
    assert {"cardgame.series.created", "cardgame.expansions.created", "cardgame.cards.updated"} <= names
    assert verify_webhook(posts[0].body.decode(), {k.upper(): v for k, v in posts[0].headers.items()}, secret)


def _refused(post: Post, secret: str, match: str, **options: Any) -> None:
    with pytest.raises(WebhookVerificationError, match=match):
        verify_webhook(post.body, post.headers, secret, **options)


def test_tampered_replayed_or_wrongly_keyed_deliveries_are_refused(delivered: tuple[str, list[Post]]) -> None:
    secret, posts = delivered
    post, other = posts[0], posts[1]
    stamp = int(post.headers["webhook-timestamp"])
    tampered = Post(post.headers, post.body.replace(b'"data":{', b'"data":{"x":1,', 1))
    assert tampered.body != post.body
    _refused(tampered, secret, "no signature matches")
    _refused(post, "whsec_" + "A" * 43 + "=", "no signature matches")
    _refused(
        Post({**post.headers, "webhook-id": other.headers["webhook-id"]}, post.body), secret, "no signature"
    )
    signature = post.headers["webhook-signature"]
    swapped = {**post.headers, "webhook-signature": other.headers["webhook-signature"]}
    _refused(Post(swapped, post.body), secret, "no signature matches")
    _refused(post, secret, "too old", now=stamp + 301)
    _refused(post, secret, "in the future", now=stamp - 301)
    assert verify_webhook(post.body, post.headers, secret, now=stamp + 299).id == post.headers["webhook-id"]
    assert verify_webhook(post.body, post.headers, secret, now=stamp + 3600, tolerance_s=7200)
    without = {k: v for k, v in post.headers.items() if k.lower() != "webhook-signature"}
    _refused(Post(without, post.body), secret, "missing header webhook-signature")
    rotated = {**post.headers, "webhook-signature": f"v1,{'A' * 43}= {signature}"}  # several signatures
    assert verify_webhook(post.body, rotated, secret)
    _refused(
        Post({**post.headers, "webhook-signature": "v2," + signature[3:]}, post.body), secret, "no signature"
    )
    _refused(post, "not base64!", "not a whsec_")


def test_a_non_ascii_signature_is_refused_not_a_500(delivered: tuple[str, list[Post]]) -> None:
    """A receiver built as the README says (verify, answer 401 on `WebhookVerificationError`), served by
    uvicorn, sent a real delivery whose `webhook-signature` (or `-timestamp`) holds non-ASCII bytes. On
    a73d9a9 `hmac.compare_digest` raised `TypeError` on the non-ASCII str, so the receiver answered 500
    (and the sender would retry a forgery for a day) instead of refusing it with 401."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from cardcat.stack import ServerThread

    secret, posts = delivered
    post = posts[0]

    async def hook(request: Request) -> Response:
        try:
            verify_webhook(await request.body(), request.headers, secret)
        except WebhookVerificationError:
            return Response(status_code=401)
        return Response(status_code=204)

    app = Starlette(routes=[Route("/hook", hook, methods=["POST"])])
    signature = post.headers["webhook-signature"]
    stamp = post.headers["webhook-timestamp"]
    arabic = stamp.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    forged = [
        {"webhook-signature": signature[:-2].encode() + "é=".encode()},
        {"webhook-signature": b"v1," + "²".encode() * 44},
        {"webhook-signature": b"v1,\xff\xfe"},  # not UTF-8: read as Latin-1 by the receiver
        {"webhook-timestamp": arabic.encode()},  # int() reads other scripts' digits
    ]
    with ServerThread(app) as server, httpx.Client(base_url=f"http://127.0.0.1:{server.port}") as client:
        sent = post.headers.items()
        plain = {k.lower().encode(): v.encode("latin-1") for k, v in sent if k.lower() != "content-length"}
        assert client.post("/hook", content=post.body, headers=plain).status_code == 204
        for change in forged:
            headers = {**plain, **{name.encode(): value for name, value in change.items()}}
            assert client.post("/hook", content=post.body, headers=headers).status_code == 401, change
    for change in forged:
        value = next(iter(change.values())).decode("latin-1")
        with pytest.raises(WebhookVerificationError):
            verify_webhook(post.body, {**post.headers, next(iter(change)): value}, secret)
