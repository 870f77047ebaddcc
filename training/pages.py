"""Photos of many cards at once (#48): binder pages and table spreads, with every card's corners.

`training.synth` draws one card a photo. A collector with a binder photographs a page of 4, 9 or 12
pockets; one sorting a pile lays cards out on the table. This module composes those scenes from the same
parts (the table, its clutter, a sleeve's film and streaks, the phone camera) and records, for each card,
its corners (the card's own top-left, top-right, bottom-right, bottom-left, in photo px), what lies there
(a face, a card seen from the back, or an empty pocket) and, on a page, its pocket (row, column, from 1).

A page is shot roughly upright (within `PAGE_TURN_DEG`), so the page's pocket grid is the grid a reader of
the photo sees: pocket (1, 1) is the top-left one in the photo. Spreads lie at any angle, touching or
overlapping (a card on top hides up to `SPREAD_OVERLAP` of one below it), under one table-wide perspective.

    .venv/bin/python -m training.pages --faces ~/.cache/cardcat/renders/catalog --out /tmp/pages --count 4
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import cv2
import numpy as np

from models.geometry import read_face
from training.synth import (
    CARD_ASPECT,
    FACE_H,
    HARD_SLEEVE_TINTS,
    _background,
    _bare_card,
    _camera,
    _card_back,
    _clutter,
    _paste,
    _phone_camera,
    _place,
    _round_corners,
    _sleeve,
    _streaks,
    _streams,
    draw_corners,
    hard_look,
)

PageKind = Literal["card", "back", "empty"]
GRIDS = ((2, 2), (3, 3), (3, 4))  # rows, columns of a binder page's pockets
PAGE_PHOTO_SIZES = ((4032, 3024), (3024, 4032))  # 12 MP, landscape and portrait
PAGE_HEIGHT = (0.65, 0.95)  # the page's height, of the photo's short side
PAGE_TURN_DEG = 6.0  # in plane, at most: pages are shot upright
PAGE_TILT_DEG = {"standard": (0.0, 20.0), "hard": (10.0, 35.0)}
POCKET_SLACK = (1.03, 1.06)  # a pocket's size over the card's
POCKET_PLAY = 0.012  # a card's shift in its pocket, of the pocket's size
POCKET_TURN_DEG = 1.5  # and its turn
POCKET_EMPTY_P = 0.06
POCKET_BACK_P = 0.04
POCKET_FILM = {"clear": (0.03, 0.1), "hazy": (0.12, 0.28)}  # the film's opacity over a card
POCKET_HAZY_P = {"standard": 0.3, "hard": 0.6}
SPREAD_CARDS = (2, 16)
SPREAD_COVER = (0.25, 0.55)  # the cards' share of the table in the frame, all together
SPREAD_OVERLAP = 0.2  # of a card's area, under the cards placed after it
SPREAD_KEYSTONE = {"standard": 0.08, "hard": 0.18}  # the far edge's shrink, of the width
SPREAD_SLEEVE_P = {"standard": 0.0, "hard": 0.35}
_SALT = {"page": 131, "spread": 137}


@dataclass(frozen=True)
class PageCard:
    """One card place in a photo: its corners (TL, TR, BR, BL of the card, photo px), what lies there, the
    card id of a face, and on a binder page its pocket (row, column), counted from 1."""

    corners: np.ndarray
    kind: PageKind
    card_id: str | None
    slot: tuple[int, int] | None = None


@dataclass(frozen=True)
class PagePhoto:
    """A photo of many cards; `cards` in the order they were placed (pages: row by row)."""

    image: np.ndarray
    layout: Literal["grid", "free"]
    cards: list[PageCard]
    grid: tuple[int, int] | None = None  # rows, columns
    jpeg: bytes | None = None  # the photo as its simulated phone encoded it (hard only)


def _photo_size(rng: np.random.Generator, scale: float) -> tuple[int, int]:
    W, H = PAGE_PHOTO_SIZES[int(rng.integers(0, len(PAGE_PHOTO_SIZES)))]
    return round(W * scale), round(H * scale)


def _table(rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    img = _background(rng, *size)
    _clutter(rng, img, int(rng.integers(0, 4)))
    return img


def _camera_out(
    seed: int, salt: int, img: np.ndarray, hard: bool, scale: float
) -> tuple[np.ndarray, bytes | None]:
    """The phone: #13's hard camera (light, cast, blur, noise, sharpening, its JPEG), or the standard one."""
    if hard:
        image, data = _phone_camera(_streams(seed, salt), img, hard_look(seed), scale)
        return image, data
    return _camera(np.random.default_rng([seed, salt, 1]), img, False, scale), None


