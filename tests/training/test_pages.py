"""Photos of many cards (`training.pages`, #48): every card's corners on the card drawn there, pockets
numbered as a reader of the photo counts them, backs and empty pockets named, spreads overlapping no more
than their bound. Self-contained: the faces are drawn here, so no ../shared is needed."""

from __future__ import annotations

import itertools

import cv2
import numpy as np

from models.geometry import rectify
from training.pages import (
    GRIDS,
    POCKET_BACK_P,
    POCKET_EMPTY_P,
    SPREAD_OVERLAP,
    PagePhoto,
    make_page_photo,
    make_spread_photo,
    pocket_kinds,
)
from training.synth import BENCH_SEED_BASE, FACE_H, FACE_W

SEED = BENCH_SEED_BASE + 48_000
SCALE = 0.3  # 12 MP drawn at 0.3: 1.1 MP, fast and still ~200 px a card


def face(colour: tuple[int, int, int]) -> np.ndarray:
    """A flat face of one colour inside a white border: its middle tells which face a quad landed on."""
    out = np.full((FACE_H, FACE_W, 3), 250, np.uint8)
    out[40:-40, 40:-40] = colour
    return out


COLOURS = [(200, 30, 30), (30, 170, 40), (30, 60, 200), (220, 200, 30), (150, 40, 170), (30, 180, 180)]
FACES = [(f"x-{i}", face(c)) for i, c in enumerate(itertools.islice(itertools.cycle(COLOURS), 16))]
FACES_INDEX = {card_id: i for i, (card_id, _) in enumerate(FACES)}


def colour_at(photo: PagePhoto, corners: np.ndarray) -> int:
    """Which of COLOURS the middle of the card cut out at `corners` shows, by hue: the camera's light and
    the pocket's film change how bright it is, not which colour it is."""
    cut = rectify(photo.image, corners)
    h, w = cut.shape[:2]
    mean = cut[h // 3 : 2 * h // 3, w // 3 : 2 * w // 3].reshape(-1, 3).mean(0)
    return int(np.argmax([float(hue(mean) @ hue(np.asarray(c, np.float64))) for c in COLOURS]))


def hue(colour: np.ndarray) -> np.ndarray:
    centred = colour - colour.mean()
    return centred / (np.linalg.norm(centred) + 1e-6)


def clockwise(quad: np.ndarray) -> bool:
    """Image y points down, so a clockwise quad has a positive shoelace sum."""
    x, y = quad[:, 0], quad[:, 1]
    return float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) > 0


def test_a_page_numbers_its_pockets_as_the_photo_reads_and_each_quad_lies_on_its_card() -> None:
    for grid in GRIDS:
        photo = make_page_photo(FACES, SEED, grid, "standard", SCALE)
        rows, cols = grid
        assert photo.layout == "grid" and photo.grid == grid and len(photo.cards) == rows * cols
        assert [c.slot for c in photo.cards] == [
            (r, c) for r in range(1, rows + 1) for c in range(1, cols + 1)
        ]
        centres = np.array([c.corners.mean(0) for c in photo.cards]).reshape(rows, cols, 2)
        assert (np.diff(centres[..., 0], axis=1) > 0).all()  # columns left to right
        assert (np.diff(centres[..., 1], axis=0) > 0).all()  # rows top to bottom
        h, w = photo.image.shape[:2]
        used = 0
        for card in photo.cards:
            assert clockwise(card.corners)
            assert (
                (card.corners >= 0).all()
                and (card.corners[:, 0] < w).all()
                and (card.corners[:, 1] < h).all()
            )
            if card.kind == "card":
                assert card.card_id == f"x-{used}"
                assert colour_at(photo, card.corners) == used % len(COLOURS), (grid, card.slot)
                used += 1
            else:
                assert card.card_id is None


