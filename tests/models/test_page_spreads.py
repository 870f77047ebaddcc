"""Cards on a table (#48's spreads): touching and overlapping cards merge in the page detector's
whole-photo view, so each card's core is found in the merged blob (`split_blobs`) and a blob of several
cards must not stand for the cards inside it (`same_place`)."""

from __future__ import annotations

import cv2
import numpy as np

from models.geometry import CARD_ASPECT
from models.page_detector import PAGE_ERODE, PAGE_SIDE_RATIO, same_place, side_ratio, split_blobs

WIDTH = 60.0  # px, in the page view
HEIGHT = WIDTH * CARD_ASPECT


def card(cx: float, cy: float, angle: float) -> np.ndarray:
    return cv2.boxPoints(((cx, cy), (WIDTH, HEIGHT), angle)).astype(np.float32)


def mask_of(*quads: np.ndarray) -> np.ndarray:
    """The card map as `_page_candidates` hands it on: every card filled, then eroded by PAGE_ERODE."""
    mask = np.zeros((400, 400), np.uint8)
    for quad in quads:
        cv2.fillPoly(mask, [np.round(quad).astype(np.int32)], 1)
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (PAGE_ERODE, PAGE_ERODE))
    return cv2.erode(mask, kernel).astype(bool)


def test_two_cards_merged_in_one_blob_give_a_card_shaped_quad_each() -> None:
    left, right = card(150, 200, 20), card(150 + 0.9 * WIDTH, 200 + 25, -10)  # touching, overlapping
    parts = split_blobs(mask_of(left, right))
    assert len(parts) == 2
    for truth in (left, right):
        quad = min(parts, key=lambda q: float(np.linalg.norm(q.mean(0) - truth.mean(0))))
        assert np.linalg.norm(quad.mean(0) - truth.mean(0)) < 0.2 * WIDTH  # its own, not the pair's middle
        sides = sorted(np.linalg.norm(quad - np.roll(quad, -1, axis=0), axis=1))
        assert abs(sides[0] / WIDTH - 1) < 0.2 and abs(sides[-1] / HEIGHT - 1) < 0.2  # a card's size
    assert np.linalg.norm(parts[0].mean(0) - parts[1].mean(0)) > 0.6 * WIDTH


def test_a_lone_card_or_cards_apart_are_not_split() -> None:
    assert split_blobs(mask_of(card(200, 200, 35))) == []
    assert split_blobs(mask_of(card(100, 150, 0), card(300, 250, 60))) == []  # two blobs of one core each


def test_a_blob_of_several_cards_does_not_stand_for_the_cards_inside_it() -> None:
    one = card(150, 200, 0)
    merged = cv2.boxPoints(((180, 200), (2.1 * WIDTH, HEIGHT), 0)).astype(np.float32)
    assert not same_place(one, merged) and not same_place(merged, one)
    assert same_place(one, one + np.array([3, -2], np.float32))  # the same card seen twice, a little apart


def test_a_card_tilted_on_the_table_is_card_shaped_and_a_sliver_is_not() -> None:
    assert abs(side_ratio(card(200, 200, 33)) - CARD_ASPECT) < 1e-3
    tilted = np.array([[120, 100], [180, 100], [200, 190], [100, 190]], np.float32)  # seen from its foot
    assert side_ratio(tilted) < PAGE_SIDE_RATIO
    sliver = np.array([[100, 100], [130, 100], [175, 190], [100, 190]], np.float32)  # sides 30-101 px
    assert side_ratio(sliver) > PAGE_SIDE_RATIO


def test_a_spread_of_sixteen_cards_finds_most_of_them(faces: list[tuple[str, np.ndarray]]) -> None:
    """A table spread whose cards touch and overlap: the page detector before `split_blobs` and
    `same_place` found 4 of its 16 cards within 5%, since blobs of several cards stood for the cards
    inside them; now 10 or more."""
    from models.page_detector import PageDetector
    from tests.models.conftest import require_weights
    from training.detector.evaluate_pages import corner_gap_pct
    from training.pages import make_spread_photo

    require_weights("page_detector.pt")
    photo = make_spread_photo(faces, 20_660_004, None, "standard", 0.4)
    assert len(photo.cards) == 16
    found = PageDetector().locate_all(photo.image)
    gaps = [min(corner_gap_pct(f.quad, c.corners) for f in found) for c in photo.cards]
    assert sum(g <= 5.0 for g in gaps) >= 8, gaps
