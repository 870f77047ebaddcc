"""Where the cards of one photo lie relative to each other (#48): a binder page's pocket grid, or a free
layout read like text.

`arrange` takes the card quads the page detector found (TL, TR, BR, BL, photo px) and says in which order a
reader meets them and, on a binder page, each card's pocket (row, column, counted from 1) and the pockets
in between that hold nothing the detector found (an empty pocket, `empty_slot`). A page is shot roughly
upright, so its pockets are rows and columns of the photo; a card more than `UPRIGHT_DEG` off vertical, a
card away from its row's or column's line, or two cards in one pocket make the layout `free`. Pure
geometry, no network: the ingress can run it, and the tests check it on quads alone.

What it cannot see: a row or column of empty pockets at the page's edge (no card marks where it is), so a
grid counts the rows and columns between its outermost cards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import cv2
import numpy as np

# A binder page is shot within a few degrees of upright (training.pages.PAGE_TURN_DEG is 6, tilt adds a
# little); a spread lies at any angle.
UPRIGHT_DEG = 12.0
# A card's centre lies within this share of the card's own size of its row's (column's) line.
ON_LINE = 0.3
# Cards whose centres are closer than this share of a card's height (width) sit on one row (column).
SAME_LINE = 0.5
# Neighbouring pockets' centres are a card's size apart and a little more (the pocket's slack and the seam:
# training.pages draws 1.06-1.11); anything outside MIN_PITCH-MAX_PITCH is not a page's neighbours.
POCKET_PITCH, MIN_PITCH, MAX_PITCH = 1.09, 0.9, 1.35
# At most this many empty rows (columns) in one gap between cards: more, and the cards lie on a table.
EMPTY_BETWEEN = 2


@dataclass(frozen=True)
class Arrangement:
    """`order`: indices of the quads in reading order. On a grid: `grid` (rows, cols), `slots[i]` the
    pocket of quad i, and `empty` the pockets no card was found in, each with the quad a card would have
    there (photo px)."""

    layout: Literal["grid", "free"]
    order: list[int]
    grid: tuple[int, int] | None = None
    slots: dict[int, tuple[int, int]] | None = None
    empty: list[tuple[tuple[int, int], np.ndarray]] | None = None


def arrange(quads: list[np.ndarray]) -> Arrangement:
    """The grid the quads fill, when they fill one; else the free layout in reading order."""
    grid = _grid(quads) if len(quads) >= 2 else None
    if grid is not None:
        return grid
    return Arrangement("free", reading_order(quads))


def reading_order(quads: list[np.ndarray]) -> list[int]:
    """Rows top to bottom, then left to right within a row: a card starts a new row when its centre lies
    lower than half the cards' median height below the row's first card."""
    if not quads:
        return []
    centres = np.array([q.mean(0) for q in quads])
    height = float(np.median([_size(q)[1] for q in quads]))
    rows: list[list[int]] = []
    for i in np.argsort(centres[:, 1], kind="stable"):
        if rows and centres[i, 1] - centres[rows[-1][0], 1] < SAME_LINE * height:
            rows[-1].append(int(i))
        else:
            rows.append([int(i)])
    return [i for row in rows for i in sorted(row, key=lambda k: float(centres[k, 0]))]


def _size(quad: np.ndarray) -> tuple[float, float]:
    """(width, height) of a card quad: the mean of its short sides and of its long sides."""
    a = 0.5 * (np.linalg.norm(quad[1] - quad[0]) + np.linalg.norm(quad[2] - quad[3]))
    b = 0.5 * (np.linalg.norm(quad[3] - quad[0]) + np.linalg.norm(quad[2] - quad[1]))
    return float(min(a, b)), float(max(a, b))


def _tilt_deg(quad: np.ndarray) -> float:
    """How far the card's long axis is from the photo's vertical, in degrees (0-90)."""
    left, right = quad[3] - quad[0], quad[2] - quad[1]
    top, bottom = quad[1] - quad[0], quad[2] - quad[3]
    long = left + right if np.linalg.norm(left) >= np.linalg.norm(top) else top + bottom
    return math.degrees(math.atan2(abs(float(long[0])), abs(float(long[1]))))


def _lines(values: np.ndarray, size: float) -> list[float] | None:
    """Positions of the rows (or columns) the values sit on, with the empty ones between filled ones
    (up to `EMPTY_BETWEEN` in one gap) inserted; None when the gaps are not a pocket lattice's: pockets
    hold cards side by side, so neighbouring lines are a card's size apart, a little more."""
    ordered = np.sort(values)
    groups: list[list[float]] = []
    for v in ordered:
        if groups and v - groups[-1][-1] < SAME_LINE * size:
            groups[-1].append(float(v))
        else:
            groups.append([float(v)])
    centres = [float(np.mean(g)) for g in groups]
    if len(centres) < 2:
        return centres
    gaps = np.diff(centres)
    pitch = float(np.min(gaps))
    if pitch < MIN_PITCH * size:  # closer than cards side by side: not pockets
        return None
    if pitch > MAX_PITCH * size:  # no neighbours: the pitch is a pocket's, as the card's size says
        pitch = POCKET_PITCH * size
    lines = [centres[0]]
    for gap, centre in zip(gaps, centres[1:], strict=True):
        steps = round(gap / pitch)
        if not 1 <= steps <= EMPTY_BETWEEN + 1 or abs(gap / pitch - steps) > 0.25:
            return None
        lines += [lines[-1] + gap * k / steps for k in range(1, steps)] + [centre]
    return lines


