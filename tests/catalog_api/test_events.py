"""Outbound events, end to end: the real `cardcat catalog sync` writes the outbox in PostgreSQL, the real
`cardcat events deliver` process posts it to a real webhook receiver on 127.0.0.1 (a thread in this
process) that checks every signature with the `standardwebhooks` library.

- Each catalog change emits exactly the events the spec names for it, and nothing else.
- A change of more than 500 records arrives in chunks (`chunk.index` 0-based) that reassemble exactly.
- Delivery is at least once and in order: a receiver failing for a while, or a deliverer killed
  mid-post, ends with every event delivered (by id); 410 disables the endpoint; redirects are not
  followed; a tampered body fails verification.
- Hostile receivers (issue 17): an odd `Retry-After` or a NUL in the error page costs one recorded,
  backed-off attempt and never holds up another endpoint; an answer dripped a byte at a time is cut
  off at the post's deadline.

The feed is the project's own sample catalog (`cardcat catalog demo-feed`), so nothing here needs
../shared. Retries are configured sub-second (CARDCAT_WEBHOOKS_BACKOFF_*), the receiver is on loopback
(CARDCAT_WEBHOOKS_ALLOW_PRIVATE=true). Test servers run no deliverer (cardcat/stack.py) except in the
test of `cardcat serve` itself; each test starts the deliverer it needs.
"""

from __future__ import annotations

import gzip
import json
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import httpx
import orjson
import psycopg
import pytest
from sqlalchemy import Engine
from standardwebhooks import Webhook, WebhookVerificationError

from cardcat.stack import CARDCAT, REPO, Service, create_database
from catalog_api.catalog.readmodel import RECHECK_S
from catalog_api.events.deliverer import backoff_s, parse_retry_after
from catalog_api.events.endpoints import URLRefused, add_endpoint, remove_endpoint
from catalog_api.events.secret_box import webhook_box
from catalog_api.ingest.demo_catalog import write_demo_catalog
from catalog_api.kit.db import make_engine
from catalog_api.kit.settings import Settings
from catalog_api.prices.demo_prices import write_demo_prices
from tests.catalog_api.helpers import eventually, ok

Record = dict[str, Any]
T = TypeVar("T")
EVENT_ID = re.compile(r"evt_[0-9A-HJKMNP-TV-Z]{26}")
CREATED_AT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
CARD_KEYS = {
    "id",
    "expansion_id",
    "number",
    "name",
    "rarity",
    "illustrator",
    "image",
    "category",
    "metadata",
    "variants",
}
PRODUCT_KEYS = {"id", "name", "clean_name", "number", "image", "marketplace_url", "expansions", "marketplace"}
ENV = {
    "CARDCAT_WEBHOOKS_ALLOW_PRIVATE": "true",
    "CARDCAT_WEBHOOKS_BACKOFF_BASE_S": "0.05",
    "CARDCAT_WEBHOOKS_BACKOFF_CAP_S": "0.2",
    "CARDCAT_WEBHOOKS_POLL_S": "0.2",
    "CARDCAT_WEBHOOKS_CONCURRENCY": "2",  # two workers: per-endpoint order must hold across them
    "CARDCAT_WEBHOOKS_TIMEOUT_S": "5",
}


# --- the receiver ------------------------------------------------------------------------------------


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    verified: bool
    status: int
    at: float

    @property
    def event(self) -> Record:
        parsed: Record = json.loads(self.body)
        return parsed


