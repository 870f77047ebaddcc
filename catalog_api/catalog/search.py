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
from catalog_api.kit.pagination import PositionShape
from core.cardtext import normalize_number

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


class Hits:
    """A query's hits, best first, ties by id: positions into the index's rows and their scores.

    Arrays, not a `Hit` per row: a short query matches thousands of rows, the index keeps the hits of
    recent queries, and millions of small objects kept a while are what makes Python's full garbage
    collections long (a 160 ms pause in a search request, measured). A page builds its few `Hit`s."""

    def __init__(self, ids: list[str], positions: np.ndarray, scores: np.ndarray) -> None:
        self._ids, self.positions, self.scores = ids, positions, scores

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, index: int) -> Hit:
        return Hit(self._ids[int(self.positions[index])], float(self.scores[index]))

    def where(self, keep: Callable[[str], bool]) -> Hits:
        """The hits whose row id `keep` accepts, in the same order."""
        kept = np.fromiter((keep(self._ids[p]) for p in self.positions.tolist()), bool, len(self.positions))
        return Hits(self._ids, self.positions[kept], self.scores[kept])

    def sort_key(self, index: int) -> tuple[float, str]:
        return (-float(self.scores[index]), self._ids[int(self.positions[index])])


class SearchIndex:
    """Rows are (id, names: the usual name and its other-language names, collector number or None)."""

    def __init__(self, rows: Iterable[tuple[str, tuple[str, ...], str | None]]) -> None:
        by_name: dict[str, list[int]] = {}
        by_plain: dict[str, list[int]] = {}
        by_number: dict[str, list[int]] = {}
        self.ids: list[str] = []
        for position, (row_id, names, number) in enumerate(rows):
            self.ids.append(row_id)
            for exact in {plain(name) for name in names}:
                by_plain.setdefault(exact, []).append(position)
            for folded in {fold(name) for name in names}:
                by_name.setdefault(folded, []).append(position)
            folded_number = fold(normalize_number(number) or "").replace(" ", "")
            if folded_number:
                by_number.setdefault(folded_number, []).append(position)
        self._names = list(by_name)
        self._name_array = np.array(self._names, dtype=object)
        self._bound = NameBound(self._names)
        # Each distinct name's rows, flattened: name i's are _name_rows[_name_starts[i]:_name_starts[i + 1]].
        self._name_rows = np.fromiter(
            (p for name in self._names for p in by_name[name]), np.int64, sum(map(len, by_name.values()))
        )
        self._name_starts = np.cumsum([0, *(len(by_name[name]) for name in self._names)], dtype=np.int64)
        self._by_plain = {exact: np.array(rows, dtype=np.int64) for exact, rows in by_plain.items()}
        self._by_number = {number: np.array(rows, dtype=np.int64) for number, rows in by_number.items()}
        # Each row's place in id order: ties between equal scores go by id.
        self._id_rank = np.empty(len(self.ids), dtype=np.int64)
        self._id_rank[sorted(range(len(self.ids)), key=self.ids.__getitem__)] = np.arange(len(self.ids))
        # The hits of recent queries: each page of a cursor walk (and the same query under another
        # limit, include or lang) would otherwise score every name again (~15k names in 7 languages).
        self._recent: OrderedDict[str, Hits] = OrderedDict()

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: str, keep: Callable[[str], bool] | None = None) -> Hits:
        """Rows scoring at least MIN_SCORE (and passing `keep`, a filter on ids), best first, ties by id."""
        hits = self._recent.get(query)
        if hits is None:
            hits = self._score(query)
            self._recent[query] = hits
            if len(self._recent) > RECENT_QUERIES:
                self._recent.popitem(last=False)
        else:
            self._recent.move_to_end(query)
        return hits if keep is None else hits.where(keep)

    def _score(self, query: str) -> Hits:
        folded, exact = fold(query), plain(query)
        found: list[tuple[np.ndarray, np.ndarray]] = []
        if folded:
            # Only the names that can reach MIN_SCORE are scored (name_bound.py: the same results).
            candidates = self._bound.candidates(folded, MIN_SCORE)
            choices = self._names if candidates is None else self._name_array[candidates].tolist()
            cutoff = MIN_SCORE * 100
            scored = process.cdist(
                [folded], choices, scorer=fuzz.WRatio, processor=None, score_cutoff=cutoff, dtype=np.float64
            )[0]
            passed = np.flatnonzero(scored >= cutoff)
            names = passed if candidates is None else candidates[passed]
            # Python's round on each distinct score (NumPy's rounds 0.83125 down: binary halves differ).
            distinct, which = np.unique(np.minimum(scored[passed], 99.99) / 100, return_inverse=True)
            fuzzy = np.array([round(value, 4) for value in distinct.tolist()])[which]
            starts, ends = self._name_starts[names], self._name_starts[names + 1]
            counts = ends - starts
            # The rows of every name that passed, each beside its name's score.
            offsets = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
            found.append((self._name_rows[offsets], np.repeat(fuzzy, counts)))
            # An exact name in any language scores 1.0 (it always passes WRatio too).
            exact_rows = self._by_plain.get(exact)
            if exact_rows is not None:
                found.append((exact_rows, np.ones(len(exact_rows))))
        number = fold(normalize_number(query.strip()) or "").replace(" ", "")
        number_rows = self._by_number.get(number) if number else None
        if number_rows is not None:
            found.append((number_rows, np.ones(len(number_rows))))
        if not found:
            return Hits(self.ids, np.empty(0, dtype=np.int64), np.empty(0))
        rows = np.concatenate([r for r, _ in found])
        scores = np.concatenate([s for _, s in found])
        # Each row once, with its best score.
        by_row = np.lexsort((-scores, rows))
        rows, scores = rows[by_row], scores[by_row]
        first = np.ones(len(rows), dtype=bool)
        first[1:] = rows[1:] != rows[:-1]
        rows, scores = rows[first], scores[first]
        best_first = np.lexsort((self._id_rank[rows], -scores))
        return Hits(self.ids, rows[best_first], scores[best_first])


def page_after(hits: Hits, after: tuple[float, str] | None, limit: int) -> tuple[list[Hit], bool]:
    """The `limit` hits that follow position `after` (a (-score, id) key), and whether more remain."""
    start = 0 if after is None else bisect_right(range(len(hits)), after, key=hits.sort_key)
    chosen = [hits[index] for index in range(start, min(start + limit, len(hits)))]
    return chosen, start + limit < len(hits)


def search_page(hits: Hits, after: list[Any] | None, limit: int) -> tuple[list[Hit], list[Any] | None]:
    """One page of search hits after a decoded search cursor (of SORT_KEY_SHAPE), and the position the
    next page starts from (None on the last page). Cards and the reference tables page searches alike."""
    chosen, more = page_after(hits, (after[0], after[1]) if after is not None else None, limit)
    return chosen, (list(chosen[-1].sort_key) if more and chosen else None)
