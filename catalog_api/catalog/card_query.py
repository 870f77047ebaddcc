"""What `GET /v1/cards` was asked for beyond a plain page: many ids, filters and a sort, parsed once.

Every value is checked here, before any data is read, so a bad one is `400 bad_request` and changes
nothing. The rules (docs/catalog.md repeats them):
- `rarity`, `category`, `illustrator`, `type`: exact, case-insensitive (`type`: one of the card's types).
  A card whose rarity the feed gives as "None" has a null rarity, which no value matches.
- `hp_min`/`hp_max`, `price_min`/`price_max`: whole numbers (`price_*` in cents, 0 or more); a card with
  no HP (or no price) is left out by either bound; min above max is `400`.
- `legal`: `standard` or `expanded`.
- `sort`: `catalog` (default), `name`, `-name`, `release`, `-release`, `price`, `-price`; `q` orders
  by score, so `q` with any sort but `catalog` is `400`.
- `ids`: up to 200 distinct ids, comma-separated; it names its own rows, so with `q`, `sort`,
  `expansion_id` or a filter it is `400`. `limit` and `cursor` do not apply to it (its one page is
  every row it names; a cursor this endpoint did not issue for the request is ignored, as always).
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields
from typing import Any

from catalog_api.kit.pagination import parse_query_int
from core.errors import BadRequest

SORTS = ("catalog", "name", "-name", "release", "-release", "price", "-price")
LEGAL = ("standard", "expanded")
MAX_IDS = 200


@dataclass(frozen=True)
class CardFilter:
    """The filters of a card list; text values are case-folded, absent ones None."""

    expansion_id: str | None = None
    rarity: str | None = None
    category: str | None = None
    illustrator: str | None = None
    type: str | None = None
    hp_min: int | None = None
    hp_max: int | None = None
    legal: str | None = None
    price_min: int | None = None
    price_max: int | None = None

    @property
    def beyond_expansion(self) -> bool:
        """Whether anything but `expansion_id` is set (the database's catalog page takes only that)."""
        return any(getattr(self, f.name) is not None for f in fields(self) if f.name != "expansion_id")

    def scope(self) -> list[Any]:
        """The filter as a cursor's scope: a cursor is only good for the filter it was issued under."""
        return list(astuple(self))


def _whole(name: str, raw: str | None, minimum: int | None = None) -> int | None:
    if raw is None:
        return None
    value = parse_query_int(raw) if len(raw) <= 20 else None
    if value is None or (minimum is not None and value < minimum):
        floor = "" if minimum is None else f" ({minimum} or more)"
        raise BadRequest(f"{name} must be a whole number{floor}.")
    return value


def _bounds(low_name: str, low: int | None, high_name: str, high: int | None) -> None:
    if low is not None and high is not None and low > high:
        raise BadRequest(f"{low_name} ({low}) is above {high_name} ({high}).")


def _text(raw: str | None) -> str | None:
    return None if raw is None else raw.casefold()


def parse_filter(
    *,
    expansion_id: str | None,
    rarity: str | None,
    category: str | None,
    illustrator: str | None,
    type_: str | None,
    hp_min: str | None,
    hp_max: str | None,
    legal: str | None,
    price_min: str | None,
    price_max: str | None,
) -> CardFilter:
    low_hp, high_hp = _whole("hp_min", hp_min), _whole("hp_max", hp_max)
    _bounds("hp_min", low_hp, "hp_max", high_hp)
    low_price, high_price = _whole("price_min", price_min, 0), _whole("price_max", price_max, 0)
    _bounds("price_min", low_price, "price_max", high_price)
    if legal is not None and legal not in LEGAL:
        raise BadRequest(f"legal must be one of {', '.join(LEGAL)}.")
    return CardFilter(
        expansion_id=expansion_id,
        rarity=_text(rarity),
        category=_text(category),
        illustrator=_text(illustrator),
        type=_text(type_),
        hp_min=low_hp,
        hp_max=high_hp,
        legal=legal,
        price_min=low_price,
        price_max=high_price,
    )


def parse_sort(raw: str | None, q: str | None) -> str:
    sort = "catalog" if raw is None else raw
    if sort not in SORTS:
        raise BadRequest(f"sort must be one of {', '.join(SORTS)}.")
    if q is not None and sort != "catalog":
        raise BadRequest("q orders rows by score: it takes no sort but catalog.")
    return sort


def parse_ids(raw: str, *, q: str | None, sort: str | None, card_filter: CardFilter) -> list[str]:
    """The ids asked for, each once, in the order given."""
    if q is not None or sort is not None or card_filter != CardFilter():
        raise BadRequest("ids names its own rows: it takes no q, sort, expansion_id or filter.")
    ids = list(dict.fromkeys(part.strip() for part in raw.split(",") if part.strip()))
    if not ids:
        raise BadRequest("ids must name at least one card id (comma-separated).")
    if len(ids) > MAX_IDS:
        raise BadRequest(f"ids names {len(ids)} cards; at most {MAX_IDS} are served at once.")
    return ids
