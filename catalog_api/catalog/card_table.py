"""Every card's filterable and sortable facts, held in memory by each worker (part of the read model).

Filters and sorts run here rather than in SQL: the facts (rarity, types, HP, legality, the headline
price...) sit in the card's metadata JSON and in the price tables, and an arbitrary mix of seven
filters under seven orders would need a dozen indexes per backend. Held in memory, a first page costs
one pass over at most 21k facts (a few ms), and the rows matching one (filter, sort) are kept, so the
pages of a cursor walk after the first are a binary search.

Orders (ties always by id, ascending):
- `catalog`: expansion release date, expansion id, numeric collector numbers first by value, id;
- `name` / `-name`: the name case-folded with accents removed (what `search.plain` makes of it);
- `release` / `-release`: the expansion's release date;
- `price` / `-price`: the headline printing's current NM market (see `prices/movers.py` for the
  headline printing); cards without one come last in both.
A cursor's position is the last row's sort key, so a walk has no duplicates or gaps.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from catalog_api.catalog.card_query import CardFilter
from catalog_api.catalog.search import plain
from catalog_api.kit.pagination import PositionShape

# Sort keys are tuples; each order names, per element, whether it ascends (1) or descends (-1).
ORDERS: dict[str, tuple[int, ...]] = {
    "catalog": (1, 1, 1, 1, 1),
    "name": (1, 1),
    "-name": (-1, 1),
    "release": (1, 1),
    "-release": (-1, 1),
    "price": (1, 1, 1),
    "-price": (1, -1, 1),
}
SHAPES: dict[str, PositionShape] = {
    "catalog": (str, str, int, int, str),
    "name": (str, str),
    "-name": (str, str),
    "release": (str, str),
    "-release": (str, str),
    "price": (int, int, str),
    "-price": (int, int, str),
}
MATCH_CACHE = 64


@dataclass(slots=True)
class CardFacts:
    id: str
    expansion_id: str
    rarity: str | None  # case-folded, as are the other text facts
    category: str | None
    illustrator: str | None
    types: frozenset[str]
    hp: float | None
    legal_standard: bool
    legal_expanded: bool
    catalog_key: tuple[str, str, int, int, str]
    name_key: str
    release: str
    price: int | None = None  # the headline printing's NM market, cents

    def key(self, sort: str) -> tuple[Any, ...]:
        if sort == "catalog":
            return self.catalog_key
        if sort in ("name", "-name"):
            return (self.name_key, self.id)
        if sort in ("release", "-release"):
            return (self.release, self.id)
        return (0, self.price, self.id) if self.price is not None else (1, 0, self.id)


def _folded(text: str | None) -> str | None:
    return None if text is None else text.casefold()


def card_facts(row: Any, metadata: dict[str, Any] | None, price: int | None) -> CardFacts:
    """One card's facts from its row (`cards` columns) and parsed metadata."""
    meta = metadata or {}
    legality = meta.get("legality") or {}
    hp = meta.get("hp")
    return CardFacts(
        id=row.id,
        expansion_id=row.expansion_id,
        rarity=_folded(row.rarity),
        category=_folded(row.category),
        illustrator=_folded(row.illustrator),
        types=frozenset(str(t).casefold() for t in meta.get("types") or ()),
        hp=float(hp) if isinstance(hp, int | float) and not isinstance(hp, bool) else None,
        legal_standard=bool(legality.get("standard")),
        legal_expanded=bool(legality.get("expanded")),
        catalog_key=(row.sort_release, row.expansion_id, row.sort_nonnumeric, row.sort_number, row.id),
        name_key=plain(row.name),
        release=row.sort_release,
        price=price,
    )


