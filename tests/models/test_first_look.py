"""The scan cascade's first look (#47: the detector's whole-photo view alone) against the full pipeline
and the truth, on real rendered faces laid on a surface at several photo sizes and turns, and on
training.synth's standard photos."""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np
import pytest

from models.geometry import face_corners
from tests.models.conftest import require_weights
from training.synth import BENCH_SEED_BASE

SEED = BENCH_SEED_BASE + 515_151


def lay(
    face: np.ndarray, size: tuple[int, int], height: float, turn: float, tilt: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """`face` on a plain, slightly noisy surface of `size` (width, height): the card `height` of the
    photo's short side, turned `turn` degrees about its centre, its far side narrowed by `tilt` (a camera not
    quite overhead). Returns the photo and the card's corners (TL, TR, BR, BL of the face)."""
    w, h = size
    rng = np.random.default_rng(round(1000 * height + turn))
    photo = np.clip(rng.normal(0, 4, (h, w, 3)) + np.array([46, 84, 62]), 0, 255).astype(np.uint8)
    card_h = height * min(w, h)
    card_w = card_h * face.shape[1] / face.shape[0]
    local = np.array(
        [
            [-card_w / 2, -card_h / 2],
            [card_w / 2, -card_h / 2],
            [card_w / 2, card_h / 2],
            [-card_w / 2, card_h / 2],
        ]
    )
    local[:2, 0] *= 1 - tilt  # the far (top) side shorter
    a = math.radians(turn)
    rotation = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    corners = (local @ rotation.T + np.array([w / 2, h / 2])).astype(np.float32)
    hom = cv2.getPerspectiveTransform(face_corners((face.shape[1], face.shape[0])), corners)
    card = cv2.warpPerspective(face, hom, (w, h), flags=cv2.INTER_AREA)
    inside = cv2.warpPerspective(np.full(face.shape[:2], 255, np.uint8), hom, (w, h)) > 127
    photo[inside] = card[inside]
    return photo, corners


def corner_error(found: np.ndarray, truth: np.ndarray) -> float:
    """The largest corner distance as a fraction of the card's height, the card upright or upside down
    (the first look leaves which short side is the top to the embedder, as the detector does)."""
    height = float(np.linalg.norm(truth[3] - truth[0]))
    return min(float(np.abs(np.roll(found, r, axis=0) - truth).max()) for r in (0, 2)) / height


@pytest.fixture(scope="module")
def detector() -> Any:
    from models.detector import CardDetector

    require_weights("detector.pt")
    return CardDetector()


@pytest.mark.parametrize("size", [(960, 1280), (1280, 960), (1536, 2048)])
@pytest.mark.parametrize("turn", [0.0, 7.0, 90.0, 183.0, 260.0])
def test_the_first_look_finds_a_card_where_the_full_pipeline_does(
    faces: list[tuple[str, np.ndarray]], detector: Any, size: tuple[int, int], turn: float
) -> None:
    for height, tilt in ((0.75, 0.0), (0.5, 0.12)):
        photo, truth = lay(faces[0][1], size, height, turn, tilt)
        look = detector.first_look_batch([photo])[0]
        full = detector.locate_batch([photo])[0]
        assert look.quad is not None and full is not None, (size, turn, height)
        # Within 1.5% of the card's height of the truth and of the full pipeline's corners (which the
        # zoomed passes bring within ~0.3%), oriented the same way.
        assert corner_error(look.quad, truth) < 0.015, (size, turn, height)
        assert corner_error(full, truth) < 0.005, (size, turn, height)
        assert float(np.abs(look.quad - full).max()) / (height * min(size)) < 0.015, (size, turn, height)
        # The full pipeline from the first look's candidates is the full pipeline.
        again = detector.locate_batch([photo], coarse=[look.candidates])[0]
        assert again is not None and np.array_equal(again, full)


def test_the_first_look_on_standard_photos_is_the_full_pipelines_card(
    faces: list[tuple[str, np.ndarray]], detector: Any
) -> None:
    """training.synth's standard photos (sleeves, clutter, shadows, papers beside the card): where the
    first look finds a card, its corners are within 2.5% of the card's height of the full pipeline's."""
    from training.synth import make_photo

    photos = [make_photo(face, SEED + i, "standard").image for i, (_, face) in enumerate(faces * 4)]
    looks = detector.first_look_batch(photos)
    fulls = detector.locate_batch(photos)
    found = [(look.quad, full) for look, full in zip(looks, fulls, strict=True) if look.quad is not None]
    assert len(found) >= 6, len(found)
    for quad, full in found:
        assert full is not None and corner_error(quad, full) < 0.025


def test_a_photo_with_no_card_gives_the_first_look_nothing(detector: Any) -> None:
    empty = np.clip(np.random.default_rng(5).normal(0, 4, (960, 1280, 3)) + 90, 0, 255).astype(np.uint8)
    looks = detector.first_look_batch([empty])
    assert looks[0].quad is None and detector.locate_batch([empty], coarse=[looks[0].candidates]) == [None]
    assert detector.first_look_batch([]) == []