def test_pockets_hold_backs_and_stay_empty_at_their_rates_and_say_so() -> None:
    kinds = [kind for seed in range(SEED, SEED + 200) for kind in pocket_kinds(seed, 9)]
    assert abs(kinds.count("empty") / len(kinds) - POCKET_EMPTY_P) < 0.02
    assert abs(kinds.count("back") / len(kinds) - POCKET_BACK_P) < 0.02
    seed = next(s for s in range(SEED, SEED + 200) if {"back", "empty"} <= set(pocket_kinds(s, 9)))
    photo = make_page_photo(FACES, seed, (3, 3), "standard", SCALE)
    assert [card.kind for card in photo.cards] == pocket_kinds(seed, 9)
    for card in photo.cards:
        assert (card.card_id is None) == (card.kind != "card")


def test_same_seed_same_page_and_hard_pages_come_as_their_phone_encoded_them() -> None:
    a, b = (
        make_page_photo(FACES, SEED, (3, 3), "hard", SCALE),
        make_page_photo(FACES, SEED, (3, 3), "hard", SCALE),
    )
    assert np.array_equal(a.image, b.image) and a.jpeg == b.jpeg and a.jpeg is not None
    decoded = cv2.imdecode(np.frombuffer(a.jpeg, np.uint8), cv2.IMREAD_COLOR)
    assert decoded is not None and np.array_equal(decoded[..., ::-1], a.image)
    assert make_page_photo(FACES, SEED, (3, 3), "standard", SCALE).jpeg is None


def test_a_spread_lies_at_any_angle_each_card_covered_no_more_than_its_bound() -> None:
    angles = []
    for seed in range(SEED, SEED + 6):
        photo = make_spread_photo(FACES, seed, 10, "standard", SCALE)
        assert photo.layout == "free" and photo.grid is None and 6 <= len(photo.cards) <= 10
        for i, card in enumerate(photo.cards):
            assert clockwise(card.corners) and card.kind == "card" and card.card_id in FACES_INDEX
            area = cv2.contourArea(card.corners)
            for later in photo.cards[i + 1 :]:
                covered, _ = cv2.intersectConvexConvex(card.corners, later.corners)
                assert covered / area <= SPREAD_OVERLAP + 1e-3
            up = card.corners[0] - card.corners[3]
            angles.append(np.degrees(np.arctan2(up[0], -up[1])) % 360)
        top = photo.cards[-1]  # nothing lies over the last card placed: its middle is its face's colour
        assert colour_at(photo, top.corners) == FACES_INDEX[top.card_id or ""] % len(COLOURS)
    assert np.histogram(angles, bins=4, range=(0, 360))[0].min() >= 3  # every quarter turn


def test_evaluate_pages_scores_each_found_card_by_the_pocket_the_layout_names() -> None:
    """`training.detector.evaluate_pages.pockets` numbers the finds' pockets as `POST /v1/scan/page` does
    (#48): the true quads are every pocket right; a find a little off is still judged; without the
    page's first column, the layout counts from the next one, so every card found is in the wrong pocket."""
    from models.page_detector import PageFind
    from training.detector.evaluate_pages import pockets

    photo = make_page_photo(FACES, SEED + 7, (3, 3), "standard", SCALE, back_p=0.0)
    cards = [c for c in photo.cards if c.kind == "card"]
    assert len(cards) >= 6
    finds = [
        PageFind(quad=c.corners.copy(), bands=2.0, face_up=True) for c in photo.cards if c.kind != "empty"
    ]
    assert pockets(photo, finds) == (len(cards), len(cards))
    nudged = [
        PageFind(quad=f.quad + np.array([3.0, 2.0], np.float32), bands=f.bands, face_up=True) for f in finds
    ]
    assert pockets(photo, nudged) == (len(cards), len(cards))
    kept = [c for c in photo.cards if c.kind != "empty" and c.slot is not None and c.slot[1] > 1]
    right, judged = pockets(photo, [PageFind(quad=c.corners.copy(), bands=2.0, face_up=True) for c in kept])
    assert judged == sum(c.kind == "card" for c in kept) and judged > 0
    assert right == 0
    assert pockets(photo, []) == (0, 0)
