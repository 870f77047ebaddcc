"""The page detector's zoomed passes (#48): a card of a page is zoomed on again only while the last pass
still moved it (`page_refine_moved`): each pass is a network view a card, much of what a page costs."""

from __future__ import annotations

import dataclasses

import numpy as np

from models.page_detector import moved
from tests.models.conftest import require_weights

CARD = np.array([[100, 100], [163, 100], [163, 188], [100, 188]], np.float32)  # 63 x 88 px


def test_moved_is_the_farthest_corner_over_the_shorter_side_whatever_corner_starts() -> None:
    assert moved(CARD, CARD) == 0.0
    assert moved(CARD, np.roll(CARD, 2, axis=0)) == 0.0  # the same place, turned 180 degrees
    assert abs(moved(CARD, CARD + np.float32([6.3, 0])) - 0.1) < 1e-6  # every corner a tenth of 63 px
    nudged = CARD.copy()
    nudged[2] += np.float32([0, 12.6])  # one corner 20% of the 63-px short side away
    assert abs(moved(CARD, nudged) - 0.2) < 1e-6


def test_a_card_found_where_it_was_looked_for_gets_no_second_view(
    faces: list[tuple[str, np.ndarray]],
) -> None:
    from models.page_detector import PageDetector
    from training.detector.evaluate_pages import corner_gap_pct
    from training.pages import make_page_photo

    require_weights("page_detector.pt")
    photo = make_page_photo(faces, 20_650_000, (3, 3), "standard", 0.4, back_p=0.0)
    truths = [c.corners for c in photo.cards if c.kind == "card"]
    detector = PageDetector()
    detector.load()
    shipped = detector.cfg.page_refine_moved
    assert detector.cfg.page_refine_passes == 2 and shipped > 0

    def run(bound: float) -> tuple[int, list[float]]:
        detector.cfg = dataclasses.replace(detector.cfg, page_refine_moved=bound)
        before = detector.views_run
        found = detector.locate_all(photo.image)
        gaps = [min(corner_gap_pct(f.quad, t) for f in found) for t in truths]
        return detector.views_run - before, gaps

    every_view, every_gap = run(0.0)
    never_again, first_gap = run(10.0)  # no card moves ten of its widths: one zoomed pass a card
    gated, gated_gap = run(shipped)
    assert every_view - never_again >= len(truths)  # the second pass is a view a card
    assert never_again < gated < every_view  # some cards moved enough, some did not
    assert max(every_gap) <= 5.0 and max(gated_gap) <= 5.0, (every_gap, gated_gap)
    assert first_gap != every_gap  # the second pass does move corners
