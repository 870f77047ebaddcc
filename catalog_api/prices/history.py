"""Price history: one point per calendar day for one printing (or sealed product variant) and condition.

The log (`card_prices`, `product_prices`) holds only the days a quote changed, exactly as the feed sent
them. A day's point carries the last row observed on or before that day (nulls included: a market that
went null is shown null), and `observed_on` says which day that row is from. Points start at `from` or
at the first observation, whichever is later, and run to `to`.

Reading a card's history without a second index on the 4-million-row log: `card_prices` is keyed by
day first (so a day's bulk load appends at the right edge of its B-tree, see `kit/models.py`), and an
index keyed by printing first would put every loaded row somewhere in the middle of a second 200 MB
tree, slowing the load it was shaped for. Instead each worker keeps the log's distinct days (read with
a loose index scan, once per data version), and a read probes the primary key once for each day of its
window, plus a backward probe of the earlier days that stops at the first row it finds (the row the
window's first day carries). A window of 90 days is ~90 index descents: about a millisecond.

Defaults (docs/prices.md repeats them): condition `NM`; the window is the 90 days ending at the newest
observation the service holds (the marketplace feed's newest `observed_on`); a card's printing is its
headline printing (the first printing, in feed order, with a current `NM` market, as for movers), else
its first printing; a product's variant is, likewise, its first variant (by name) with a current `NM`
market, else its first variant with any price.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog_api.kit.models import FeedState
from catalog_api.kit.pagination import sendable
from core.errors import BadRequest, NotFound

DEFAULT_CONDITION = "NM"
DEFAULT_DAYS = 90
MAX_SPAN_DAYS = 366
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")  # ASCII digits: \d takes any script's
_INT = re.compile(r"[0-9]{1,15}")
MAX_ID = 2**31 - 1  # the id columns are 32-bit: a larger number names nothing

Quote = tuple[str, int | None, int | None, int | None, int | None]  # observed_on, market, low, high, count


@dataclass(frozen=True)
class Window:
    start: date
    end: date


def parse_day(raw: str | None, name: str) -> date | None:
    """A `YYYY-MM-DD` date (exactly that form: `fromisoformat` alone would take `20260801` too)."""
    if raw is None:
        return None
    if not _DATE.fullmatch(raw):
        raise BadRequest(f"`{name}` must be a date YYYY-MM-DD, got {raw!r}.")
    try:
        return date.fromisoformat(raw)
    except ValueError as exc:
        raise BadRequest(f"`{name}` is not a calendar date: {raw!r}.") from exc


def check_days(raw_from: str | None, raw_to: str | None) -> None:
    """Refuse malformed dates before any database work (the window itself needs the newest day)."""
    parse_day(raw_from, "from")
    parse_day(raw_to, "to")


def parse_condition(raw: str | None) -> str:
    """Any condition code the feed could carry (NM, LP, MP, HP, DMG are the ones seen); letters only."""
    if raw is None:
        return DEFAULT_CONDITION
    if not (1 <= len(raw) <= 8 and raw.isascii() and raw.isalpha()):
        raise BadRequest(f"`condition` must be a condition code such as NM or LP, got {raw!r}.")
    return raw.upper()


def parse_variant_id(raw: str | None) -> int | None:
    if raw is None:
        return None
    if not _INT.fullmatch(raw):
        raise BadRequest(f"`variant_id` must be a printing's integer id, got {raw!r}.")
    return int(raw)


def window(raw_from: str | None, raw_to: str | None, newest: str | None) -> Window:
    """The asked window, after defaults: `to` is the newest observation (today when nothing is held
    yet), `from` the 89 days before `to`. Refuses `from` after `to` and spans over 366 days."""
    start, end = parse_day(raw_from, "from"), parse_day(raw_to, "to")
    if end is None:
        end = date.fromisoformat(newest) if newest else datetime.now(UTC).date()
    if start is None:
        start = max(date.min, end - timedelta(days=min(DEFAULT_DAYS - 1, (end - date.min).days)))
    if start > end:
        raise BadRequest(f"`from` ({start}) is after `to` ({end}).")
    if (end - start).days > MAX_SPAN_DAYS:
        raise BadRequest(f"The window spans {(end - start).days} days; at most {MAX_SPAN_DAYS} are allowed.")
    return Window(start, end)


def points(rows: Sequence[Quote], span: Window) -> list[dict[str, Any]]:
    """One point a day from max(start, first observation) to end; `rows` ascending by day, all on or
    before `span.end`."""
    if not rows:
        return []
    first = date.fromisoformat(rows[0][0])
    day = max(span.start, first)
    out: list[dict[str, Any]] = []
    at = -1
    for offset in range((span.end - day).days + 1):
        key = (day + timedelta(days=offset)).isoformat()
        while at + 1 < len(rows) and rows[at + 1][0] <= key:
            at += 1
        observed_on, market, low, high, listing_count = rows[at]
        out.append(
            {
                "date": key,
                "market": market,
                "low": low,
                "high": high,
                "listing_count": listing_count,
                "observed_on": observed_on,
            }
        )
    return out


@dataclass(frozen=True)
class LogDays:
    """The card log's distinct days (ascending) and the marketplace feed's newest day, as of one data
    version: they change only when prices sync."""

    days: tuple[str, ...]
    newest: str | None


class LogDaysCache:
    """Per worker: the days list is read once per data version (the response cache's key), not once
    per request. Two requests missing at once both read it; either answer is right."""

    def __init__(self) -> None:
        self._held: tuple[Any, LogDays] | None = None

    async def get(self, conn: AsyncConnection, version: Any) -> LogDays:
        if self._held is not None and self._held[0] == version:
            return self._held[1]
        days = tuple(row[0] for row in (await conn.execute(_CARD_DAYS)).all())
        newest = (
            await conn.execute(select(FeedState.observed_on).where(FeedState.feed == "marketplace"))
        ).scalar()
        found = LogDays(days, newest)
        self._held = (version, found)
        return found


# The log's distinct days, as a loose index scan over the primary key (day first): one descent per day
# instead of reading every row.
_CARD_DAYS = text(
    "WITH RECURSIVE days(day) AS ("
    " SELECT min(observed_on) FROM card_prices"
    " UNION ALL"
    " SELECT (SELECT min(observed_on) FROM card_prices WHERE observed_on > days.day)"
    " FROM days WHERE days.day IS NOT NULL"
    ") SELECT day FROM days WHERE day IS NOT NULL"
)
_QUOTE = "SELECT observed_on, market, low, high, listing_count FROM card_prices"
_PROBE_WHERE = "WHERE variant_id = :variant_id AND condition = :condition AND observed_on"
# One primary-key probe per listed day: an array parameter on PostgreSQL (one bind, one prepared
# plan whatever the number of days), an expanded IN list on SQLite.
_CARD_PROBES = {
    "postgresql": (
        text(f"{_QUOTE} {_PROBE_WHERE} = ANY(CAST(:days AS varchar[])) ORDER BY observed_on"),
        text(f"{_QUOTE} {_PROBE_WHERE} = ANY(CAST(:days AS varchar[])) ORDER BY observed_on DESC LIMIT 1"),
    ),
    "sqlite": (
        text(f"{_QUOTE} {_PROBE_WHERE} IN :days ORDER BY observed_on").bindparams(
            bindparam("days", expanding=True)
        ),
        text(f"{_QUOTE} {_PROBE_WHERE} IN :days ORDER BY observed_on DESC LIMIT 1").bindparams(
            bindparam("days", expanding=True)
        ),
    ),
}
# The card with each printing (feed order) and whether it has a current NM market: one round trip
# answers "does the card exist", "is this printing its own" and "which is its headline".
_CARD_PRINTINGS = text(
    "SELECT c.id, v.id, p.market FROM cards c "
    "LEFT JOIN card_variants v ON v.card_id = c.id "
    "LEFT JOIN card_prices_current p ON p.variant_id = v.id AND p.condition = 'NM' "
    "WHERE c.id = :card_id ORDER BY v.position, v.id"
)
_PRODUCT_VARIANTS = text(
    "SELECT p.id, c.variant, c.condition, c.market FROM products p "
    "LEFT JOIN product_prices_current c ON c.product_id = p.id "
    "WHERE p.id = :product_id ORDER BY c.variant"
)
_PRODUCT_ROWS = text(
    "SELECT observed_on, market, low, high, listing_count FROM product_prices "
    "WHERE product_id = :product_id AND variant = :variant AND condition = :condition "
    "AND observed_on <= :until ORDER BY observed_on"
)


async def card_printing(conn: AsyncConnection, card_id: str, variant_id: int | None) -> int | None:
    """The printing asked for (404 when the card does not exist or the printing is not the card's), or
    the card's headline printing, else its first; None for a card with no printings."""
    rows = (await conn.execute(_CARD_PRINTINGS, {"card_id": card_id})).all() if sendable(card_id) else []
    if not rows:
        raise NotFound(f"No card has id {card_id!r}.")
    printings = [(row[1], row[2]) for row in rows if row[1] is not None]
    if variant_id is not None:
        if variant_id not in {vid for vid, _ in printings}:
            raise NotFound(f"Card {card_id!r} has no printing with id {variant_id}.")
        return variant_id
    headline = next((vid for vid, market in printings if market is not None), None)
    return headline if headline is not None else (printings[0][0] if printings else None)


async def card_history(
    conn: AsyncConnection, variant_id: int, condition: str, span: Window, log_days: LogDays
) -> list[Quote]:
    """The log rows a window needs, oldest first: every row of the printing and condition observed in
    the window, and before them the last one observed before it (what the window's first day carries).
    The primary key is probed once for each day of the window, and the earlier days are probed newest
    first until one holds a row (an index scan that stops at the first hit)."""
    start, end = span.start.isoformat(), span.end.isoformat()
    inside = [day for day in log_days.days if start <= day <= end]
    before = [day for day in log_days.days if day < start]
    every, last = _CARD_PROBES["postgresql" if conn.dialect.name == "postgresql" else "sqlite"]
    params: dict[str, Any] = {"variant_id": variant_id, "condition": condition}
    rows: list[Quote] = []
    if inside:
        rows = [tuple(row) for row in (await conn.execute(every, {**params, "days": inside})).all()]
    if before and not (rows and rows[0][0] == start):
        earlier = (await conn.execute(last, {**params, "days": before})).first()
        if earlier is not None:
            rows.insert(0, tuple(earlier))
    return rows


async def product_variant(conn: AsyncConnection, product_id: str, variant: str | None) -> str | None:
    """The variant asked for (404 when the product does not exist or never had a price in that
    variant: a sealed product's variants are known only from its prices, and `*_current` keeps a row
    for every variant and condition the log ever held), or the product's default variant (see the
    module docstring); None for a product never priced."""
    number = int(product_id) if _INT.fullmatch(product_id) else None
    if number is None or number > MAX_ID:
        raise NotFound(f"No product has id {product_id!r}.")
    rows = (await conn.execute(_PRODUCT_VARIANTS, {"product_id": number})).all()
    if not rows:
        raise NotFound(f"No product has id {product_id!r}.")
    held = [row[1] for row in rows if row[1] is not None]
    if variant is not None:
        if variant not in held:
            raise NotFound(f"Product {product_id!r} has no variant {variant!r}.")
        return variant
    priced = next((row[1] for row in rows if row[2] == "NM" and row[3] is not None), None)
    return priced if priced is not None else (held[0] if held else None)


async def product_history(
    conn: AsyncConnection, product_id: int, variant: str, condition: str, until: date
) -> list[Quote]:
    """Every log row of one product variant and condition observed on or before `until`, oldest first
    (`product_prices` is keyed product first, so this is one index range)."""
    params = {
        "product_id": product_id,
        "variant": variant,
        "condition": condition,
        "until": until.isoformat(),
    }
    return [tuple(row) for row in (await conn.execute(_PRODUCT_ROWS, params)).all()]