@dataclass
class Receiver:
    """A webhook receiver: answers 500 to the first `fail_first` posts (503 + `Retry-After: retry_after`,
    raw bytes, to the first `retry_after_first` of those), then `status` (200, 410, 307 to /elsewhere);
    failures carry `error_body`. With `hang` set it holds the first post until `release` is set; with
    `drip` set it answers every post one header byte every half second for 30 s (a peer that never
    trips a per-read timeout). Every post is recorded with whether its signature verified."""

    secret: str = ""
    fail_first: int = 0
    retry_after_first: int = 0
    status: int = 200
    retry_after: bytes = b"1"
    error_body: bytes = b""
    hang: bool = False
    drip: bool = False
    release: threading.Event = field(default_factory=threading.Event)
    in_flight: threading.Event = field(default_factory=threading.Event)
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                receiver.handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        body = request.rfile.read(int(request.headers.get("content-length", 0)))
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            Webhook(self.secret).verify(body, headers)
            verified = True
        except WebhookVerificationError:
            verified = False
        with self.lock:
            first = not self.received
            failing = request.path == "/hook" and len(self.received) < self.fail_first
            slow = len(self.received) < self.retry_after_first
            status = 401 if not verified else 500 if failing else self.status
            if request.path != "/hook":
                status = 200
            if failing and slow:
                status = 503
            self.received.append(Received(request.path, headers, body, verified, status, time.monotonic()))
        if first and self.hang:
            self.in_flight.set()
            self.release.wait(30)
        body = self.error_body if status >= 300 else b""
        head = [f"HTTP/1.0 {status} Answer".encode(), b"Content-Length: %d" % len(body)]
        if status == 503:
            head.append(b"Retry-After: " + self.retry_after)  # as sent: odd values included
        if status == 307:
            head.append(b"Location: /elsewhere")
        try:
            if self.drip:
                request.wfile.write(b"HTTP/1.0 200 OK\r\nX-Drip: ")
                for _ in range(60):
                    request.wfile.write(b"z")
                    request.wfile.flush()
                    time.sleep(0.5)
                request.wfile.write(b"\r\nContent-Length: 0\r\n\r\n")
                return
            request.wfile.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
        except OSError:
            pass  # the deliverer is gone (killed mid-post, or it gave up on a drip)

    def accepted(self) -> list[Record]:
        """Bodies of the posts answered 2xx, in arrival order."""
        with self.lock:
            return [r.event for r in self.received if 200 <= r.status < 300 and r.path == "/hook"]

    def clear(self) -> None:
        with self.lock:
            self.received.clear()


# --- the deployment ----------------------------------------------------------------------------------


def read_records(folder: Path, name: str) -> list[Record]:
    with gzip.open(folder / f"{name}.jsonl.gz", "rb") as handle:
        return [orjson.loads(line) for line in handle if line.strip()]


def edit(folder: Path, name: str, change: Callable[[list[Record]], list[Record]]) -> None:
    records = change(read_records(folder, name))
    with gzip.open(folder / f"{name}.jsonl.gz", "wb") as handle:
        handle.writelines(orjson.dumps(record) + b"\n" for record in records)


@dataclass
class Deployment:
    service: Service
    feed: Path
    client: httpx.Client
    initial: list[Record]  # what the first sync delivered to the receiver below
    first: Receiver

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.service.db.url) as conn:
            return list(conn.execute(query, params).fetchall())

    def last_seq(self) -> int:
        return int(self.sql("SELECT coalesce(max(seq), 0) FROM events")[0][0])

    def outbox_after(self, seq: int) -> list[tuple[int, str, str]]:
        return [
            (r[0], r[1], r[2])
            for r in self.sql("SELECT seq, id, name FROM events WHERE seq > %s ORDER BY seq", seq)
        ]

    def subscribe(self, receiver: Receiver) -> int:
        """`cardcat webhooks add`: the secret is the last line of its output."""
        out = self.service.cli("webhooks", "add", receiver.url).stdout.strip().splitlines()
        receiver.secret = out[-1]
        assert receiver.secret.startswith("whsec_"), out
        return int(out[0].split()[2])

    def settings(self) -> Settings:
        return Settings(database_url=self.service.db.url, data_dir=self.service.data_dir)

    def engine(self) -> Engine:
        return make_engine(self.settings())

    def quick_subscribe(self, receiver: Receiver) -> int:
        """The code `webhooks add` runs, in-process (each CLI start costs a second or two here)."""
        engine, box = self.engine(), webhook_box(self.settings())
        try:
            endpoint_id, receiver.secret = add_endpoint(engine, receiver.url, True, box)
        finally:
            engine.dispose()
        return endpoint_id

    def quick_unsubscribe(self, endpoint_id: int) -> None:
        engine = self.engine()
        try:
            assert remove_endpoint(engine, endpoint_id)
        finally:
            engine.dispose()

    def sync(self) -> dict[str, Any]:
        result = self.service.cli("catalog", "sync", "--from", str(self.feed), "--quiet")
        report: dict[str, Any] = json.loads(result.stdout)
        return report

    def deliver_once(self) -> dict[str, int]:
        counts: dict[str, int] = json.loads(self.service.cli("events", "deliver", "--once").stdout)
        return counts

    def deliverer(self) -> subprocess.Popen[str]:
        """`cardcat events deliver` running until stopped (logs to a file beside the data dir)."""
        with open(self.service.data_dir.parent / "deliverer.log", "a") as log:  # the child keeps its copy
            return subprocess.Popen(
                [*CARDCAT, "events", "deliver"],
                env=self.service.env,
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )

    def pending(self, endpoint_id: int) -> int:
        query = "SELECT count(*) FROM deliveries WHERE endpoint_id = %s AND delivered_at IS NULL"
        return int(self.sql(query, endpoint_id)[0][0])


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """PostgreSQL, the sample catalog synced while one receiver was subscribed, and a server (for reads)."""
    root = tmp_path_factory.mktemp("events")
    service = Service(create_database("postgresql", root), root / "data", dict(ENV))
    receiver = Receiver().start()
    try:
        service.cli("db", "upgrade")
        feed = write_demo_catalog(root / "feed")
        service.start()
        with service.client() as client:
            deployment = Deployment(service, feed, client, [], receiver)
            endpoint = deployment.subscribe(receiver)
            deployment.sync()
            assert deployment.deliver_once()["delivered"] == 4
            deployment.initial = receiver.accepted()
            deployment.quick_unsubscribe(endpoint)
            yield deployment
    finally:
        receiver.stop()
        service.stop()


