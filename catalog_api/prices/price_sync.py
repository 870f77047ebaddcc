"""`cardcat prices sync`: load the marketplace change log (`DIR/marketplace/<day>.ndjson.gz`).

The load is bulk, streaming and idempotent:
- each daily file is read once, row by row, mapped to our ids in memory and written in batches (COPY into
  a staging table and one upsert per file on PostgreSQL; `executemany` upserts on SQLite);
- a file already loaded with the same SHA-256 is skipped; a changed one (a day re-published) is loaded
  again, and the upsert rewrites only rows whose quote differs, so re-running a day changes nothing;
- days may arrive late or twice: `*_current` keeps, per key, the quote with the newest `observed_on`,
  so an older day never overwrites a newer quote.
Card rows name their printing by the five printing fields, mapped to the service's integer variant ids;
rows naming a card, printing or product the catalog does not hold are counted (`unmatched_*`) and skipped.

The whole run is one transaction: the log, current prices, movers, the price snapshots' metadata,
the feed state and the events they cause commit together, or not at all.
"""

from __future__ import annotations

import gzip
import hashlib
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, select
from sqlalchemy.orm import Session
from tqdm import tqdm

from catalog_api.events import outbox as events
from catalog_api.kit.feed_state import mark_synced
from catalog_api.kit.models import CardVariant, Product
from catalog_api.kit.settings import Settings
from catalog_api.prices import movers
from catalog_api.prices import snapshot_files as snapshots
from catalog_api.prices.tables import PriceFile

PRICE_FIELDS = ("market", "low", "high", "listing_count")

CardRow = tuple[int, str, str, int | None, int | None, int | None, int | None]
ProductRow = tuple[int, str, str, str, int | None, int | None, int | None, int | None]


@dataclass
class PriceReport:
    files_seen: int = 0
    files_loaded: int = 0
    files_skipped: int = 0
    card_rows: int = 0
    product_rows: int = 0
    unmatched_card_rows: int = 0
    unmatched_product_rows: int = 0
    log_rows_written: int = 0
    current_rows_written: int = 0
    products_changed: set[int] = field(default_factory=set)
    newest_observed_on: str | None = None
    movers: int = 0
    snapshots: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    # Where the time went: reading and parsing (a thread), database writes, movers + snapshots + events.
    seconds: dict[str, float] = field(default_factory=lambda: {"read": 0.0, "write": 0.0, "finish": 0.0})

    @property
    def changed(self) -> bool:
        return self.log_rows_written > 0 or self.current_rows_written > 0

    def summary(self) -> dict[str, Any]:
        return {
            "files_seen": self.files_seen,
            "files_loaded": self.files_loaded,
            "files_skipped": self.files_skipped,
            "card_rows": self.card_rows,
            "product_rows": self.product_rows,
            "unmatched_card_rows": self.unmatched_card_rows,
            "unmatched_product_rows": self.unmatched_product_rows,
            "log_rows_written": self.log_rows_written,
            "current_rows_written": self.current_rows_written,
            "products_changed": len(self.products_changed),
            "newest_observed_on": self.newest_observed_on,
            "movers": self.movers,
            "snapshots": len(self.snapshots),
            "events": len(self.events),
            "phase_seconds": {name: round(value, 2) for name, value in self.seconds.items()},
        }


def feed_files(source: Path) -> list[Path]:
    """The daily files, oldest first (`<YYYY-MM-DD>.ndjson.gz` sorts by date)."""
    folder = source / "marketplace" if (source / "marketplace").is_dir() else source
    return sorted(folder.glob("*.ndjson.gz"))


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def _int(value: Any) -> int | None:
    """Cents and counts are integers; anything else the feed might send is read as missing."""
    return value if type(value) is int else None


def _listing_count(value: Any) -> int | None:
    count = _int(value)
    return None if count is None else max(0, min(25, count))


class PrintingMap:
    """(card id, five printing fields) -> variant id, held in memory for the run (~40k entries)."""

    def __init__(self, session: Session) -> None:
        self._ids: dict[tuple[Any, ...], int] = {}
        columns = (
            CardVariant.id,
            CardVariant.card_id,
            CardVariant.type,
            CardVariant.subtype,
            CardVariant.size,
            CardVariant.stamps,
            CardVariant.foil,
        )
        for vid, card_id, type_, subtype, size, stamps, foil in session.execute(select(*columns)):
            self._ids[(card_id, type_, subtype, size, tuple(sorted(stamps or [])), foil)] = vid

    def get(self, card_id: Any, printing: Any) -> int | None:
        if not isinstance(printing, dict):
            return None
        stamps = printing.get("stamps") or []
        if not isinstance(stamps, list):
            return None
        key = (
            card_id,
            printing.get("type"),
            printing.get("subtype"),
            printing.get("size"),
            tuple(sorted(str(s) for s in stamps)),
            printing.get("foil"),
        )
        return self._ids.get(key)


