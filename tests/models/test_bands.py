"""The detector's band evidence (#43, #48): a card's face shows a name band and a number band, which is
what tells it from a card back, an empty pocket or a holder. `min_bands` refuses a find without them
(off by default); the page detector marks a back without bands and says it lies face down."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from tests.models.conftest import require_weights
from tests.models.test_first_look import lay


@pytest.fixture(scope="module")
def photos(faces: list[tuple[str, np.ndarray]]) -> list[np.ndarray]:
    """Each reference face laid on a surface, upright-ish and turned past a quarter."""
    return [lay(face, (960, 1280), 0.6, turn)[0] for _, face in faces for turn in (8.0, 95.0)]


def test_a_face_carries_its_bands_and_min_bands_refuses_a_find_without_enough(
    photos: list[np.ndarray],
) -> None:
    from models.detector import CardDetector, _pyramid

    require_weights("detector.pt")
    detector = CardDetector()
    detector.load()
    found = detector.locate_batch(photos)
    assert all(q is not None for q in found)
    for photo, quad in zip(photos, found, strict=True):
        view = detector._zoom([_pyramid(photo)], [(0, quad)])[0][1]
        assert view is not None and view[2] >= 1.5, view  # both bands, on a plain face
    detector.cfg = dataclasses.replace(detector.cfg, min_bands=1.0)
    assert all(q is not None for q in detector.locate_batch(photos))
    detector.cfg = dataclasses.replace(detector.cfg, min_bands=2.01)  # more than any find can score
    assert detector.locate_batch(photos) == [None] * len(photos)


def test_the_page_detector_says_which_cards_lie_face_down(faces: list[tuple[str, np.ndarray]]) -> None:
    from models.page_detector import PageDetector
    from training.pages import make_page_photo

    require_weights("page_detector.pt")
    photo = make_page_photo(faces, 20_650_000, (3, 3), "standard", 0.4, back_p=0.4)
    kinds = [card.kind for card in photo.cards]
    assert "back" in kinds and "card" in kinds
    found: list[Any] = PageDetector().locate_all(photo.image)
    from training.detector.evaluate_pages import corner_gap_pct

    checked: list[str] = []
    for card in photo.cards:
        near = [f for f in found if corner_gap_pct(f.quad, card.corners) <= 5.0]
        if near and card.kind != "empty":
            assert near[0].face_up == (card.kind == "card"), (card.kind, near[0].bands)
            checked.append(card.kind)
    assert {"back", "card"} <= set(checked), checked