@pytest.fixture
def receiver(deployment: Deployment) -> Iterator[tuple[Receiver, int]]:
    """A fresh receiver subscribed for one test (unsubscribed after it)."""
    receiver = Receiver().start()
    endpoint = deployment.quick_subscribe(receiver)
    yield receiver, endpoint
    receiver.stop()
    if deployment.sql("SELECT 1 FROM webhook_endpoints WHERE id = %s", endpoint):
        deployment.quick_unsubscribe(endpoint)
    assert all(r.verified for r in receiver.received), "every post must carry a valid signature"


def change_and_deliver(
    deployment: Deployment, receiver: Receiver, sync: Callable[[], Any] | None = None
) -> list[Record]:
    """Sync the edited feed (or run `sync`) while a deliverer runs; the receiver must get exactly the
    events the sync wrote (it commits them with the data, so they are all there when it returns), each
    once, in outbox order. Returns their bodies."""
    since = deployment.last_seq()
    receiver.clear()
    (sync or deployment.sync)()
    outbox = deployment.outbox_after(since)
    expected = [event_id for _, event_id, _ in outbox]
    bodies = eventually(lambda: _equal(receiver.accepted(), expected), timeout=20)
    assert [b["name"] for b in bodies] == [name for _, _, name in outbox]
    for body in bodies:
        assert EVENT_ID.fullmatch(body["id"]) and CREATED_AT.fullmatch(body["created_at"]), body
        assert set(body) == {"id", "name", "created_at", "data"}, "no chunk key below 501 records"
    return bodies


def _equal(bodies: list[Record], ids: list[str]) -> list[Record]:
    assert [b["id"] for b in bodies] == ids
    return bodies


def names(bodies: list[Record]) -> list[str]:
    return [b["name"] for b in bodies]


def served_card(deployment: Deployment, card_id: str) -> Record:
    """`GET /v1/cards/{id}` less `palette` (events carry none)."""
    card: Record = ok(deployment.client.get(f"/v1/cards/{card_id}"))
    del card["palette"]
    return card


def assert_served(deployment: Deployment, record: Record, path: str | None = None) -> None:
    """The event's record is what `/v1` serves (a card by default; the server follows a sync within
    RECHECK_S), so one decoder covers both."""

    def same() -> None:
        served = served_card(deployment, record["id"]) if path is None else ok(deployment.client.get(path))
        assert served == record

    eventually(same, timeout=RECHECK_S + 5)


# --- which change emits what -------------------------------------------------------------------------


def test_first_sync_announces_every_series_expansion_card_and_product(deployment: Deployment) -> None:
    feed = deployment.feed
    bodies = deployment.initial
    assert names(bodies) == [
        "cardgame.series.created",
        "cardgame.expansions.created",
        "cardgame.cards.updated",
        "cardgame.products.updated",
    ]
    series, expansions, cards, products = (b["data"] for b in bodies)
    assert [s["id"] for s in series["series"]] == [r["id"] for r in read_records(feed, "series")]
    assert [e["id"] for e in expansions["expansions"]] == [r["id"] for r in read_records(feed, "expansions")]
    assert [c["id"] for c in cards["cards"]] == [r["id"] for r in read_records(feed, "cards")]
    assert [p["id"] for p in products["products"]] == [r["id"] for r in read_records(feed, "products")]
    assert all(set(c) == CARD_KEYS for c in cards["cards"])
    assert all(set(p) == PRODUCT_KEYS for p in products["products"])
    assert len({b["created_at"] for b in bodies}) >= 1 and len({b["id"] for b in bodies}) == 4
    assert [b["id"] for b in bodies] == sorted(b["id"] for b in bodies), "ids sort in emission order"


def test_each_catalog_change_emits_exactly_its_events(
    deployment: Deployment, receiver: tuple[Receiver, int]
) -> None:
    hook, _ = receiver
    feed = deployment.feed
    process = deployment.deliverer()
    try:
        _catalog_changes(deployment, hook, feed)
    finally:
        stop(process)


