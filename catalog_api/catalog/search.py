"""Typo-tolerant search by name or collector number, in memory.

Each worker keeps the searchable text of every row (a few MB for the full catalog) and scores a query
against all of it with rapidfuzz, which is C and takes a few milliseconds for 21k cards. Names are
scored once per distinct name. A row is searched under its name in every language the feed carries
(`Glurak`, `Dracaufeu` and `Charizard` all find Charizard), and scores its best-matching name.
`score` is 0..1:
- 1.0 for an exact name in any language (case, accents and spacing folded) or an exact collector
  number (`025` = `25`);
- otherwise rapidfuzz's WRatio: whole-string similarity, so a missing or swapped letter still scores
  high, blended with partial and token matches (a prefix such as `chari` finds Charizard).
Rows under MIN_SCORE are not returned. Ties order by id, so the first row is the lowest id among equals.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from rapidfuzz import fuzz, process

from catalog_api.catalog.name_bound import NameBound
from catalog_api.kit.cardtext import normalize_number
from catalog_api.kit.pagination import PositionShape

MIN_SCORE = 0.6
RECENT_QUERIES = 256
_NON_WORD = re.compile(r"[^0-9a-z]+")


def plain(text: str) -> str:
    """Lower-case, accents stripped, spaces collapsed; symbols kept ('Charizard δ' stays distinct)."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return " ".join("".join(ch for ch in decomposed if not unicodedata.combining(ch)).split())


def fold(text: str) -> str:
    """`plain`, then punctuation and symbols dropped: 'Pokémon Trainer's' -> 'pokemon trainer s'."""
    return _NON_WORD.sub(" ", plain(text)).strip()


@dataclass(frozen=True)
class Hit:
    id: str
    score: float

    @property
    def sort_key(self) -> tuple[float, str]:
        return (-self.score, self.id)


# The shape of a search cursor's position: a hit's sort_key.
SORT_KEY_SHAPE: PositionShape = (float, str)


def every_name(name: str, names: dict[str, str] | None) -> tuple[str, ...]:
    """A row's usual name and its names in other languages, each once (what a search row carries)."""
    return tuple(dict.fromkeys([name, *(names or {}).values()]))


class SearchIndex:
    """Rows are (id, names: the usual name and its other-language names, collector number or None)."""

    def __init__(self, rows: Iterable[tuple[str, tuple[str, ...], str | None]]) -> None:
        by_name: dict[str, list[int]] = {}
        by_number: dict[str, list[int]] = {}
        self.ids: list[str] = []
        self._plain: list[frozenset[str]] = []
        for position, (row_id, names, number) in enumerate(rows):
            self.ids.append(row_id)
            self._plain.append(frozenset(plain(name) for name in names))
            for folded in {fold(name) for name in names}:
                by_name.setdefault(folded, []).append(position)
            folded_number = fold(normalize_number(number) or "").replace(" ", "")
            if folded_number:
                by_number.setdefault(folded_number, []).append(position)
        self._names = list(by_name)
        self._name_rows = [by_name[name] for name in self._names]
        self._by_number = by_number
        self._bound = NameBound(self._names)
        self._name_array = np.array(self._names, dtype=object)
        # The hits of recent queries: each page of a cursor walk (and the same query under another
        # limit, include or lang) would otherwise score every name again (~15k names in 7 languages).
        self._recent: OrderedDict[str, list[Hit]] = OrderedDict()

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: str, keep: Callable[[str], bool] | None = None) -> list[Hit]:
        """Rows scoring at least MIN_SCORE (and passing `keep`, a filter on ids), best first, ties by id."""
        hits = self._recent.get(query)
        if hits is None:
            hits = self._score(query)
            self._recent[query] = hits
            if len(self._recent) > RECENT_QUERIES:
                self._recent.popitem(last=False)
        else:
            self._recent.move_to_end(query)
        return hits if keep is None else [hit for hit in hits if keep(hit.id)]

    def _score(self, query: str) -> list[Hit]:
        folded, exact = fold(query), plain(query)
        scores: dict[int, float] = {}
        if folded:
            # Only the names that can reach MIN_SCORE are scored (name_bound.py: the same results).
            rows = self._bound.candidates(folded, MIN_SCORE)
            choices = self._names if rows is None else self._name_array[rows].tolist()
            for _name, score, index in process.extract(
                folded,
                choices,
                scorer=fuzz.WRatio,
                processor=None,
                limit=None,
                score_cutoff=MIN_SCORE * 100,
            ):
                fuzzy = round(min(score, 99.99) / 100, 4)
                for position in self._name_rows[index if rows is None else int(rows[index])]:
                    best = 1.0 if exact in self._plain[position] else fuzzy
                    if best > scores.get(position, 0.0):
                        scores[position] = best
        number = fold(normalize_number(query.strip()) or "").replace(" ", "")
        for position in self._by_number.get(number, ()) if number else ():
            scores[position] = 1.0
        hits = [Hit(self.ids[position], score) for position, score in scores.items()]
        hits.sort(key=lambda hit: hit.sort_key)
        return hits


def page_after(hits: list[Hit], after: tuple[float, str] | None, limit: int) -> tuple[list[Hit], bool]:
    """The `limit` hits that follow position `after` (a (-score, id) key), and whether more remain."""
    start = 0 if after is None else bisect_right([hit.sort_key for hit in hits], after)
    chosen = hits[start : start + limit]
    return chosen, start + limit < len(hits)


def search_page(hits: list[Hit], after: list[Any] | None, limit: int) -> tuple[list[Hit], list[Any] | None]:
    """One page of search hits after a decoded search cursor (of SORT_KEY_SHAPE), and the position the
    next page starts from (None on the last page). Cards and the reference tables page searches alike."""
    chosen, more = page_after(hits, (after[0], after[1]) if after is not None else None, limit)
    return chosen, (list(chosen[-1].sort_key) if more and chosen else None)
