"""Daily price snapshots: every current price as one `.ndjson.gz` file, announced by an event.

After each price sync the service publishes the prices as of the newest day it holds, one file for
cards and one for sealed products. The file is deterministic (sorted rows, gzip without a timestamp),
so the same prices give the same bytes and digest: a re-run that changes nothing publishes nothing,
and a day whose prices were corrected is published again under a new name (names carry the digest,
so a URL never changes meaning). Files are served by the service at `/files/snapshots/<name>` behind
an HMAC signature with an expiry (`CARDCAT_SNAPSHOT_URL_TTL_S`, two days by default: a day of delivery
retries and a day to download), bound to no key and counted per client address (see `file_access`).

Row format, one JSON object a line:
- cards: `{card_id, card_variant_id, printing: {type, subtype, size, stamps, foil}, condition, currency,
  market, low, high, listing_count, observed_on}`, by card id, printing order, condition (NM..DMG);
- products: `{product_id, variant, condition, currency, market, low, high, listing_count, observed_on}`.
"""

from __future__ import annotations

import gzip
import hashlib
import hmac
import io
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson
from sqlalchemy.orm import Session

from catalog_api.events import outbox as events
from catalog_api.kit.private_files import private_dir, write_private
from catalog_api.kit.settings import Settings
from catalog_api.prices.tables import PriceSnapshot
from core.vocabulary import CONDITION_ORDER

KINDS = ("card_prices", "product_prices")
_QUERIES = {
    "card_prices": (
        "SELECT v.card_id, v.id, v.type, v.subtype, v.size, v.stamps, v.foil, c.condition, c.market, c.low, "
        "c.high, c.listing_count, c.observed_on, v.position FROM card_prices_current c "
        "JOIN card_variants v ON v.id = c.variant_id"
    ),
    "product_prices": (
        "SELECT product_id, variant, condition, market, low, high, listing_count, observed_on "
        "FROM product_prices_current"
    ),
}


@dataclass
class Announced:
    file_name: str
    event_ids: list[str]


def _stamps(value: Any) -> list[str]:
    return orjson.loads(value) if isinstance(value, str) else list(value or [])


def snapshot_rows(session: Session, kind: str) -> tuple[list[bytes], int]:
    """The file's lines in their fixed order, and how many distinct cards or products they cover."""
    rows = list(session.connection().exec_driver_sql(_QUERIES[kind]))
    lines: list[tuple[Any, bytes]] = []
    subjects: set[Any] = set()
    for row in rows:
        if kind == "card_prices":
            card_id, vid, type_, subtype, size, stamps, foil, condition, *quote, observed_on, position = row
            record: dict[str, Any] = {
                "card_id": card_id,
                "card_variant_id": vid,
                "printing": {
                    "type": type_,
                    "subtype": subtype,
                    "size": size,
                    "stamps": _stamps(stamps),
                    "foil": foil,
                },
                "condition": condition,
            }
            order: Any = (card_id, position, CONDITION_ORDER.get(condition, 9), condition)
            subjects.add(card_id)
        else:
            product_id, variant, condition, *quote, observed_on = row
            record = {"product_id": product_id, "variant": variant, "condition": condition}
            order = (product_id, variant, CONDITION_ORDER.get(condition, 9), condition)
            subjects.add(product_id)
        market, low, high, listing_count = quote
        record.update(
            currency="USD",
            market=market,
            low=low,
            high=high,
            listing_count=listing_count,
            observed_on=observed_on,
        )
        lines.append((order, orjson.dumps(record) + b"\n"))
    lines.sort(key=lambda pair: pair[0])
    return [line for _, line in lines], len(subjects)


def _gzip(lines: list[bytes]) -> bytes:
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, compresslevel=6) as handle:
        handle.writelines(lines)
    return buffer.getvalue()


def sign(settings: Settings, file_name: str, expires: int) -> str:
    # surrogatepass: a name is any text a URL path can carry; signing never raises on it.
    message = f"{file_name}:{expires}".encode("utf-8", "surrogatepass")
    return hmac.new(settings.file_signing_key, message, hashlib.sha256).hexdigest()


def signed_url(settings: Settings, file_name: str, now: float | None = None) -> str:
    expires = int((now or time.time()) + settings.snapshot_url_ttl_s)
    query = urlencode({"expires": expires, "signature": sign(settings, file_name, expires)})
    return f"{settings.public_url.rstrip('/')}/files/snapshots/{file_name}?{query}"


def verify(settings: Settings, file_name: str, expires: str, signature: str) -> bool:
    """Whether a snapshot URL's `expires` and `signature` are ours and unexpired; False for any other
    text (the parameters come from anyone: no key is needed to ask).

    `expires` must be the ASCII digits we wrote (int() would also take `1_0`, spaces, other scripts'
    digits). The signatures are compared as bytes: compare_digest refuses non-ASCII str."""
    if not (expires.isascii() and expires.isdigit()) or len(expires) > 18:
        return False
    deadline = int(expires)
    expected = sign(settings, file_name, deadline).encode()
    given = signature.encode("utf-8", "surrogatepass")
    return hmac.compare_digest(expected, given) and deadline >= time.time()


def publish(session: Session, settings: Settings, day: str) -> list[Announced]:
    """Write and announce the snapshot files for `day` whose content is new (none when nothing changed)."""
    announced: list[Announced] = []
    folder = private_dir(settings.snapshot_dir)
    for kind in KINDS:
        lines, subjects = snapshot_rows(session, kind)
        if not lines:
            continue
        payload = _gzip(lines)
        digest = hashlib.sha256(payload).hexdigest()
        held = session.get(PriceSnapshot, (kind, day))
        if held is not None and held.sha256 == digest:
            continue
        file_name = f"{kind}-{day}-{digest[:16]}.ndjson.gz"
        write_private(folder / file_name, payload)
        session.merge(
            PriceSnapshot(
                kind=kind,
                snapshot_date=day,
                file_name=file_name,
                rows=len(lines),
                subjects=subjects,
                sha256=digest,
                bytes=len(payload),
                created_at=datetime.now(UTC),
            )
        )
        entry = {
            "snapshot_date": day,
            "rows": len(lines),
            "subjects": subjects,
            "url": signed_url(settings, file_name),
            "sha256": digest,
            "bytes": len(payload),
        }
        ids = events.emit(session, f"{kind}.snapshot", "snapshot", [entry], extra={"currency": "USD"})
        announced.append(Announced(file_name, ids))
    return announced


def snapshot_path(settings: Settings, file_name: str) -> Path | None:
    """The file for a name we could have published (kind, date, digest), never any other path."""
    parts = file_name.removesuffix(".ndjson.gz").rsplit("-", 4)
    if not file_name.endswith(".ndjson.gz") or len(parts) != 5 or parts[0] not in KINDS:
        return None
    if not all(ch in "0123456789abcdef" for ch in parts[4]) or len(parts[4]) != 16:
        return None
    path = settings.snapshot_dir / file_name
    return path if path.is_file() else None