def _catalog_changes(deployment: Deployment, hook: Receiver, feed: Path) -> None:
    def step(*changes: tuple[str, Callable[[list[Record]], list[Record]]]) -> list[Record]:
        for name, change in changes:
            edit(feed, name, change)
        return change_and_deliver(deployment, hook)

    def where(key: Any, value: Any, **fields: Any) -> Callable[[list[Record]], list[Record]]:
        return lambda rows: [{**r, **fields} if r[key] == value else r for r in rows]

    # An idempotent re-sync emits nothing.
    assert step() == []

    # A renamed card: cards.updated carrying the card as `GET /v1/cards/{id}` serves it.
    bodies = step(("cards", where("id", "emb1-1", name="Renamed")))
    assert names(bodies) == ["cardgame.cards.updated"] and set(bodies[0]["data"]) == {"cards"}
    (record,) = bodies[0]["data"]["cards"]
    assert set(record) == CARD_KEYS and record["name"] == "Renamed"
    assert_served(deployment, record)

    # A new card.
    def add_card(rows: list[Record]) -> list[Record]:
        model = next(r for r in rows if r["id"] == "emb1-2")
        return [*rows, {**model, "id": "emb1-900", "number": "900", "name": "Newcomer"}]

    bodies = step(("cards", add_card))
    assert names(bodies) == ["cardgame.cards.updated"]
    assert [(c["id"], c["name"]) for c in bodies[0]["data"]["cards"]] == [("emb1-900", "Newcomer")]

    # A reclassified printing: the card is updated, and the old printing's id deleted.
    old = served_card(deployment, "emb1-5")["variants"][1]

    def reclassify(rows: list[Record]) -> list[Record]:
        for row in rows:
            if row["id"] == "emb1-5":
                row["variants"][1]["type"] = "metal"
        return rows

    bodies = step(("cards", reclassify))
    assert names(bodies) == ["cardgame.cards.updated", "cardgame.card_variants.deleted"]
    (updated,) = bodies[0]["data"]["cards"]
    assert bodies[1]["data"] == {"variants": [{"card_id": "emb1-5", "variant_id": old["id"]}]}
    assert updated["variants"][1]["type"] == "metal" and old["id"] not in [
        v["id"] for v in updated["variants"]
    ]
    assert_served(deployment, updated)

    # Products: one renamed, one gone from the feed, one detached from every expansion.
    bodies = step(
        ("products", where("id", 900001, name="Renamed Booster Pack")),
        ("products", lambda rows: [r for r in rows if r["id"] != 900002]),
        ("products", where("id", 900003, expansions=[])),
    )
    assert names(bodies) == ["cardgame.products.updated", "cardgame.products.removed"]
    (product,) = bodies[0]["data"]["products"]
    assert set(product) == PRODUCT_KEYS and (product["id"], product["name"]) == (
        900001,
        "Renamed Booster Pack",
    )
    assert bodies[1]["data"] == {"product_ids": [900002, 900003]}
    assert_served(deployment, product, "/v1/products/900001")

    # A new expansion (sparse, no cards yet) and a corrected expansion name: no series or card events.
    def add_expansion(rows: list[Record]) -> list[Record]:
        return [*rows, {**rows[0], "id": "emb2", "name": "Emberdawn Two", "release_date": "2002-01-01"}]

    bodies = step(("expansions", add_expansion), ("expansions", where("id", "emb1", name="Emberdawn")))
    assert names(bodies) == ["cardgame.expansions.created", "cardgame.expansions.updated"]
    created, corrected = (b["data"]["expansions"] for b in bodies)
    assert [(e["id"], e["name"], e["series_id"]) for e in created] == [("emb2", "Emberdawn Two", "emb")]
    assert [(e["id"], e["name"]) for e in corrected] == [("emb1", "Emberdawn")]
    assert_served(deployment, corrected[0], "/v1/expansions/emb1")

    # A corrected release date re-sorts the expansion's cards but changes no card record.
    bodies = step(("expansions", where("id", "tdw1", release_date="2014-01-01")))
    assert names(bodies) == ["cardgame.expansions.updated"]
    assert [(e["id"], e["release_date"]) for e in bodies[0]["data"]["expansions"]] == [("tdw1", "2014-01-01")]

    # A new series and a renamed one.
    bodies = step(
        ("series", lambda rows: [*rows, {**rows[0], "id": "zzs", "name": "New Series"}]),
        ("series", where("id", "tdw", name="Tides")),
    )
    assert names(bodies) == ["cardgame.series.created", "cardgame.series.updated"]
    assert [(s["id"], s["name"], s["expansions"]) for s in bodies[0]["data"]["series"]] == [
        ("zzs", "New Series", [])
    ]
    (series,) = bodies[1]["data"]["series"]
    assert (series["id"], series["name"], [e["id"] for e in series["expansions"]]) == (
        "tdw",
        "Tides",
        ["tdw1"],
    )
    assert_served(deployment, series, "/v1/series/tdw")

    # Fields no served record carries (a product's MSRP, an expansion's printed set code) change quietly.
    assert (
        step(
            ("products", where("id", 900001, msrp_cents=12345)),
            ("expansions", where("id", "emb1", code="EMB", ptcgo_code="EMB")),
        )
        == []
    )

    # And the same feed once more: nothing.
    assert step() == []

    # A price sync: the day's snapshot files and the products whose prices changed; no card event.
    prices = write_demo_prices(feed, feed.parent / "prices", days=2)

    def price_sync() -> None:
        deployment.service.cli("prices", "sync", "--from", str(prices), "--quiet")

    bodies = change_and_deliver(deployment, hook, price_sync)
    assert names(bodies) == [
        "cardgame.products.updated",
        "cardgame.card_prices.snapshot",
        "cardgame.product_prices.snapshot",
    ]
    assert {p["id"] for p in bodies[0]["data"]["products"]} == {900001, 900004, 900005, 900006}
    for body in bodies[1:]:
        assert body["data"]["currency"] == "USD" and len(body["data"]["snapshot"]) == 1
    assert change_and_deliver(deployment, hook, price_sync) == []  # the same days again: nothing