def select(cards: list[CardFacts], wanted: CardFilter) -> list[CardFacts]:
    """The cards the filter keeps, in the order given: one narrowing pass per filter set, each a plain
    comprehension (a composed predicate per card costs about five times as much in CPython)."""
    if wanted.expansion_id is not None:
        cards = [c for c in cards if c.expansion_id == wanted.expansion_id]
    if wanted.illustrator is not None:
        cards = [c for c in cards if c.illustrator == wanted.illustrator]
    if wanted.rarity is not None:
        cards = [c for c in cards if c.rarity == wanted.rarity]
    if wanted.type is not None:
        cards = [c for c in cards if wanted.type in c.types]
    if wanted.category is not None:
        cards = [c for c in cards if c.category == wanted.category]
    if wanted.legal == "standard":
        cards = [c for c in cards if c.legal_standard]
    elif wanted.legal == "expanded":
        cards = [c for c in cards if c.legal_expanded]
    if wanted.hp_min is not None or wanted.hp_max is not None:
        low = -math.inf if wanted.hp_min is None else wanted.hp_min
        high = math.inf if wanted.hp_max is None else wanted.hp_max
        cards = [c for c in cards if c.hp is not None and low <= c.hp <= high]
    if wanted.price_min is not None or wanted.price_max is not None:
        low = -math.inf if wanted.price_min is None else wanted.price_min
        high = math.inf if wanted.price_max is None else wanted.price_max
        cards = [c for c in cards if c.price is not None and low <= c.price <= high]
    return cards


def _compare(a: Sequence[Any], b: Sequence[Any], directions: tuple[int, ...]) -> int:
    for x, y, direction in zip(a, b, directions, strict=True):
        if x != y:
            return direction if x > y else -direction
    return 0


def _first_after(keys: list[tuple[Any, ...]], position: Sequence[Any], directions: tuple[int, ...]) -> int:
    """Index of the first key that sorts strictly after `position` (keys are in the order's order)."""
    low, high = 0, len(keys)
    while low < high:
        middle = (low + high) // 2
        if _compare(keys[middle], position, directions) > 0:
            high = middle
        else:
            low = middle + 1
    return low


@dataclass
class _Matches:
    cards: list[CardFacts]
    keys: list[tuple[Any, ...]]


@dataclass
class CardTable:
    """All cards' facts, by id, with each order built on first use and recent filters' matches kept."""

    by_id: dict[str, CardFacts]
    _orders: dict[str, list[CardFacts]] = field(default_factory=dict)
    _matches: OrderedDict[tuple[CardFilter, str], _Matches] = field(default_factory=OrderedDict)

    def ordered(self, sort: str) -> list[CardFacts]:
        found = self._orders.get(sort)
        if found is None:
            # Stable sorts: by id first, then by the order's first key(s) in its direction, so ties
            # stay by id ascending in descending orders too.
            found = sorted(self.by_id.values(), key=lambda c: c.id)
            if sort == "catalog":
                found.sort(key=lambda c: c.catalog_key)
            elif sort.lstrip("-") == "name":
                found.sort(key=lambda c: c.name_key, reverse=sort.startswith("-"))
            elif sort.lstrip("-") == "release":
                found.sort(key=lambda c: c.release, reverse=sort.startswith("-"))
            else:
                priced = [c for c in found if c.price is not None]
                priced.sort(key=lambda c: c.price or 0, reverse=sort.startswith("-"))
                found = priced + [c for c in found if c.price is None]
            self._orders[sort] = found
        return found

    def matches(self, wanted: CardFilter, sort: str) -> _Matches:
        cache_key = (wanted, sort)
        found = self._matches.get(cache_key)
        if found is None:
            cards = select(self.ordered(sort), wanted)
            found = _Matches(cards, [card.key(sort) for card in cards])
            self._matches[cache_key] = found
            if len(self._matches) > MATCH_CACHE:
                self._matches.popitem(last=False)
        else:
            self._matches.move_to_end(cache_key)
        return found

    def page(
        self, wanted: CardFilter, sort: str, after: list[Any] | None, limit: int
    ) -> tuple[list[str], list[Any] | None]:
        """Ids of the `limit` cards after position `after` (of SHAPES[sort]), and the position of the
        last one when more remain."""
        found = self.matches(wanted, sort)
        start = 0 if after is None else _first_after(found.keys, after, ORDERS[sort])
        chosen = found.cards[start : start + limit]
        more = start + limit < len(found.cards)
        position = list(chosen[-1].key(sort)) if more and chosen else None
        return [card.id for card in chosen], position

    def keep(self, wanted: CardFilter) -> Callable[[str], bool]:
        """The filter as a test on ids (for search hits): the ids of the cards it keeps."""
        kept = {card.id for card in select(list(self.by_id.values()), wanted)}
        return kept.__contains__
