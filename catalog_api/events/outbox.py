"""The event outbox: events are rows written in the transaction of the change that causes them.

`emit` writes each event's delivery body (exactly the JSON that will be sent and signed) into `events`
and a `deliveries` row beside it for every active webhook endpoint, so a change and its events commit
together or not at all; `catalog_api.events.deliverer` sends them later. The record helpers build the payloads
with `catalog_api.kit.records`, the same shapes the `/v1` reads serve.

A group of more than CHUNK_SIZE records is split into several events of at most CHUNK_SIZE records,
each with `chunk: {index, of}`; `index` is 0-based (0 … of-1). A smaller group carries no `chunk` key.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import Connection, DateTime, Integer, delete, insert, literal, select
from sqlalchemy.orm import Session

from catalog_api.events.tables import Delivery, Event, WebhookEndpoint
from catalog_api.kit import records
from catalog_api.kit.models import (
    Card,
    CardPriceCurrent,
    CardVariant,
    Expansion,
    Product,
    ProductPriceCurrent,
    Series,
)
from catalog_api.kit.records import SUMMARY_COLUMNS
from core.vocabulary import CONDITION_ORDER, GAME

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

CHUNK_SIZE = 500

Record = dict[str, Any]


# --- ids and timestamps ------------------------------------------------------------------------------

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_id_lock = threading.Lock()
_last: list[int] = [0, 0]  # [milliseconds, randomness] of the last id made in this process


def new_event_id() -> str:
    """`evt_` + a ULID: 48 bits of Unix milliseconds, then 80 random bits, in Crockford base32.

    Ids sort by creation time; within one millisecond of one process the random part counts up, so they
    also sort in the order they were made (the order of `seq`)."""
    with _id_lock:
        millis = time.time_ns() // 1_000_000
        if millis <= _last[0]:
            millis, randomness = _last[0], _last[1] + 1
        else:
            randomness = int.from_bytes(os.urandom(10), "big") >> 1  # room to count up
        _last[:] = [millis, randomness]
    value = (millis << 80) | randomness
    return "evt_" + "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def timestamp(moment: datetime) -> str:
    """ISO 8601 UTC with milliseconds and `Z`, e.g. `2026-11-22T14:05:53.176Z`."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


# --- the outbox --------------------------------------------------------------------------------------


def emit(
    session: Session | Connection,
    name: str,
    key: str,
    records: Sequence[Any],
    extra: dict[str, Any] | None = None,
) -> list[str]:
    """Write event `cardgame.<name>` with data {key: records, **extra} into the outbox in the caller's
    transaction (an ORM session's, or a connection's: the batch queue writes its events from one),
    split into deliveries of at most 500 records each carrying `chunk {index, of}` (index 0-based) when
    more than 500 (no `chunk` key otherwise); a delivery row per active endpoint is written beside each
    event. Returns the event ids. No-op for empty records."""
    batches = (records[start : start + CHUNK_SIZE] for start in range(0, len(records), CHUNK_SIZE))
    return emit_batches(session, name, key, len(records), batches, extra)