def test_a_change_of_1200_cards_arrives_in_chunks_that_reassemble(
    deployment: Deployment, receiver: tuple[Receiver, int]
) -> None:
    hook, _ = receiver
    new_ids = [f"emb1-c{i:04d}" for i in range(1200)]

    def add(rows: list[Record]) -> list[Record]:
        model = next(r for r in rows if r["id"] == "emb1-3")
        return [
            *rows,
            *({**model, "id": card_id, "number": str(2000 + i)} for i, card_id in enumerate(new_ids)),
        ]

    def rename(rows: list[Record]) -> list[Record]:
        return [{**r, "name": f"Bulk {r['id']}"} if r["id"] in set(new_ids) else r for r in rows]

    for change in (add, rename):
        edit(deployment.feed, "cards", change)
        since = deployment.last_seq()
        hook.clear()
        deployment.sync()
        deployment.deliver_once()
        bodies = hook.accepted()
        assert [b["id"] for b in bodies] == [event_id for _, event_id, _ in deployment.outbox_after(since)]
        assert names(bodies) == ["cardgame.cards.updated"] * 3
        assert [b["chunk"] for b in bodies] == [{"index": i, "of": 3} for i in range(3)]
        assert [len(b["data"]["cards"]) for b in bodies] == [500, 500, 200]
        assert len({b["created_at"] for b in bodies}) == 1, "one change, one timestamp"
        cards = [card for b in bodies for card in b["data"]["cards"]]
        assert [c["id"] for c in cards] == new_ids
        assert all(set(c) == CARD_KEYS for c in cards)
    assert {c["name"] for c in cards} == {f"Bulk {card_id}" for card_id in new_ids}
    assert_served(deployment, cards[777])


# --- delivery ----------------------------------------------------------------------------------------


def rename_three_things(deployment: Deployment, tag: str) -> None:
    """A change that causes three events (expansions.updated, cards.updated, products.updated)."""
    edit(
        deployment.feed,
        "expansions",
        lambda rows: [{**r, "name": f"Exp {tag}"} if r["id"] == "embp" else r for r in rows],
    )
    edit(
        deployment.feed,
        "cards",
        lambda rows: [{**r, "name": f"Card {tag}"} if r["id"] == "emb1-7" else r for r in rows],
    )
    edit(
        deployment.feed,
        "products",
        lambda rows: [{**r, "name": f"Prod {tag}"} if r["id"] == 900004 else r for r in rows],
    )
    deployment.sync()


def stop(process: subprocess.Popen[str]) -> dict[str, int]:
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=15)
    assert process.returncode == 0, out
    counts: dict[str, int] = json.loads(out.strip().splitlines()[-1])
    return counts


