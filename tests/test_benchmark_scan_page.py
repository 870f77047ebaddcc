"""benchmarks/scan_page.py's judge: a place on no card is a false card (#48: a card reported where there
is none); a place on a card whose corners it missed is an off one, and that card is not found. And its
`--validation` photos, where a setting is chosen, are never the ones it reports on."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.scan_page import Sent, Tally, judge, photo_seed
from training.pages import PageCard, PagePhoto

CARD = np.array([[100, 100], [163, 100], [163, 188], [100, 188]], np.float32)  # 63 x 88 px


def place(quad: np.ndarray, card_id: str | None = "base1-1") -> dict[str, Any]:
    matches = [{"card": {"id": card_id}}] if card_id else []
    return {"corners": quad.tolist(), "matches": matches, "unidentified": None}


def judged(*places: dict[str, Any]) -> dict[str, Any]:
    photo = PagePhoto(np.zeros((400, 400, 3), np.uint8), "free", [PageCard(CARD, "card", "base1-1")])
    tally = Tally()
    judge(Sent("spread", photo, b""), {"cards": list(places)}, tally)
    return tally.as_dict()


def test_a_card_found_and_named_is_neither_false_nor_off() -> None:
    got = judged(place(CARD + 1))
    assert (got["found_pct"], got["top1_pct"]) == (100.0, 100.0)
    assert (got["false_card_photos_pct"], got["misplaced_card_photos_pct"]) == (0.0, 0.0)


def test_a_place_on_the_card_with_its_corners_missed_is_off_not_false() -> None:
    got = judged(place(CARD + np.array([0, 8.8], np.float32)))  # 10% of the card's height down
    assert got["found_pct"] == 0.0 and got["misses"] == {"card not found": 1}
    assert (got["false_card_photos_pct"], got["misplaced_card_photos_pct"]) == (0.0, 100.0)


def test_a_place_where_there_is_no_card_is_false() -> None:
    got = judged(place(CARD), place(CARD + np.array([200, 150], np.float32), "base1-2"))
    assert got["found_pct"] == 100.0
    assert (got["false_card_photos_pct"], got["misplaced_card_photos_pct"]) == (100.0, 0.0)


def test_validation_photos_are_never_benchmark_photos() -> None:
    from training.synth import BENCH_SEED_BASE, VAL_SEED_BASE

    buckets = ("page", "page-hard", "spread")
    bench = {photo_seed(b, k, BENCH_SEED_BASE) for b in buckets for k in range(1000)}
    validation = {photo_seed(b, k, VAL_SEED_BASE) for b in buckets for k in range(1000)}
    assert len(bench) == len(validation) == 3000  # no two buckets share a photo
    assert not bench & validation
    assert photo_seed("page", 0) == BENCH_SEED_BASE + 6_000_000  # the seeds the reported runs used