def _grid(quads: list[np.ndarray]) -> Arrangement | None:
    if any(_tilt_deg(q) > UPRIGHT_DEG for q in quads):
        return None
    centres = np.array([q.mean(0) for q in quads])
    sizes = np.array([_size(q) for q in quads])
    width, height = float(np.median(sizes[:, 0])), float(np.median(sizes[:, 1]))
    rows, cols = _lines(centres[:, 1], height), _lines(centres[:, 0], width)
    if rows is None or cols is None or len(rows) * len(cols) < len(quads):
        return None
    slots: dict[int, tuple[int, int]] = {}
    for i, (x, y) in enumerate(centres):
        r = int(np.argmin([abs(y - line) for line in rows]))
        c = int(np.argmin([abs(x - line) for line in cols]))
        if abs(y - rows[r]) > ON_LINE * height or abs(x - cols[c]) > ON_LINE * width:
            return None
        if (r + 1, c + 1) in slots.values():
            return None
        slots[i] = (r + 1, c + 1)
    taken = set(slots.values())
    empty = [
        ((r + 1, c + 1), _pocket_quad(quads, slots, r + 1, c + 1))
        for r in range(len(rows))
        for c in range(len(cols))
        if (r + 1, c + 1) not in taken
    ]
    order = sorted(slots, key=lambda i: slots[i])
    return Arrangement("grid", order, (len(rows), len(cols)), slots, empty)


def _pocket_quad(
    quads: list[np.ndarray], slots: dict[int, tuple[int, int]], row: int, col: int
) -> np.ndarray:
    """Where a card in pocket (row, col) would lie: its centre from the map of pockets to the cards'
    centres (a homography with four cards or more, which follows a page shot at a slant; else affine), its
    shape the mean of the found cards' (each corner's offset from its centre; they are shot upright)."""
    grid = np.array([[c, r] for r, c in (slots[i] for i in slots)], np.float64)
    centres = np.array([quads[i].mean(0) for i in slots], np.float64)
    where = np.array([[col, row]], np.float64)
    found: np.ndarray | None = None
    if len(grid) >= 4 and np.linalg.matrix_rank(grid - grid.mean(0)) == 2:
        hom, _ = cv2.findHomography(grid, centres)
        if hom is not None:
            found = cv2.perspectiveTransform(where.reshape(1, 1, 2), hom).reshape(2)
    if found is None:
        design = np.column_stack([grid, np.ones(len(grid))])
        coef, *_ = np.linalg.lstsq(design, centres, rcond=None)
        found = np.array([col, row, 1.0]) @ coef
    shape = np.mean([_upright(quads[i]) - quads[i].mean(0) for i in slots], axis=0)
    return (shape + found).astype(np.float32)


def _upright(quad: np.ndarray) -> np.ndarray:
    """The quad's corners from its top-left in the photo, clockwise: a card found upside down (the
    detector leaves the top open) has its corners the other way round."""
    start = int(np.argmin(quad.sum(1)))
    return np.roll(quad, -start, axis=0)
