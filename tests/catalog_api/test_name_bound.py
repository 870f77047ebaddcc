"""The WRatio pre-filter (catalog_api/catalog/name_bound.py) never drops a name that rapidfuzz's WRatio
scores at the cut-off or above: checked name by name against rapidfuzz itself, for real card names in
every language (or the sample catalog's without ../shared), exact and misspelt queries alike."""

from __future__ import annotations

import random
from pathlib import Path

from rapidfuzz import fuzz, process

from catalog_api.catalog.name_bound import MIN_NAMES, NameBound
from catalog_api.catalog.search import MIN_SCORE, fold
from tests.catalog_api.feed_truth import read


def folded_names(feed_dir: Path) -> list[str]:
    names: set[str] = set()
    for record in read(feed_dir / "cards.jsonl.gz"):
        for name in [record.get("name") or "", *(record.get("names") or {}).values()]:
            if fold(name):
                names.add(fold(name))
    return sorted(names)


def test_no_name_reaching_the_cutoff_is_dropped(feed_dir: Path) -> None:
    names = folded_names(feed_dir)
    # Padded with variations so the filter is active (it stands aside below MIN_NAMES names).
    rng = random.Random(5)
    while len(names) < MIN_NAMES + 500:
        base = rng.choice(names)
        names.append(f"{base} {rng.choice(['ex', 'v', 'gx', 'vmax', 'lv x', 'niv 63', 'de team aqua'])}")
    names = sorted(set(names))
    bound = NameBound(names)
    queries = ["glurak", "glurk", "dracaufeu", "charzard", "mew v", "n", "ex", "a", "professor s research"]
    for name in rng.sample(names, 150):
        queries.append(name)
        cut = rng.randrange(len(name))
        queries.append((name[:cut] + name[cut + 1 :]).strip() or name)
    dropped_any = False
    for query in queries:
        rows = bound.candidates(query, MIN_SCORE)
        assert rows is not None, query
        kept = set(rows.tolist())
        dropped_any |= len(kept) < len(names)
        for _name, score, index in process.extract(
            query, names, scorer=fuzz.WRatio, processor=None, limit=None, score_cutoff=MIN_SCORE * 100
        ):
            assert index in kept, (query, names[index], score)
    assert dropped_any, "the filter must drop something, or it saves nothing"


def test_small_indexes_and_unusual_text_are_scored_whole() -> None:
    assert NameBound(["pikachu", "raichu"]).candidates("pika", MIN_SCORE) is None
    names = [f"name {i}" for i in range(MIN_NAMES + 1)]
    assert NameBound(names).candidates("na\u00efve", MIN_SCORE) is None
