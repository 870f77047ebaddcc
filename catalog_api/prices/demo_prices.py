"""A small marketplace feed for the demo, in the upstream format (see ../shared/FEEDS.md §3), made here so
a clone without ../shared still shows prices, movers and a healthy `/health`.

Every printing of every card in a catalog feed folder, and every product, takes a seeded random walk; the
first day quotes everything and later days only what moved (a change log, like upstream). The last day
is `end` (today by default), so the demo's prices are current.
"""

from __future__ import annotations

import gzip
import random
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import orjson

from catalog_api.ingest import feed

CONDITIONS = (("NM", 1.0), ("LP", 0.8), ("MP", 0.65), ("HP", 0.45), ("DMG", 0.3))


def _walkers(catalog: Path) -> list[tuple[dict[str, Any], random.Random, list[tuple[str, float]]]]:
    walkers = []
    for card in feed.read_jsonl(feed.feed_path(catalog, "cards")):
        for variant in card.get("variants") or []:
            printing = {key: variant.get(key) for key in ("type", "subtype", "size", "stamps", "foil")}
            head = {"subject": "card", "card_id": card["id"], "printing": printing}
            walkers.append((head, random.Random(f"{card['id']}|{printing}"), list(CONDITIONS)))
    for product in feed.read_jsonl(feed.feed_path(catalog, "products")):
        head = {"subject": "product", "product_id": product["id"], "variant": "Normal"}
        walkers.append((head, random.Random(f"product|{product['id']}"), list(CONDITIONS[:1])))
    return walkers


def write_demo_prices(catalog: Path, out: Path, days: int = 31, end: date | None = None) -> Path:
    """Write `out/marketplace/<day>.ndjson.gz` for `days` days ending `end`; returns `out`."""
    folder = out / "marketplace"
    folder.mkdir(parents=True, exist_ok=True)
    last = end or date.today()
    walkers = _walkers(catalog)
    prices = [rng.uniform(3.0, 9.0) for _, rng, _ in walkers]  # log of the NM market in cents
    for offset in range(days):
        day = (last - timedelta(days=days - 1 - offset)).isoformat()
        lines: list[bytes] = []
        for index, (head, rng, conditions) in enumerate(walkers):
            if offset and rng.random() > 0.25:
                continue  # flat today: no row (the feed is a change log)
            prices[index] += rng.gauss(0, 0.05) + (rng.gauss(0, 0.4) if rng.random() < 0.03 else 0.0)
            listings = rng.randint(1, 40)
            for condition, factor in conditions:
                market = max(1, round(2.718281828 ** prices[index] * factor))
                row = {
                    **head,
                    "condition": condition,
                    "currency": "USD",
                    "market": market,
                    "low": max(1, round(market * 0.8)),
                    "high": round(market * 1.5),
                    "listing_count": min(25, listings),
                    "observed_on": day,
                }
                lines.append(orjson.dumps(row) + b"\n")
        with gzip.open(folder / f"{day}.ndjson.gz", "wb") as handle:
            handle.writelines(lines)
    return out
