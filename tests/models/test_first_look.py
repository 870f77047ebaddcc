"""The scan cascade's first look (#47) against the detector network, on real rendered faces laid on
surfaces at several sizes and turns, and on scenes it must leave to the network."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from models.first_look import first_look
from models.geometry import face_corners
from tests.models.conftest import require_weights


def lay(face: np.ndarray, size: tuple[int, int], height: float, turn: float, tilt: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """`face` on a plain, slightly noisy surface of `size` (width, height): the card `height` of the
    photo's short side, turned `turn` degrees about its centre, its far side narrowed by `tilt` (a camera not
    quite overhead). Returns the photo and the card's corners (TL, TR, BR, BL of the face)."""
    w, h = size
    rng = np.random.default_rng(round(1000 * height + turn))
    photo = np.clip(rng.normal(0, 4, (h, w, 3)) + np.array([46, 84, 62]), 0, 255).astype(np.uint8)
    card_h = height * min(w, h)
    card_w = card_h * face.shape[1] / face.shape[0]
    local = np.array([[-card_w / 2, -card_h / 2], [card_w / 2, -card_h / 2], [card_w / 2, card_h / 2], [-card_w / 2, card_h / 2]])
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


@pytest.mark.parametrize("size", [(960, 1280), (1280, 960), (1536, 2048)])
@pytest.mark.parametrize("turn", [0.0, 7.0, 90.0, 183.0, 260.0])
def test_the_first_look_finds_a_card_on_a_plain_surface_as_the_network_does(
    faces: list[tuple[str, np.ndarray]], size: tuple[int, int], turn: float
) -> None:
    from models.detector import CardDetector

    require_weights("detector.pt")
    network = CardDetector()
    for height, tilt in ((0.75, 0.0), (0.5, 0.12)):
        photo, truth = lay(faces[0][1], size, height, turn, tilt)
        quad = first_look(photo)
        assert quad is not None, (size, turn, height)
        located = network.locate_batch([photo])[0]
        assert located is not None
        # Within 1% of the card's height of the truth, and of where the network puts the corners.
        assert corner_error(quad, truth) < 0.01, (size, turn, height)
        assert corner_error(quad, located) < 0.015, (size, turn, height)


def test_the_first_look_leaves_small_cards_and_empty_surfaces_to_the_network(
    faces: list[tuple[str, np.ndarray]],
) -> None:
    small, _ = lay(faces[0][1], (1280, 960), 0.15, 10.0)
    assert first_look(small) is None
    empty = np.full((960, 1280, 3), (46, 84, 62), np.uint8)
    assert first_look(empty) is None
    # A square note is not a card's shape.
    note = empty.copy()
    cv2.rectangle(note, (400, 200), (800, 600), (240, 235, 180), -1)
    assert first_look(note) is None