# ------------------------------------------------------------------------------------------ pages
def _pocket_quad(rng: np.random.Generator, x0: float, y0: float, pw: float, ph: float) -> np.ndarray:
    """Where the card lies in its pocket (page px): centred with a little play and a slight turn."""
    ch = ph / rng.uniform(*POCKET_SLACK)
    cw = ch / CARD_ASPECT
    cx = x0 + pw / 2 + rng.uniform(-1, 1) * POCKET_PLAY * pw
    cy = y0 + ph / 2 + rng.uniform(-1, 1) * POCKET_PLAY * ph
    a = math.radians(rng.uniform(-POCKET_TURN_DEG, POCKET_TURN_DEG))
    rot = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    half = np.array([[-cw, -ch], [cw, -ch], [cw, ch], [-cw, ch]]) / 2
    return (half @ rot.T + [cx, cy]).astype(np.float32)


def _page_layer(
    rng: np.random.Generator,
    fills: list[np.ndarray | None],
    rows: int,
    cols: int,
    film: float,
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The page as RGB + alpha, and each pocket's card quad in page px (row by row). `fills[i]` is the face
    or back in pocket i (all one size), None for an empty pocket. Over every pocket lies the film, tinted,
    with streaks."""
    face_h = next((f.shape[0] for f in fills if f is not None), FACE_H)
    ph = face_h * 1.05
    pw = ph / CARD_ASPECT
    seam = rng.uniform(0.03, 0.05) * pw
    side = rng.uniform(0.12, 0.2) * pw  # the strip with the binder's holes
    W, H = round(side + cols * pw + (cols + 1) * seam), round(rows * ph + (rows + 1) * seam)
    rgb = np.zeros((H, W, 3), np.float32)
    card_alpha = np.zeros((H, W), np.float32)
    quads = []
    for i, fill in enumerate(fills):
        r, c = divmod(i, cols)
        quad = _pocket_quad(rng, side + seam + c * (pw + seam), seam + r * (ph + seam), pw, ph)
        quads.append(quad)
        if fill is None:
            continue
        fh, fw = fill.shape[:2]
        alpha = np.ones((fh, fw), np.float32)
        _round_corners(alpha, 0, 0, fw, fh, 0.035 * fw)
        src = np.array([[0, 0], [fw, 0], [fw, fh], [0, fh]], np.float32) - 0.5
        hom = cv2.getPerspectiveTransform(src, quad)
        warped = cv2.warpPerspective(np.dstack([fill * alpha[..., None], alpha]), hom, (W, H))
        rgb += warped[..., :3]
        card_alpha = np.maximum(card_alpha, warped[..., 3])
    tint = np.asarray(HARD_SLEEVE_TINTS["clear"], np.float32) * rng.uniform(0.85, 1.0)
    film_alpha = np.full((H, W), film, np.float32)
    seam_alpha = float(rng.uniform(0.35, 0.7))
    for r in range(rows + 1):
        y = round(r * (ph + seam))
        film_alpha[y : y + round(seam)] = seam_alpha
    for c in range(cols + 1):
        x = round(side + c * (pw + seam))
        film_alpha[:, x : x + round(seam)] = seam_alpha
    film_alpha[:, : round(side)] = seam_alpha
    for k in range(rows + 1):
        centre = (round(side / 2), round(H * (k + 0.5) / (rows + 1)))
        cv2.circle(film_alpha, centre, max(3, round(side / 4)), 0.0, -1, cv2.LINE_AA)
    alpha = np.maximum(card_alpha, film_alpha)
    # The film over a card: the card shows through, tinted as much as the film is opaque.
    out = (rgb * (1 - film_alpha[..., None]) + tint * film_alpha[..., None]) / np.maximum(alpha, 1e-3)[
        ..., None
    ]
    _streaks(rng, out, alpha)
    return out, alpha, quads


def pocket_kinds(seed: int, count: int, back_p: float = POCKET_BACK_P) -> list[PageKind]:
    """What each pocket of `make_page_photo(..., seed, ...)` holds, row by row (`back_p`: the share face
    down; the page detector's training asks for more than a binder usually holds)."""
    draws = np.random.default_rng([seed, _SALT["page"], 2]).random(count)
    return [
        "empty" if u < POCKET_EMPTY_P else "back" if u < POCKET_EMPTY_P + back_p else "card" for u in draws
    ]


def make_page_photo(
    faces: list[tuple[str, np.ndarray]],
    seed: int,
    grid: tuple[int, int] = (3, 3),
    difficulty: Literal["standard", "hard"] = "standard",
    scale: float = 1.0,
    back_p: float = POCKET_BACK_P,
) -> PagePhoto:
    """A binder page of `grid` pockets on a table, 12 MP at scale 1: the faces go into the pockets in order
    (pockets drawn empty or holding a back skip none of them); the same arguments give the same pixels."""
    rng = np.random.default_rng([seed, _SALT["page"]])
    rows, cols = grid
    W, H = _photo_size(rng, scale)
    img = _table(rng, (W, H))
    # Faces no larger than the photo will show them: a page at scale 0.1 need not be composed at 12 MP.
    face_h = int(np.clip(1.2 * PAGE_HEIGHT[1] * min(W, H) / rows, 64, FACE_H))
    size = (round(face_h / CARD_ASPECT), face_h)
    fills: list[np.ndarray | None] = []
    kinds: list[tuple[PageKind, str | None]] = []
    used = 0
    for kind in pocket_kinds(seed, rows * cols, back_p):
        if kind == "empty":
            fills.append(None)
            kinds.append(("empty", None))
        elif kind == "back":
            back, _alpha = _card_back(rng)
            fills.append(cv2.resize(back, size, interpolation=cv2.INTER_AREA))
            kinds.append(("back", None))
        else:
            card_id, face = faces[used % len(faces)]
            used += 1
            fills.append(cv2.resize(face, size, interpolation=cv2.INTER_AREA).astype(np.float32))
            kinds.append(("card", card_id))
    hazy = rng.random() < POCKET_HAZY_P[difficulty]
    film = float(rng.uniform(*POCKET_FILM["hazy" if hazy else "clear"]))
    rgb, alpha, quads = _page_layer(rng, fills, rows, cols, film)
    ph, pw = alpha.shape
    src = np.array([[0, 0], [pw, 0], [pw, ph], [0, ph]], np.float32) - 0.5
    angle = math.radians(rng.uniform(-PAGE_TURN_DEG, PAGE_TURN_DEG))
    tilt = math.radians(rng.uniform(*PAGE_TILT_DEG[difficulty]))
    hom = _place(rng, pw, ph, src, (W, H), rng.uniform(*PAGE_HEIGHT), angle, tilt, inside=True)
    _paste(img, rgb, alpha, hom, shadow=rng.uniform(0.1, 0.4), shadow_shift=tuple(rng.normal(0, 6, 2)))
    image, data = _camera_out(seed, _SALT["page"], img, difficulty == "hard", scale)
    cards = [
        PageCard(
            corners=cv2.perspectiveTransform(q.reshape(-1, 1, 2), hom).reshape(4, 2).astype(np.float32),
            kind=kind,
            card_id=card_id,
            slot=(i // cols + 1, i % cols + 1),
        )
        for i, (q, (kind, card_id)) in enumerate(zip(quads, kinds, strict=True))
    ]
    return PagePhoto(image=image, layout="grid", cards=cards, grid=grid, jpeg=data)


# ---------------------------------------------------------------------------------------- spreads
def _overlap(quad: np.ndarray, placed: list[np.ndarray]) -> float:
    """The largest share of a placed card's area that `quad` would cover."""
    worst = 0.0
    for other in placed:
        inter, _ = cv2.intersectConvexConvex(quad, other)
        worst = max(worst, float(inter) / max(cv2.contourArea(other), 1.0))
    return worst


def make_spread_photo(
    faces: list[tuple[str, np.ndarray]],
    seed: int,
    count: int | None = None,
    difficulty: Literal["standard", "hard"] = "standard",
    scale: float = 1.0,
) -> PagePhoto:
    """`count` cards (default: drawn from SPREAD_CARDS) lying on a table at any angle, 12 MP at scale 1.
    A card that finds no place within SPREAD_OVERLAP after a few tries is left out, so `cards` may hold
    fewer; faces are used in order."""
    rng = np.random.default_rng([seed, _SALT["spread"]])
    n = int(rng.integers(SPREAD_CARDS[0], SPREAD_CARDS[1] + 1)) if count is None else count
    W, H = _photo_size(rng, scale)
    img = _table(rng, (W, H))
    card_h = math.sqrt(rng.uniform(*SPREAD_COVER) * W * H / n * CARD_ASPECT)
    k = rng.uniform(0, SPREAD_KEYSTONE[difficulty])  # the table seen from the near edge, at an angle
    table = np.array([[0, 0], [W, 0], [W, H], [0, H]], np.float32)
    seen = np.array([[k * W, 0], [(1 - k) * W, 0], [W, H], [0, H]], np.float32)
    keystone = cv2.getPerspectiveTransform(table, seen)
    placed: list[np.ndarray] = []
    cards: list[PageCard] = []
    for i in range(n):
        card_id, face = faces[i % len(faces)]
        sleeved = rng.random() < SPREAD_SLEEVE_P[difficulty]
        if sleeved:
            tint = HARD_SLEEVE_TINTS[str(rng.choice(list(HARD_SLEEVE_TINTS)))]
            rgb, alpha, off = _sleeve(rng, face.astype(np.float32), tint)
        else:
            rgb, alpha, off = _bare_card(rng, face.astype(np.float32))
        fh, fw = face.shape[:2]
        inner = np.array([[0, 0], [fw, 0], [fw, fh], [0, fh]], np.float32) + off - 0.5
        s = card_h * rng.uniform(0.95, 1.05) / fh
        for _try in range(30):
            a = rng.uniform(0, 2 * math.pi)
            rot = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]]) * s
            centre = rng.uniform(0.08, 0.92, 2) * [W, H]
            flat = ((inner - [fw / 2 + off, fh / 2 + off]) @ rot.T + centre).astype(np.float32)
            quad = cv2.perspectiveTransform(flat.reshape(-1, 1, 2), keystone).reshape(4, 2)
            inside = (quad >= 0.01 * min(W, H)).all() and (quad < [W, H]).all()
            if inside and _overlap(quad, placed) <= SPREAD_OVERLAP:
                break
        else:
            continue
        src = inner.astype(np.float32)
        hom = cv2.getPerspectiveTransform(src, quad.astype(np.float32))
        _paste(img, rgb, alpha, hom, shadow=rng.uniform(0.1, 0.4), shadow_shift=tuple(rng.normal(0, 4, 2)))
        placed.append(quad.astype(np.float32))
        cards.append(PageCard(corners=quad.astype(np.float32), kind="card", card_id=card_id))
    image, data = _camera_out(seed, _SALT["spread"], img, difficulty == "hard", scale)
    return PagePhoto(image=image, layout="free", cards=cards, jpeg=data)


