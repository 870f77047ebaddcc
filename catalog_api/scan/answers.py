"""A scan's answer as the contract shapes it: the scanner's decision (card ids and scores) with each
card's fields read from our database. `POST /v1/scan` and the batch workers (catalog_api.batches) both
answer through here, so a batch photo's answer is exactly what a single scan of it would have said."""

from __future__ import annotations

from typing import Any

from catalog_api.deps import AppContext
from catalog_api.kit.images import image_urls
from catalog_api.kit.languages import localized
from catalog_api.scan import card_rows
from core.scan_contract import PageDecision, ScanDecision, ScannedCard, Tier, unidentified_answer
from core.vocabulary import GAME


async def scan_answer(context: AppContext, decision: ScanDecision, language: str | None) -> dict[str, Any]:
    """`{analysis, matches, unidentified}` for the scanner's `decision`."""
    return _answer(decision, [m for m in await hydrate(context, decision["matches"], language) if m])


async def page_answer(context: AppContext, page: PageDecision, language: str | None) -> dict[str, Any]:
    """`{cards, layout, grid, truncated}` for the scanner's page (#48): each card as `scan_answer` shapes a
    single scan, with its corners and pocket; the catalog is read once for the whole page."""
    every = [match for card in page["cards"] for match in card["decision"]["matches"]]
    hydrated = iter(await hydrate(context, every, language, keep_missing=True))
    cards = []
    for card in page["cards"]:
        decision = card["decision"]
        known = [m for m in (next(hydrated) for _ in decision["matches"]) if m is not None]
        cards.append({"corners": card["corners"], "slot": card.get("slot"), **_answer(decision, known)})
    return {"cards": cards, "layout": page["layout"], "grid": page["grid"], "truncated": page["truncated"]}


def _answer(decision: ScanDecision, matches: list[dict[str, Any]]) -> dict[str, Any]:
    # A match the catalog no longer has (dropped by `hydrate`) leaves fewer cards than the scanner saw.
    return {
        "analysis": {
            "game": GAME if matches else None,
            "tier": tier_of(decision, len(matches)),
            "path": decision.get("path", "full"),
        },
        "matches": matches,
        "unidentified": None if matches else unidentified_answer(decision),
    }


def tier_of(decision: ScanDecision, hydrated: int) -> Tier:
    """The scanner's tier, or `review` when fewer cards are left to answer with than it decided on."""
    tier: Tier = decision.get("tier", "review")
    return tier if hydrated == len(decision["matches"]) else "review"


def outcome_of(answer: dict[str, Any]) -> str:
    """`match` (one card), `race` (several) or the unidentified reason: the label scans are counted by."""
    matches = answer["matches"]
    return "match" if len(matches) == 1 else "race" if matches else str(answer["unidentified"]["reason"])


async def hydrate(
    context: AppContext, matches: list[ScannedCard], language: str | None = None, keep_missing: bool = False
) -> list[dict[str, Any] | None]:
    """Card fields for the scanner's ids, in its order; ids no longer in the catalog are dropped, or with
    `keep_missing` left as None in their place (a page splits the list back per card)."""
    ids = [match["card_id"] for match in matches]
    if not ids:
        return []
    async with context.engine.connect() as conn:
        rows = await card_rows.scan_card_rows(conn, ids)
    hydrated: list[dict[str, Any] | None] = []
    for match in matches:
        row = rows.get(match["card_id"])
        if row is None:
            if keep_missing:
                hydrated.append(None)
            continue
        card_id, name, category, rarity, number, image_key, expansion_id, expansion_name = row[:8]
        card_names, expansion_names = row[8], row[9]
        card = {
            "id": card_id,
            "name": localized(name, card_names, language),
            "category": category,
            "rarity": rarity,
            "number": number,
            "image": image_urls(context.settings.public_url, image_key),
            "expansion": {"id": expansion_id, "name": localized(expansion_name, expansion_names, language)},
        }
        hydrated.append({"score": match["score"], "card": card})
    return hydrated