def read_day(
    path: Path, printings: PrintingMap, products: set[int], report: PriceReport
) -> tuple[list[CardRow], list[ProductRow]]:
    """One daily file as rows keyed by our ids. A later row for the same key wins (the feed repeats a
    printing the catalog lists twice)."""
    cards: dict[tuple[int, str, str], CardRow] = {}
    prods: dict[tuple[int, str, str, str], ProductRow] = {}
    for record in _records(path):
        condition, day = record.get("condition"), record.get("observed_on")
        if not isinstance(condition, str) or not isinstance(day, str) or len(day) != 10:
            continue
        values = (
            _int(record.get("market")),
            _int(record.get("low")),
            _int(record.get("high")),
            _listing_count(record.get("listing_count")),
        )
        if record.get("subject") == "card":
            report.card_rows += 1
            vid = printings.get(record.get("card_id"), record.get("printing"))
            if vid is None:
                report.unmatched_card_rows += 1
                continue
            cards[(vid, condition, day)] = (vid, condition, day, *values)
        elif record.get("subject") == "product":
            report.product_rows += 1
            pid, variant = record.get("product_id"), record.get("variant")
            if type(pid) is not int or pid not in products or not isinstance(variant, str):
                report.unmatched_product_rows += 1
                continue
            prods[(pid, variant, condition, day)] = (pid, variant, condition, day, *values)
    return list(cards.values()), list(prods.values())


class FeedFileError(ValueError):
    """A daily file that cannot be read (truncated or not gzip): the run stops and writes nothing."""


def _records(path: Path) -> Iterator[dict[str, Any]]:
    """The file's JSON objects; a line that is not one is skipped (counted nowhere: it names nothing)."""
    try:
        with gzip.open(path, "rb") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(record, dict):
                    yield record
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
        raise FeedFileError(f"{path.name}: not a readable gzip file ({exc})") from exc


# --- writing ----------------------------------------------------------------------------------------
# The log keeps one row per key and day; the current table the newest day per key. `IS DISTINCT FROM`
# (PostgreSQL) / `IS NOT` (SQLite) make a repeated row a no-op. The current table is refreshed once per
# run from the log (not once per file): updating the same 170k rows 120 times in one transaction leaves
# each behind a chain of dead versions, and each later day's update crawls through them.

_TABLES = {
    "card": ("card_prices", ("variant_id", "condition")),
    "product": ("product_prices", ("product_id", "variant", "condition")),
}


def _upsert_sql(table: str, keys: tuple[str, ...], current: bool, source: str, dialect: str) -> str:
    columns = (*keys, "observed_on", *PRICE_FIELDS)
    conflict = (
        keys if current else ("observed_on", *keys) if table == "card_prices" else (*keys, "observed_on")
    )
    updated = ("observed_on", *PRICE_FIELDS) if current else PRICE_FIELDS
    differs = " OR ".join(
        f"{table}.{c} IS DISTINCT FROM excluded.{c}"
        if dialect == "postgresql"
        else f"{table}.{c} IS NOT excluded.{c}"
        for c in updated
    )
    guard = f"({differs})"
    if current:
        guard = f"excluded.observed_on >= {table}.observed_on AND {guard}"
    sets = ", ".join(f"{c} = excluded.{c}" for c in updated)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) {source} "
        f"ON CONFLICT ({', '.join(conflict)}) DO UPDATE SET {sets} WHERE {guard}"
    )


def write_log(conn: Connection, subject: str, rows: list[Any]) -> int:
    """Upsert one day's rows into the log; returns how many rows were new or changed."""
    if not rows:
        return 0
    base, keys = _TABLES[subject]
    columns = (*keys, "observed_on", *PRICE_FIELDS)
    raw = conn.connection.driver_connection
    assert raw is not None
    if conn.dialect.name == "postgresql":
        stage = f"stage_{base}"
        with raw.cursor() as cur:
            cur.execute(
                f"CREATE TEMP TABLE IF NOT EXISTS {stage} (LIKE {base} INCLUDING DEFAULTS) ON COMMIT DROP"
            )
            cur.execute(f"TRUNCATE {stage}")
            with cur.copy(f"COPY {stage} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            cur.execute(
                _upsert_sql(base, keys, False, f"SELECT {', '.join(columns)} FROM {stage}", "postgresql")
            )
            return int(cur.rowcount)
    before = raw.total_changes
    values = f"VALUES ({', '.join('?' for _ in columns)})"
    raw.executemany(_upsert_sql(base, keys, False, values, "sqlite"), rows)
    return int(raw.total_changes - before)