# ---------------------------------------------------------------------------------------- preview
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Write preview page and spread photos with their corners drawn"
    )
    parser.add_argument("--faces", type=Path, required=True, help="a render folder: <card id>/high.jpg")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--count", type=int, default=4, help="photos of each layout")
    parser.add_argument("--difficulty", choices=("standard", "hard"), default="standard")
    parser.add_argument("--scale", type=float, default=0.5)
    parser.add_argument("--seed-base", type=int, default=0)
    args = parser.parse_args(argv)
    paths = sorted(args.faces.glob("*/high.jpg"))
    if not paths:
        parser.error(f"no */high.jpg under {args.faces}")
    args.out.mkdir(parents=True, exist_ok=True)
    for i in range(args.count):
        seed = args.seed_base + i
        chosen = [paths[(seed * 7919 + j * 104729) % len(paths)] for j in range(16)]
        faces = [(p.parent.name, read_face(p)) for p in chosen]
        grid = GRIDS[seed % len(GRIDS)]
        for name, photo in (
            ("page", make_page_photo(faces, seed, grid, args.difficulty, args.scale)),
            ("spread", make_spread_photo(faces, seed, None, args.difficulty, args.scale)),
        ):
            image = photo.image
            for card in photo.cards:
                image = draw_corners(image, card.corners)
            cv2.imwrite(str(args.out / f"{name}-{args.difficulty}-{seed}.jpg"), image[..., ::-1])
    print(f"wrote {2 * args.count} photos to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