def test_a_receiver_failing_for_a_while_gets_every_event_once_in_order(
    deployment: Deployment, receiver: tuple[Receiver, int]
) -> None:
    hook, endpoint = receiver
    hook.fail_first, hook.retry_after_first = 6, 1  # 503 + Retry-After: 1, then five 500s
    since = deployment.last_seq()
    rename_three_things(deployment, "flaky")
    outbox = [event_id for _, event_id, _ in deployment.outbox_after(since)]
    assert len(outbox) == 3
    process = deployment.deliverer()
    try:
        eventually(lambda: _assert(deployment.pending(endpoint) == 0), timeout=20)
    finally:
        counts = stop(process)
    assert [b["id"] for b in hook.accepted()] == outbox, "each event exactly once, in outbox order"
    assert counts == {"delivered": 3, "retry": 6, "disabled": 0}
    first = [r for r in hook.received if r.event["id"] == outbox[0]]
    assert [r.status for r in first] == [503, 500, 500, 500, 500, 500, 200], "the head blocks the rest"
    assert {r.headers["webhook-id"] for r in first} == {outbox[0]}, "webhook-id is stable across retries"
    assert first[1].at - first[0].at >= 0.95, "Retry-After: 1 was honoured"


def test_a_deliverer_killed_mid_post_loses_nothing(
    deployment: Deployment, receiver: tuple[Receiver, int]
) -> None:
    hook, endpoint = receiver
    hook.hang = True
    since = deployment.last_seq()
    rename_three_things(deployment, "killed")
    outbox = [event_id for _, event_id, _ in deployment.outbox_after(since)]
    process = deployment.deliverer()
    assert hook.in_flight.wait(20), "the deliverer never posted"
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    hook.release.set()  # the receiver answers 200 to a deliverer that is gone
    assert deployment.pending(endpoint) == 3, "nothing may count as delivered without its 2xx"
    process = deployment.deliverer()
    try:
        eventually(lambda: _assert(deployment.pending(endpoint) == 0), timeout=20)
    finally:
        stop(process)
    arrived = [r.event["id"] for r in hook.received]
    assert arrived == [outbox[0], *outbox], "the post in flight is sent again; the rest once, in order"


def test_410_gone_disables_the_endpoint_and_stops_its_deliveries(
    deployment: Deployment, receiver: tuple[Receiver, int]
) -> None:
    hook, endpoint = receiver
    hook.status = 410
    since = deployment.last_seq()
    rename_three_things(deployment, "gone")
    owed = [event_id for _, event_id, _ in deployment.outbox_after(since)]
    assert deployment.deliver_once() == {"delivered": 0, "retry": 0, "disabled": 1}
    assert len(hook.received) == 1
    listed = deployment.service.cli("webhooks", "list").stdout
    line = next(row for row in listed.splitlines() if row.startswith(f"{endpoint}\t"))
    assert "disabled (the receiver answered 410 Gone" in line and "pending=3" in line
    rename_three_things(deployment, "gone again")
    assert deployment.pending(endpoint) == 3, "a disabled endpoint is owed nothing new"
    assert len(hook.received) == 1, "and gets nothing more"

    # `webhooks enable` resumes it from the first undelivered event; `remove` drops it.
    hook.status = 200
    deployment.service.cli("webhooks", "enable", str(endpoint))
    assert deployment.deliver_once() == {"delivered": 3, "retry": 0, "disabled": 0}
    assert [b["id"] for b in hook.accepted()] == owed
    deployment.service.cli("webhooks", "remove", str(endpoint))
    assert not deployment.sql("SELECT 1 FROM deliveries WHERE endpoint_id = %s", endpoint)


def test_a_redirect_is_not_followed(deployment: Deployment, receiver: tuple[Receiver, int]) -> None:
    hook, endpoint = receiver
    hook.status = 307
    since = deployment.last_seq()
    rename_three_things(deployment, "redirected")
    head = deployment.outbox_after(since)[0][0]
    assert deployment.deliver_once() == {"delivered": 0, "retry": 1, "disabled": 0}
    assert [r.path for r in hook.received] == ["/hook"], "the Location was never requested"
    row = deployment.sql(
        "SELECT attempts, last_status, delivered_at, last_error FROM deliveries"
        " WHERE endpoint_id = %s AND event_seq = %s",
        endpoint,
        head,
    )
    assert row[0][:3] == (1, 307, None) and "not followed" in row[0][3]