def refresh_current(conn: Connection, subject: str, since: str) -> int:
    """Bring `*_current` up to date with every log row observed on or after `since` (the oldest day this
    run loaded); an older day never overwrites a newer quote. Returns the rows written."""
    base, keys = _TABLES[subject]
    columns = (*keys, "observed_on", *PRICE_FIELDS)
    if conn.dialect.name == "postgresql":
        newest = (
            f"SELECT DISTINCT ON ({', '.join(keys)}) {', '.join(columns)} FROM {base} "
            f"WHERE observed_on >= %(since)s ORDER BY {', '.join(keys)}, observed_on DESC"
        )
        sql = _upsert_sql(f"{base}_current", keys, True, newest, "postgresql")
        return int(conn.exec_driver_sql(sql, {"since": since}).rowcount)
    # SQLite takes the other columns of a max() aggregate from the row holding the max.
    picked = ", ".join("max(observed_on)" if c == "observed_on" else c for c in columns)
    newest = f"SELECT {picked} FROM {base} WHERE observed_on >= ? GROUP BY {', '.join(keys)}"
    raw = conn.connection.driver_connection
    assert raw is not None
    before = raw.total_changes
    raw.execute(_upsert_sql(f"{base}_current", keys, True, newest, "sqlite"), (since,))
    return int(raw.total_changes - before)


def _current_products(conn: Connection) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    rows = conn.exec_driver_sql(
        "SELECT product_id, variant, condition, observed_on, market, low, high, listing_count "
        "FROM product_prices_current"
    )
    return {tuple(row[:3]): tuple(row[3:]) for row in rows}


def sync_prices(engine: Engine, source: Path, settings: Settings, progress: bool = True) -> PriceReport:
    """Load every daily file under `source` (see the module docstring), then recompute movers, publish
    the newest day's snapshots and emit the events, all in one transaction."""
    report = PriceReport()
    files = feed_files(source)
    report.files_seen = len(files)
    with Session(engine) as session, session.begin():
        conn = session.connection()
        loaded = dict(session.execute(select(PriceFile.name, PriceFile.sha256)).tuples().all())
        printings = PrintingMap(session)
        products = set(session.execute(select(Product.id)).scalars())
        products_before = _current_products(conn)
        since: dict[str, str] = {}  # per subject, the oldest day this run loaded

        def prepare(path: Path) -> tuple[str, tuple[list[CardRow], list[ProductRow]] | None]:
            started = time.perf_counter()
            digest = _digest(path)
            day = None if loaded.get(path.name) == digest else read_day(path, printings, products, report)
            report.seconds["read"] += time.perf_counter() - started
            return digest, day

        # Parsing (Python) runs a file ahead of the database's work on the previous one: two cores busy.
        with ThreadPoolExecutor(max_workers=1) as reader:
            upcoming = reader.submit(prepare, files[0]) if files else None
            bar = tqdm(files, desc="price days", unit=" days", disable=not progress)
            for index, path in enumerate(bar):
                assert upcoming is not None
                digest, day = upcoming.result()
                upcoming = reader.submit(prepare, files[index + 1]) if index + 1 < len(files) else None
                if day is None:
                    report.files_skipped += 1
                    continue
                started = time.perf_counter()
                batches: tuple[tuple[str, list[Any]], ...] = (("card", day[0]), ("product", day[1]))
                for subject, rows in batches:
                    report.log_rows_written += write_log(conn, subject, rows)
                    oldest = min((row[len(_TABLES[subject][1])] for row in rows), default=None)
                    if oldest is not None:
                        since[subject] = min(since.get(subject, oldest), oldest)
                report.seconds["write"] += time.perf_counter() - started
                session.merge(
                    PriceFile(
                        name=path.name,
                        sha256=digest,
                        rows=len(day[0]) + len(day[1]),
                        loaded_at=datetime.now(UTC),
                    )
                )
                report.files_loaded += 1
                bar.set_postfix(rows=report.card_rows + report.product_rows, refresh=False)
        session.flush()
        started = time.perf_counter()
        for subject, first_day in since.items():
            report.current_rows_written += refresh_current(conn, subject, first_day)
        newest = conn.exec_driver_sql("SELECT max(observed_on) FROM card_prices").scalar()
        newest_products = conn.exec_driver_sql("SELECT max(observed_on) FROM product_prices").scalar()
        report.newest_observed_on = max(filter(None, (newest, newest_products)), default=None)
        if report.changed and report.newest_observed_on is not None:
            after = _current_products(conn)
            report.products_changed = {
                key[0]
                for key in set(after) | set(products_before)
                if after.get(key) != products_before.get(key)
            }
            report.movers = movers.recompute(session, report.newest_observed_on)
            if report.products_changed:
                records = events.product_event_records(
                    session, sorted(report.products_changed), settings.public_url
                )
                report.events += events.emit(session, "products.updated", "products", records)
            # Only a run that wrote prices publishes: an unchanged re-run has nothing new to announce.
            for announced in snapshots.publish(session, settings, report.newest_observed_on):
                report.snapshots.append(announced.file_name)
                report.events += announced.event_ids
        mark_synced(session, "marketplace", report.changed, report.summary(), report.newest_observed_on)
        session.flush()
        report.seconds["finish"] = time.perf_counter() - started
    return report
