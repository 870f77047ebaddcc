"""The in-memory search (catalog_api/catalog/search.py) scores, orders and pages exactly as its rules say:
checked against a plain reference written from the module's docstring (every row, every name, rapidfuzz's
WRatio one pair at a time, Python's `round`), on real card names in every language (or the sample
catalog's without ../shared), for exact, misspelt, other-language, partial and number queries."""

from __future__ import annotations

import random
from pathlib import Path

from rapidfuzz import fuzz

from catalog_api.catalog.search import MIN_SCORE, SearchIndex, every_name, fold, plain, search_page
from core.cardtext import normalize_number
from tests.catalog_api.feed_truth import read

Row = tuple[str, tuple[str, ...], str | None]


def feed_rows(feed_dir: Path) -> list[Row]:
    rows: list[Row] = []
    for record in read(feed_dir / "cards.jsonl.gz"):
        others = {lang: name for lang, name in (record.get("names") or {}).items() if name}
        name = record.get("name") or record["id"]
        rows.append((record["id"], every_name(name, others), record.get("number")))
    return rows


def reference(rows: list[Row], query: str) -> list[tuple[str, float]]:
    """Each row's best name score (1.0 for an exact name or collector number), MIN_SCORE or more, best
    first, ties by id."""
    folded, exact = fold(query), plain(query)
    number = fold(normalize_number(query.strip()) or "").replace(" ", "")
    hits: list[tuple[str, float]] = []
    for row_id, names, row_number in rows:
        best = 0.0
        for name in names:
            if not folded:
                continue
            score = fuzz.WRatio(folded, fold(name), processor=None)
            if score >= MIN_SCORE * 100:
                best = max(best, 1.0 if plain(name) == exact else round(min(score, 99.99) / 100, 4))
        if number and fold(normalize_number(row_number) or "").replace(" ", "") == number:
            best = 1.0
        if best:
            hits.append((row_id, best))
    return sorted(hits, key=lambda hit: (-hit[1], hit[0]))


def queries_for(rows: list[Row], rng: random.Random) -> list[str]:
    queries = ["Glurak", "Dracaufeu", "charzard", "Pikachu ex", "ex", "a", "Ra", "mew v", "25", "001", "δ"]
    for _row_id, names, number in rng.sample(rows, 40):
        name = rng.choice(names)
        cut = rng.randrange(len(name))
        queries += [name, name[:cut] + name[cut + 1 :], name[: max(3, len(name) // 2)]]
        if number:
            queries.append(number)
    return queries


def test_hits_equal_the_reference(feed_dir: Path) -> None:
    rows = feed_rows(feed_dir)
    index = SearchIndex(rows)
    for query in queries_for(rows, random.Random(3)):
        hits = index.search(query)
        assert [(hits[i].id, hits[i].score) for i in range(len(hits))] == reference(rows, query), query


def test_scores_round_as_python_does() -> None:
    """WRatio gives 'drk flareon' vs 'flareon v' 83.125: Python rounds that to 0.8313 (NumPy to 0.8312)."""
    rows: list[Row] = [("a-1", ("Flareon V",), "1"), ("a-2", ("Flareon",), "2"), ("a-3", ("Vaporeon",), "3")]
    hits = SearchIndex(rows).search("Drk Flareon")
    assert [(hits[i].id, hits[i].score) for i in range(len(hits))] == reference(rows, "Drk Flareon")
    assert (hits[1].id, hits[1].score) == ("a-1", 0.8313)


def test_pages_walk_every_hit_once_and_filters_keep_order(feed_dir: Path) -> None:
    rows = feed_rows(feed_dir)
    index = SearchIndex(rows)
    for query in ["char", "Pikachu", "energy"]:
        expected = [row_id for row_id, _ in reference(rows, query)]
        assert len(expected) > 20, query
        walked: list[str] = []
        position = None
        for _ in range(len(expected) // 7 + 1):
            chosen, position = search_page(index.search(query), position, 7)
            walked += [hit.id for hit in chosen]
            if position is None:
                break
        assert position is None and walked == expected, query
        odd = {row_id for row_id in expected[1::2]}
        kept = index.search(query, odd.__contains__)
        assert [kept[i].id for i in range(len(kept))] == [row_id for row_id in expected if row_id in odd]