def test_the_signature_verifies_and_a_tampered_body_does_not(deployment: Deployment) -> None:
    """The first sync's posts, signed with the secret `cardcat webhooks add` printed."""
    hook = deployment.first
    assert len(hook.received) == 4 and all(post.verified for post in hook.received)
    post = hook.received[0]
    headers = post.headers
    assert headers["webhook-id"] == post.event["id"] and headers["content-type"] == "application/json"
    assert abs(int(headers["webhook-timestamp"]) - datetime.now(UTC).timestamp()) < 300
    assert re.fullmatch(r"v1,[A-Za-z0-9+/]{43}=", headers["webhook-signature"])
    assert Webhook(hook.secret).verify(post.body, headers) == post.event
    tampered = post.body.replace(b'"data":{', b'"data":{"x":1,', 1)
    assert tampered != post.body
    with pytest.raises(WebhookVerificationError):
        Webhook(hook.secret).verify(tampered, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + "A" * 43 + "=").verify(post.body, headers)
    with pytest.raises(WebhookVerificationError):  # the same body and signature under another id
        Webhook(hook.secret).verify(post.body, {**headers, "webhook-id": hook.received[1].event["id"]})


# --- subscribing, and the deliverer beside `cardcat serve` ---------------------------------------------


def test_add_accepts_only_http_urls_of_public_hosts(deployment: Deployment) -> None:
    env = {**deployment.service.env, "CARDCAT_WEBHOOKS_ALLOW_PRIVATE": "false"}
    for url, why in (
        ("ftp://example.com/hook", "only http and https"),
        ("http://127.0.0.1:9/", "non-public"),
    ):
        command = [*CARDCAT, "webhooks", "add", url]
        result = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
        assert result.returncode != 0 and why in result.stderr, (url, result.stderr)
    engine, box = deployment.engine(), webhook_box(deployment.settings())
    try:
        for url in ("file:///etc/passwd", "http://user:pw@example.com/", "not a url", "http:///x"):
            with pytest.raises(URLRefused):
                add_endpoint(engine, url, True, box)
        for url in ("http://localhost/", "http://10.0.0.1/", "http://[::1]/", "https://169.254.169.254/"):
            with pytest.raises(URLRefused, match="non-public"):
                add_endpoint(engine, url, False, box)
    finally:
        engine.dispose()
    assert not deployment.sql("SELECT 1 FROM webhook_endpoints WHERE url LIKE %s", "%example.com%")


def test_serve_runs_the_deliverer_and_stops_it(
    deployment: Deployment, receiver: tuple[Receiver, int]
) -> None:
    hook, endpoint = receiver
    service = deployment.service
    service.start(CARDCAT_DELIVER_EVENTS="true")
    server = service.processes[-1]
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
    (child,) = [int(pid) for pid in children if "deliver" in Path(f"/proc/{pid}/cmdline").read_text()]
    rename_three_things(deployment, "served")
    eventually(lambda: _assert(deployment.pending(endpoint) == 0), timeout=20)
    assert len(hook.accepted()) == 3
    server.terminate()
    server.wait(30)
    service.processes.remove(server)
    eventually(lambda: _assert(not Path(f"/proc/{child}").exists()), timeout=15)


def test_prune_drops_old_delivered_events_and_keeps_what_an_endpoint_is_owed(
    deployment: Deployment, receiver: tuple[Receiver, int]
) -> None:
    hook, endpoint = receiver
    hook.status = 503
    since = deployment.last_seq()
    rename_three_things(deployment, "prune")
    owed = [seq for seq, _, _ in deployment.outbox_after(since)]
    assert len(owed) == 3 and deployment.pending(endpoint) == 3
    # Everything but the newest older event becomes 40 days old, the three owed ones included.
    aged = deployment.sql(
        "UPDATE events SET created_at = created_at - interval '40 days' WHERE seq <> %s RETURNING seq", since
    )
    assert len(aged) > 3

    def prune() -> int:
        out = deployment.service.cli("events", "prune", "--older-than-days", "30").stdout
        return int(json.loads(out)["pruned"])

    assert prune() == len(aged) - 3
    assert [r[0] for r in deployment.sql("SELECT seq FROM events ORDER BY seq")] == [since, *owed]
    hook.status = 200
    assert deployment.deliver_once()["delivered"] == 3  # what was owed still arrives
    assert prune() == 3 and deployment.last_seq() == since  # and, once delivered, goes too
    assert not deployment.sql("SELECT 1 FROM deliveries WHERE event_seq <> %s", since)


def _assert(condition: bool) -> None:
    assert condition


def test_retry_after_and_the_backoff_schedule() -> None:
    """Pure functions of the retry policy: Retry-After in both forms, and the documented schedule."""
    now = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("120", now) == 120.0
    assert parse_retry_after("Sun, 22 Nov 2026 12:01:30 GMT", now) == 90.0
    assert parse_retry_after("Sun, 22 Nov 2026 11:00:00 GMT", now) == 0.0
    assert parse_retry_after("soon", now) is None and parse_retry_after(None, now) is None
    settings = Settings()
    nominal = [min(3600.0, 5.0 * 2 ** (n - 1)) for n in range(1, settings.webhooks_max_attempts)]
    for n, delay in enumerate(nominal, start=1):
        assert 0.8 * delay <= backoff_s(n, settings) <= 1.2 * delay
    assert 23 * 3600 < sum(nominal) < 24 * 3600, "the endpoint is given up on after about a day"
    assert backoff_s(1, settings, retry_after=600.0) == 600.0
    assert backoff_s(1, settings, retry_after=10**9) == 24 * 3600.0