def emit_batches(
    session: Session | Connection,
    name: str,
    key: str,
    total: int,
    batches: Iterable[Sequence[Any]],
    extra: dict[str, Any] | None = None,
) -> list[str]:
    """`emit` for records built batch by batch (each at most CHUNK_SIZE, `total` in all), so a change to
    the whole catalog never holds every record in memory at once."""
    if total <= 0:
        return []
    count = -(-total // CHUNK_SIZE)
    now = datetime.now(UTC)
    now = now.replace(microsecond=now.microsecond // 1000 * 1000)  # the body says milliseconds
    ids: list[str] = []
    for index, batch in enumerate(batches):
        assert len(batch) <= CHUNK_SIZE and index < count, "batches must match total and CHUNK_SIZE"
        event_id = new_event_id()
        body: Record = {
            "id": event_id,
            "name": f"{GAME}.{name}",
            "created_at": timestamp(now),
            "data": {key: list(batch), **(extra or {})},
        }
        if count > 1:
            body["chunk"] = {"index": index, "of": count}
        _write(session, event_id, body["name"], now, orjson.dumps(body).decode())
        ids.append(event_id)
    assert len(ids) == count, "batches must match total"
    return ids


def _write(session: Session | Connection, event_id: str, name: str, now: datetime, body: str) -> None:
    seq = session.execute(
        insert(Event).values(id=event_id, name=name, created_at=now, body=body).returning(Event.seq)
    ).scalar_one()
    owed = select(
        literal(seq, Integer),
        WebhookEndpoint.id,
        literal(0, Integer),
        literal(now, DateTime(timezone=True)),
    ).where(WebhookEndpoint.disabled_at.is_(None))
    session.execute(
        insert(Delivery).from_select(["event_seq", "endpoint_id", "attempts", "next_attempt_at"], owed)
    )


def prune(engine: Engine, older_than: timedelta, now: datetime | None = None) -> int:
    """Delete the events older than `older_than` that no endpoint is still owed (their delivery rows go
    with them: ON DELETE CASCADE); returns how many went. An event a disabled endpoint has not received
    stays for `webhooks enable`."""
    cutoff = (now or datetime.now(UTC)) - older_than
    owed = select(Delivery.event_seq).where(Delivery.delivered_at.is_(None))
    with engine.begin() as conn:
        return conn.execute(delete(Event).where(Event.created_at < cutoff, Event.seq.not_in(owed))).rowcount


def slices(items: Sequence[Any], size: int = CHUNK_SIZE) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _condition_rank(row: Any) -> tuple[int, str]:
    return CONDITION_ORDER.get(row.condition, len(CONDITION_ORDER)), row.condition


# --- records -----------------------------------------------------------------------------------------


def card_event_records(session: Session, card_ids: Sequence[str], public_url: str) -> list[Record]:
    """Card records for `cardgame.cards.updated`, in the order of `card_ids` (unknown ids are left out):
    the full card object of `GET /v1/cards/{id}`, variants in feed order with their current prices."""
    if not card_ids:
        return []
    columns = (*SUMMARY_COLUMNS, Card.card_metadata)
    cards: dict[str, Any] = {}
    variants: dict[str, list[Any]] = {}
    prices: dict[int, list[Any]] = {}
    for batch in slices(list(dict.fromkeys(card_ids))):
        cards.update((row.id, row) for row in session.execute(select(*columns).where(Card.id.in_(batch))))
        rows = session.execute(
            select(*CardVariant.__table__.c)
            .where(CardVariant.card_id.in_(batch))
            .order_by(CardVariant.card_id, CardVariant.position)
        ).all()
        for variant in rows:
            variants.setdefault(variant.card_id, []).append(variant)
        for id_batch in slices([variant.id for variant in rows]):
            stmt = select(*CardPriceCurrent.__table__.c).where(CardPriceCurrent.variant_id.in_(id_batch))
            for price in session.execute(stmt):
                prices.setdefault(price.variant_id, []).append(price)
    out: list[Record] = []
    for card_id in card_ids:
        row = cards.get(card_id)
        if row is None:
            continue
        printings = [
            records.variant_record(
                v, [records.price_entry(p) for p in sorted(prices.get(v.id, []), key=_condition_rank)]
            )
            for v in variants.get(card_id, [])
        ]
        record = records.card_detail(row, printings, public_url, row.card_metadata)
        del record["palette"]  # events carry no palette (spec, Records)
        out.append(record)
    return out


def product_event_records(session: Session, product_ids: Sequence[int], public_url: str) -> list[Record]:
    """Product records for `cardgame.products.updated`, in the order given (unknown ids are left out),
    with current prices: entries carry `variant`, ordered by variant then condition. `public_url` is
    taken for symmetry with cards (product images are upstream URLs today)."""
    del public_url
    products: dict[int, Any] = {}
    prices: dict[int, list[Any]] = {}
    for batch in slices(list(dict.fromkeys(product_ids))):
        products.update(
            (row.id, row)
            for row in session.execute(select(*Product.__table__.c).where(Product.id.in_(batch)))
        )
        stmt = select(*ProductPriceCurrent.__table__.c).where(ProductPriceCurrent.product_id.in_(batch))
        for price in session.execute(stmt):
            prices.setdefault(price.product_id, []).append(price)
    return [
        records.product_record(
            products[pid],
            [
                records.price_entry(p)
                for p in sorted(prices.get(pid, []), key=lambda p: (p.variant, *_condition_rank(p)))
            ],
        )
        for pid in product_ids
        if pid in products
    ]


def expansion_event_records(session: Session, expansion_ids: Sequence[str]) -> list[Record]:
    """Expansion records, in the order given (unknown ids are left out)."""
    rows: dict[str, Any] = {}
    for batch in slices(list(dict.fromkeys(expansion_ids))):
        stmt = select(*Expansion.__table__.c).where(Expansion.id.in_(batch))
        rows.update((row.id, row) for row in session.execute(stmt))
    return [records.expansion_record(rows[eid]) for eid in expansion_ids if eid in rows]


def series_event_records(session: Session, series_ids: Sequence[str]) -> list[Record]:
    """Series records, in the order given, each with its expansions in release order (as `/v1` reads)."""
    if not series_ids:
        return []
    rows = {
        row.id: row
        for row in session.execute(select(*Series.__table__.c).where(Series.id.in_(list(series_ids))))
    }
    expansions: dict[str, list[Any]] = {}
    stmt = (
        select(*Expansion.__table__.c)
        .where(Expansion.series_id.in_(list(rows)))
        .order_by(Expansion.release_date, Expansion.id)
    )
    for row in session.execute(stmt):
        expansions.setdefault(row.series_id, []).append(row)
    return [records.series_record(rows[sid], expansions.get(sid, [])) for sid in series_ids if sid in rows]
