"""Per-worker, in-memory view of what changes only when the catalog syncs: the search indexes (names
in every language), every card's filterable and sortable facts (`card_table`), and the small reference
tables (series, expansions, products with their current prices). Rebuilt when the
catalog's or the marketplace's `feed_state.version` moves; the
version is re-read at most once a second, so a sync shows up on every worker within about a second."""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import dataclass, field
from typing import Annotated, Any

import orjson
from fastapi import Depends, Request
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from catalog_api.catalog import repository
from catalog_api.catalog.card_table import CardTable, card_facts
from catalog_api.catalog.search import SearchIndex, every_name
from catalog_api.kit import records
from catalog_api.kit.http_errors import is_database_down
from catalog_api.kit.models import (
    Expansion,
    FeedState,
    Product,
    ProductExpansion,
    ProductPriceCurrent,
    Series,
)
from catalog_api.kit.pagination import PositionShape
from catalog_api.prices import price_reads
from core.vocabulary import CONDITION_ORDER

RECHECK_S = 1.0


@dataclass
class Table:
    """A small table held whole: records by id (as a string), their catalog order, a name index, and
    each record's names in other languages (for `lang` and `include=names`)."""

    records: dict[str, dict[str, Any]]
    order: list[list[Any]]  # each row's sort key, ascending; the id is its last element
    search: SearchIndex
    shape: PositionShape  # the types of a sort key (what a cursor's position must hold)
    names: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class Snapshot:
    version: tuple[int, int]  # (catalog, marketplace)
    card_search: SearchIndex
    cards: CardTable
    series: Table
    expansions: Table
    products: Table
    product_expansions: dict[str, set[str]] = field(default_factory=dict)


async def feed_versions(engine: AsyncEngine) -> tuple[tuple[str, int], ...]:
    """Every feed's version: together they name the data a response was read from."""
    async with engine.connect() as conn:
        rows = (await conn.execute(select(FeedState.feed, FeedState.version).order_by(FeedState.feed))).all()
    return tuple((feed, int(version or 0)) for feed, version in rows)


async def load_snapshot(engine: AsyncEngine, version: tuple[int, int]) -> Snapshot:
    async with engine.connect() as conn:
        cards = await repository.card_fact_rows(conn)
        markets = await price_reads.headline_markets(conn)
        expansion_rows = (
            await conn.execute(select(*Expansion.__table__.c).order_by(Expansion.release_date, Expansion.id))
        ).all()
        series_rows = (
            await conn.execute(select(*Series.__table__.c).order_by(Series.first_release_date, Series.id))
        ).all()
        product_rows = (await conn.execute(select(*Product.__table__.c).order_by(Product.id))).all()
        links = (await conn.execute(select(ProductExpansion.product_id, ProductExpansion.expansion_id))).all()
        price_rows = (await conn.execute(select(*ProductPriceCurrent.__table__.c))).all()
    product_prices: dict[int, list[Any]] = {}
    for price in sorted(
        price_rows, key=lambda r: (r.variant, CONDITION_ORDER.get(r.condition, 9), r.condition)
    ):
        product_prices.setdefault(price.product_id, []).append(records.price_entry(price))
    by_series: dict[str, list[Any]] = {}
    for row in expansion_rows:
        by_series.setdefault(row.series_id, []).append(row)
    product_expansions: dict[str, set[str]] = {}
    for product_id, expansion_id in links:
        product_expansions.setdefault(str(product_id), set()).add(expansion_id)
    return Snapshot(
        version=version,
        card_search=SearchIndex((c.id, every_name(c.name, c.names), c.number) for c in cards),
        cards=CardTable(
            {c.id: card_facts(c, orjson.loads(c.card_metadata or "null"), markets.get(c.id)) for c in cards}
        ),
        series=Table(
            {r.id: records.series_record(r, by_series.get(r.id, [])) for r in series_rows},
            [[r.first_release_date or "", r.id] for r in series_rows],
            SearchIndex((r.id, every_name(r.name, r.names), None) for r in series_rows),
            (str, str),
            {r.id: r.names for r in series_rows if r.names},
        ),
        expansions=Table(
            {r.id: records.expansion_record(r) for r in expansion_rows},
            [[r.release_date, r.id] for r in expansion_rows],
            SearchIndex((r.id, every_name(r.name, r.names), None) for r in expansion_rows),
            (str, str),
            {r.id: r.names for r in expansion_rows if r.names},
        ),
        products=Table(
            {str(r.id): records.product_record(r, product_prices.get(r.id)) for r in product_rows},
            [[r.id, str(r.id)] for r in product_rows],
            SearchIndex((str(r.id), (r.name,), r.number) for r in product_rows),
            (int, str),
        ),
        product_expansions=product_expansions,
    )


def keep_out_of_gc() -> None:
    """Move every object alive now (the read model above all: a few million objects for the full
    catalog) out of the garbage collector's sight, after collecting what the last snapshot left.

    Python's full collection walks every tracked object; with the read model in the heap that was a
    100-190 ms pause, every few hundred searches, in whichever request happened to trigger it (most of a
    search's p99, measured). The read model holds no reference cycles that need collecting, and it is
    freed by reference counting when replaced. `unfreeze` first, so garbage cycles frozen last time are
    collected now rather than kept for good."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


class SnapshotHolder:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._snapshot: Snapshot | None = None
        self._versions: tuple[tuple[str, int], ...] = ()
        self._checked = 0.0
        self._lock = asyncio.Lock()

    async def get(self) -> Snapshot:
        await self._refresh()
        assert self._snapshot is not None
        return self._snapshot

    async def data_version(self) -> tuple[tuple[str, int], ...]:
        """The feed versions as of at most a second ago (the response cache's key)."""
        await self._refresh()
        return self._versions

    async def _refresh(self) -> None:
        if self._snapshot is not None and time.monotonic() - self._checked < RECHECK_S:
            return
        async with self._lock:
            if self._snapshot is not None and time.monotonic() - self._checked < RECHECK_S:
                return
            try:
                versions = await feed_versions(self._engine)
            except Exception as exc:
                if self._snapshot is None or not is_database_down(exc):
                    raise
                # The database is away (restart, failover): keep answering from what is held, which is
                # what it last said, and look again in a second.
                self._checked = time.monotonic()
                return
            held = dict(versions)
            wanted = (held.get("catalog", 0), held.get("marketplace", 0))
            if self._snapshot is None or self._snapshot.version != wanted:
                self._snapshot = await load_snapshot(self._engine, wanted)
                keep_out_of_gc()
            self._versions = versions
            self._checked = time.monotonic()


def get_snapshots(request: Request) -> SnapshotHolder:
    """The worker's read model, which the app keeps on its state (`app.state.snapshots`): the catalog
    room hands it out itself, so the shared context (`deps.AppContext`) names no type of this room."""
    holder: SnapshotHolder = request.app.state.snapshots
    return holder


Snapshots = Annotated[SnapshotHolder, Depends(get_snapshots)]