# --- hostile receivers -------------------------------------------------------------------------------


@pytest.fixture
def healthy(deployment: Deployment) -> Iterator[tuple[Receiver, int]]:
    """A second receiver, answering 200, subscribed beside `receiver` for one test."""
    receiver = Receiver().start()
    endpoint = deployment.quick_subscribe(receiver)
    yield receiver, endpoint
    receiver.stop()
    deployment.quick_unsubscribe(endpoint)


def head_delivery(deployment: Deployment, endpoint: int, since: int) -> tuple[Any, ...]:
    """(attempts, last_status, delivered_at, last_error, next try as a Unix time) of the endpoint's
    first event after `since`."""
    rows = deployment.sql(
        "SELECT attempts, last_status, delivered_at, last_error,"
        " extract(epoch FROM next_attempt_at)::float8 FROM deliveries"
        " WHERE endpoint_id = %s AND event_seq > %s ORDER BY event_seq LIMIT 1",
        endpoint,
        since,
    )
    return rows[0]


@pytest.mark.parametrize(
    ("retry_after", "error_body"),
    [
        (b"\xb2", b""),  # latin-1 superscript two: str.isdigit() is true, float() fails
        ("²³".encode(), b""),
        ("١٢".encode(), b""),  # Arabic-Indic digits: not delay-seconds, ignored
        (b"Fri, 31 Dec 99999 23:59:59 GMT", b""),
        (b"1", b"the error page says \x00 (PostgreSQL text holds no NUL)"),
    ],
    ids=["latin1-superscript", "utf8-superscripts", "arabic-indic", "year-99999", "nul-in-body"],
)
def test_an_odd_receiver_costs_one_failed_attempt_and_starves_no_one(
    deployment: Deployment,
    receiver: tuple[Receiver, int],
    healthy: tuple[Receiver, int],
    retry_after: bytes,
    error_body: bytes,
) -> None:
    """Issue 17 row 3: whatever a receiver answers, its attempt is recorded as a failure with backoff
    (before, an unreadable Retry-After or a NUL in the error page escaped unrecorded: `--once` crashed,
    the endpoint was posted again every poll and the other endpoints waited)."""
    bad, bad_endpoint = receiver
    good, _ = healthy
    bad.fail_first = bad.retry_after_first = 1000
    bad.retry_after, bad.error_body = retry_after, error_body
    since = deployment.last_seq()
    rename_three_things(deployment, f"odd {retry_after!r}")
    owed = [event_id for _, event_id, _ in deployment.outbox_after(since)]
    started = time.time()
    assert deployment.deliver_once() == {"delivered": 3, "retry": 1, "disabled": 0}
    assert [b["id"] for b in good.accepted()] == owed, "the healthy endpoint got everything, in order"
    assert len(bad.received) == 1
    attempts, status, delivered_at, error, next_at = head_delivery(deployment, bad_endpoint, since)
    assert (attempts, status, delivered_at) == (1, 503, None)
    assert error.startswith("HTTP 503") and "\x00" not in error
    assert started < next_at <= time.time() + 24 * 3600, "retried after a backoff"


def test_a_receiver_dripping_its_answer_is_cut_off_at_the_deadline(
    deployment: Deployment, receiver: tuple[Receiver, int], healthy: tuple[Receiver, int]
) -> None:
    """Issue 17 row 4: one header byte every half second never trips a per-read timeout; the whole post
    has a deadline (CARDCAT_WEBHOOKS_TIMEOUT_S, 5 s here) and missing it is a failed attempt."""
    slow, slow_endpoint = receiver
    good, _ = healthy
    slow.drip = True
    since = deployment.last_seq()
    rename_three_things(deployment, "drip")
    started = time.monotonic()
    assert deployment.deliver_once() == {"delivered": 3, "retry": 1, "disabled": 0}
    took = time.monotonic() - started
    assert took < 5 + 10, f"the deliverer was held {took:.1f} s by a 30 s drip"
    assert len(good.accepted()) == 3
    attempts, status, delivered_at, error, next_at = head_delivery(deployment, slow_endpoint, since)
    assert (attempts, status, delivered_at) == (1, None, None)
    assert "5 s deadline" in error and next_at > time.time() - took
