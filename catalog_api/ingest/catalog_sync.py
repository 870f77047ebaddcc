"""`cardcat catalog sync`: load a catalog feed folder into the database, idempotently and incrementally.

Every record is normalised (catalog_api.ingest.feed), hashed, and compared with the hash stored beside it, so
a second run over the same files writes nothing and a changed feed touches only what changed. Cards
that vanish from the feed are kept (the spec has no card deletion yet); products that vanish are
removed. The report lists what changed, by id, for the events that catalog changes cause.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy.orm import Session
from tqdm import tqdm

from catalog_api.events import outbox as events
from catalog_api.ingest import feed
from catalog_api.ingest.palette import palette_of
from catalog_api.kit.feed_state import mark_synced
from catalog_api.kit.images import ImageStore, source_faces
from catalog_api.kit.models import Card, CardVariant, Expansion, Product, ProductExpansion, Series
from catalog_api.kit.settings import get_settings

T = TypeVar("T")
CHUNK = 500


@dataclass
class SyncReport:
    series_created: list[str] = field(default_factory=list)
    series_updated: list[str] = field(default_factory=list)
    expansions_created: list[str] = field(default_factory=list)
    expansions_updated: list[str] = field(default_factory=list)
    cards_created: list[str] = field(default_factory=list)
    cards_updated: list[str] = field(default_factory=list)
    variants_deleted: list[tuple[str, int]] = field(default_factory=list)
    products_updated: list[int] = field(default_factory=list)
    products_removed: list[int] = field(default_factory=list)
    cards_seen: int = 0
    duplicate_printings: int = 0
    images_ingested: int = 0
    # Cards whose stored palette was set or changed. Not a catalog change (no event carries `palette`),
    # but it still moves the feed version so that cached reads pick the palettes up.
    palettes_written: int = 0
    # Rows rewritten for fields no record carries (e.g. a product's MSRP): no event, but a new version.
    quiet_updates: int = 0

    @property
    def changed(self) -> bool:
        return any(
            (
                self.series_created,
                self.series_updated,
                self.expansions_created,
                self.expansions_updated,
                self.cards_created,
                self.cards_updated,
                self.variants_deleted,
                self.products_updated,
                self.products_removed,
            )
        )

    def summary(self) -> dict[str, int]:
        return {
            "series_created": len(self.series_created),
            "series_updated": len(self.series_updated),
            "expansions_created": len(self.expansions_created),
            "expansions_updated": len(self.expansions_updated),
            "cards_seen": self.cards_seen,
            "cards_created": len(self.cards_created),
            "cards_updated": len(self.cards_updated),
            "variants_deleted": len(self.variants_deleted),
            "products_updated": len(self.products_updated),
            "products_removed": len(self.products_removed),
            "duplicate_printings_dropped": self.duplicate_printings,
            "images_ingested": self.images_ingested,
            "palettes_written": self.palettes_written,
        }


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# Row fields that a served record (and so an event) does not carry: a change to only these is written
# quietly, without `*.updated` (an event whose record is unchanged would be noise to a mirror).
UNSERVED = {
    "series": {"names", "first_release_date"},
    "expansions": {"names", "code", "ptcgo_code", "abbreviations"},
    "products": {"msrp_cents"},
}


def _visible(row: Any, table: str) -> dict[str, Any]:
    fields = row if isinstance(row, dict) else row._asdict()
    return {k: v for k, v in fields.items() if k not in UNSERVED[table] and k != "content_hash"}


def _upsert_simple(
    session: Session, model: Any, rows: Iterable[dict[str, Any]], created: list[Any], updated: list[Any]
) -> int:
    """Insert new and update changed rows of a table whose rows stand alone (series, expansions);
    returns how many rows were rewritten quietly (changed only in fields no record carries)."""
    table = model.__tablename__
    existing = {row.id: row for row in session.execute(select(*model.__table__.c))}
    quiet = 0
    inserts: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    for row in rows:
        row["content_hash"] = feed.content_hash(row)
        old = existing.get(row["id"])
        if old is None:
            inserts.append(row)
            created.append(row["id"])
        elif old.content_hash != row["content_hash"]:
            updates.append(row)
            if _visible(old, table) != _visible(row, table):
                updated.append(row["id"])
            else:
                quiet += 1
    if inserts:
        session.execute(insert(model), inserts)
    if updates:
        session.execute(update(model), updates)
    return quiet


def sync_catalog(
    engine: Engine,
    source: Path,
    image_store: ImageStore,
    images_dir: Path | None = None,
    progress: bool = True,
    public_url: str | None = None,
) -> SyncReport:
    """Load the feed in one transaction, with the events it causes (the outbox: both or neither).
    `public_url` is the base of image URLs in event records (default: the settings')."""
    report = SyncReport()
    with Session(engine) as session, session.begin():
        report.quiet_updates = _upsert_simple(
            session,
            Series,
            (feed.series_row(r) for r in feed.read_jsonl(feed.feed_path(source, "series"))),
            report.series_created,
            report.series_updated,
        )
        report.quiet_updates += _upsert_simple(
            session,
            Expansion,
            (feed.expansion_row(r) for r in feed.read_jsonl(feed.feed_path(source, "expansions"))),
            report.expansions_created,
            report.expansions_updated,
        )
        _sync_cards(session, source, image_store, images_dir, report, progress)
        report.quiet_updates += _sync_products(session, source, report)
        emit_catalog_changes(session, report, public_url or get_settings().public_url)
        changed = report.changed or bool(report.palettes_written or report.quiet_updates)
        mark_synced(session, "catalog", changed, report.summary())
    return report


def _sync_cards(
    session: Session,
    source: Path,
    image_store: ImageStore,
    images_dir: Path | None,
    report: SyncReport,
    progress: bool,
) -> None:
    release = dict(session.execute(select(Expansion.id, Expansion.release_date)).tuples().all())
    existing = {
        card_id: (digest, image_key, sort_release, palette, names)
        for card_id, digest, image_key, sort_release, palette, names in session.execute(
            select(Card.id, Card.content_hash, Card.image_key, Card.sort_release, Card.palette, Card.names)
        )
    }
    # Palettes live beside the content hash, not in it (the cards.updated record carries none): a new or
    # changed face gets one, and so does a face whose palette is still null (a database from before them).
    palettes: list[dict[str, Any]] = []
    new_cards: list[dict[str, Any]] = []
    new_variants: list[dict[str, Any]] = []
    changed: dict[str, list[dict[str, Any]]] = {}
    changed_rows: list[dict[str, Any]] = []
    # An expansion's corrected release date moves its cards in catalog order without changing any card.
    resorted: list[dict[str, Any]] = []
    # Other-language names live beside the content hash too (no served record carries them, so a change
    # to them alone is no `cards.updated`); a database from before them gets them on its next sync.
    renamed: list[dict[str, Any]] = []
    records = feed.read_jsonl(feed.feed_path(source, "cards"))
    for record in tqdm(records, desc="cards", unit=" cards", disable=not progress, mininterval=0.5):
        report.cards_seen += 1
        card_id = str(record["id"])
        old = existing.get(card_id)
        image_key = old[1] if old else None
        faces = source_faces(images_dir, card_id) if images_dir else None
        if faces:
            image_key = image_store.ingest(*faces)
            report.images_ingested += 1
        stored = palette = old[3] if old else None
        if faces and (old is None or old[1] != image_key or stored is None):
            palette = palette_of(faces[1])
        if palette != stored:
            report.palettes_written += 1
            if old:
                palettes.append({"id": card_id, "palette": palette})
        row = feed.card_row(record, release.get(str(record["expansion_id"]), "9999-12-31"), image_key)
        variants, dropped = feed.card_variants(record)
        report.duplicate_printings += dropped
        card_fields = {k: v for k, v in row.items() if k not in ("sort_release", "names")}
        row["content_hash"] = feed.content_hash({"row": card_fields, "variants": variants})
        if old is None:
            new_cards.append({**row, "palette": palette})
            new_variants.extend({**v, "card_id": card_id, "position": i} for i, v in enumerate(variants))
            report.cards_created.append(card_id)
        elif old[0] != row["content_hash"]:
            changed_rows.append(row)
            changed[card_id] = variants
            report.cards_updated.append(card_id)
        elif old[2] != row["sort_release"]:
            resorted.append({"id": card_id, "sort_release": row["sort_release"]})
        if old is not None and old[0] == row["content_hash"] and old[4] != row["names"]:
            renamed.append({"id": card_id, "names": row["names"]})
    for batch in chunks(new_cards, 2000):
        session.execute(insert(Card), batch)
    for batch in chunks(new_variants, 5000):
        session.execute(insert(CardVariant), batch)
    if changed_rows:
        session.execute(update(Card), changed_rows)
        _sync_changed_variants(session, changed, report)
    if resorted:
        session.execute(update(Card), resorted)
    if palettes:
        session.execute(update(Card), palettes)
    if renamed:
        session.execute(update(Card), renamed)
    report.quiet_updates += len(renamed)


def _sync_changed_variants(
    session: Session, changed: dict[str, list[dict[str, Any]]], report: SyncReport
) -> None:
    """Keep ids of printings that still exist, delete the ones that do not, add new ones."""
    current: dict[str, dict[str, int]] = {}
    for batch in chunks(list(changed)):
        rows = session.execute(
            select(CardVariant.card_id, CardVariant.printing_key, CardVariant.id).where(
                CardVariant.card_id.in_(batch)
            )
        )
        for card_id, key, variant_id in rows:
            current.setdefault(card_id, {})[key] = variant_id
    deletes: list[int] = []
    inserts: list[dict[str, Any]] = []
    moves: list[dict[str, Any]] = []
    for card_id, variants in changed.items():
        held = current.get(card_id, {})
        wanted = {v["printing_key"] for v in variants}
        for key, variant_id in held.items():
            if key not in wanted:
                deletes.append(variant_id)
                report.variants_deleted.append((card_id, variant_id))
        for position, variant in enumerate(variants):
            if variant["printing_key"] in held:
                moves.append({"id": held[variant["printing_key"]], "position": position})
            else:
                inserts.append({**variant, "card_id": card_id, "position": position})
    for id_batch in chunks(deletes):
        session.execute(delete(CardVariant).where(CardVariant.id.in_(id_batch)))
    if inserts:
        session.execute(insert(CardVariant), inserts)
    if moves:
        session.execute(update(CardVariant), moves)


def _sync_products(session: Session, source: Path, report: SyncReport) -> int:
    """Returns how many products were rewritten quietly (only their MSRP changed)."""
    rows = {row.id: row for row in session.execute(select(*Product.__table__.c))}
    existing = {product_id: row.content_hash for product_id, row in rows.items()}
    quiet = 0
    seen: set[int] = set()
    inserts: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    for record in feed.read_jsonl(feed.feed_path(source, "products")):
        row = feed.product_row(record)
        if row["id"] in seen:
            continue
        seen.add(row["id"])
        row["content_hash"] = feed.content_hash(row)
        old = existing.get(row["id"])
        if old == row["content_hash"]:
            continue
        (inserts if old is None else updates).append(row)
        if old is None or _visible(rows[row["id"]], "products") != _visible(row, "products"):
            report.products_updated.append(row["id"])
        else:
            quiet += 1
    # A product that left the feed, or is listed under no expansion any more, is removed.
    removed = [pid for pid in existing if pid not in seen]
    removed += [row["id"] for row in inserts + updates if not row["expansions"]]
    inserts = [row for row in inserts if row["expansions"]]
    updates = [row for row in updates if row["expansions"]]
    report.products_updated = [pid for pid in report.products_updated if pid not in set(removed)]
    report.products_removed = [pid for pid in removed if pid in existing]
    for batch in chunks(report.products_removed):
        session.execute(delete(ProductExpansion).where(ProductExpansion.product_id.in_(batch)))
        session.execute(delete(Product).where(Product.id.in_(batch)))
    if inserts:
        session.execute(insert(Product), inserts)
    if updates:
        session.execute(update(Product), updates)
    touched = [row["id"] for row in inserts + updates]
    for batch in chunks(touched):
        session.execute(delete(ProductExpansion).where(ProductExpansion.product_id.in_(batch)))
    links = {(row["id"], e["id"]) for row in inserts + updates for e in row["expansions"]}
    if links:
        session.execute(
            insert(ProductExpansion), [{"product_id": p, "expansion_id": e} for p, e in sorted(links)]
        )
    return quiet


def emit_catalog_changes(session: Session, report: SyncReport, public_url: str) -> list[str]:
    """Every event a catalog sync causes, from its report, with records read after the write.

    Parents come first (series, expansions, then cards, then products), so a mirror applying them in
    order never sees a card before its expansion. An expansion whose only change is its release date is
    `expansions.updated`; the cards it re-sorts are not `cards.updated` (no card record changed)."""
    ids: list[str] = []
    ids += events.emit(
        session, "series.created", "series", events.series_event_records(session, report.series_created)
    )
    ids += events.emit(
        session, "series.updated", "series", events.series_event_records(session, report.series_updated)
    )
    for action, changed in (("created", report.expansions_created), ("updated", report.expansions_updated)):
        ids += events.emit(
            session, f"expansions.{action}", "expansions", events.expansion_event_records(session, changed)
        )
    card_ids = [*report.cards_created, *report.cards_updated]
    ids += events.emit_batches(
        session,
        "cards.updated",
        "cards",
        len(card_ids),
        (events.card_event_records(session, batch, public_url) for batch in events.slices(card_ids)),
    )
    deleted = [
        {"card_id": card_id, "variant_id": variant_id} for card_id, variant_id in report.variants_deleted
    ]
    ids += events.emit(session, "card_variants.deleted", "variants", deleted)
    products = events.product_event_records(session, report.products_updated, public_url)
    ids += events.emit(session, "products.updated", "products", products)
    ids += events.emit(session, "products.removed", "product_ids", list(report.products_removed))
    return ids
