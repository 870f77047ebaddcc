"""The scanner's cheap first look (#47): a card's outline found by classical geometry, with no network.

Most photos a scan client sends are easy: one card, large in the frame, flat on a plain surface. There
the card's outline is the strongest closed edge in the photo, and OpenCV finds it in a few milliseconds
of CPU where the detector's network and its sub-pixel fitting take ~25 ms (docs/scanner-performance.md).
The look is deliberately narrow: it answers only when a convex quadrilateral of a card's proportions
stands out, large in the frame, its four sides straight edges along most of their length; anything else
(busy backgrounds, sleeves, glare across an edge, a card touching another, a small card) returns None
and the photo goes to the detector. Whether the corners were good enough is then the picture's call:
the scanner keeps an answer from this look only when it is `certain` (`serve_app.pipeline`), and
otherwise locates the photo again with the detector, so a wrong outline costs time, never an answer.

Steps: edges (Canny) of the photo shrunk to `LOOK_SIDE`, the outer contours' convex hulls simplified to
four points, the largest plausible one kept, then each side refitted in the working image as a line
through the strongest step in brightness across it (sub-pixel), the corners where those lines meet.
The corners come back in the detector's convention (TL, TR, BR, BL, clockwise, a short side first); a
card upside down is the embedder's business, which searches both ways up.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np


@dataclass(frozen=True)
class LookLimits:
    """What a first-look outline must be. Chosen on training.synth's validation photos
    (`benchmarks/first_look.py`): loose enough for most standard photos, tight enough that a wrong
    outline is rare; a wrong one only sends the photo on to the detector."""

    look_side: int = 480  # the long side the edges are found at (px)
    min_area: float = 0.06  # of the photo's area
    max_area: float = 0.92  # a quad this large is the photo's own frame or a table edge
    aspect: tuple[float, float] = (1.18, 1.68)  # long / short sides (a card is 1.397; tilt changes it)
    max_corner_bend: float = 32.0  # degrees an interior angle may stray from 90
    min_support: float = 0.8  # of each side's samples on a clear step in brightness
    min_step: float = 10.0  # grey levels per pixel that count as a clear step
    samples: int = 28  # points a side is refitted through


LIMITS = LookLimits()


def first_look(image: np.ndarray, limits: LookLimits = LIMITS) -> np.ndarray | None:
    """The card's corners (4x2 float32, TL, TR, BR, BL in `image`'s pixels) or None. `image`: HxWx3
    uint8 RGB at the scanner's working size (`serve_app.decoding.decode_photo`)."""
    h, w = image.shape[:2]
    scale = limits.look_side / max(h, w)
    small = cv2.resize(
        image, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA
    )
    coarse = _outline(small, limits)
    if coarse is None:
        return None
    grey = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    quad = _refit(grey, _to_working(coarse, scale), limits)
    if quad is None or not _plausible(quad, w * h, limits):
        return None
    return _card_order(quad)


def _to_working(quad: np.ndarray, scale: float) -> np.ndarray:
    """Pixel-centre coordinates in the shrunk view -> the working image's."""
    return ((quad + 0.5) / scale - 0.5).astype(np.float32)


def _outline(small: np.ndarray, limits: LookLimits) -> np.ndarray | None:
    """The card's coarse corners in the shrunk photo (RGB): the largest plausible quad among its edge
    contours, or the plausible quad inside it when the larger one is a sleeve (`_is_sleeve`)."""
    grey = cv2.cvtColor(small, cv2.COLOR_RGB2GRAY)
    area = grey.shape[0] * grey.shape[1]
    edges = np.zeros_like(grey)
    channels = cv2.split(cv2.GaussianBlur(small, (5, 5), 0)) if COLOUR_EDGES else [cv2.GaussianBlur(grey, (5, 5), 0)]
    # Edges of each colour channel: a yellow border on a green cloth can be one grey level.
    for channel in channels:
        high, _ = cv2.threshold(channel, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)
        edges |= cv2.Canny(channel, max(10.0, 0.25 * high), max(30.0, 0.5 * high))
    edges = cv2.dilate(edges, np.ones((3, 3), np.uint8))
    contours, _ = cv2.findContours(edges, cv2.RETR_LIST, cv2.CHAIN_APPROX_NONE)
    found: list[tuple[float, np.ndarray]] = []
    for contour in contours:
        hull = cv2.convexHull(contour)
        hull_area = cv2.contourArea(hull)
        if hull_area < limits.min_area * area:
            continue
        quad = cv2.approxPolyDP(hull, 0.03 * cv2.arcLength(hull, True), True).reshape(-1, 2)
        # The hull must be the quad (a card's rounded corners cut a little), not a blob that happens to
        # simplify to four points.
        if len(quad) != 4 or cv2.contourArea(quad.astype(np.float32)) < 0.9 * hull_area:
            continue
        sides = _side_lines(contour.reshape(-1, 2).astype(np.float32), quad.astype(np.float32))
        if sides is not None and _plausible(sides, area, limits):
            found.append((abs(_signed_area(sides.astype(np.float64))), sides))
    if not found:
        return None
    found.sort(key=lambda item: -item[0])
    best_area, best = found[0]
    for inner_area, inner in found[1:]:
        if not SLEEVE_RATIO[0] <= inner_area / best_area <= SLEEVE_RATIO[1]:
            continue
        if _inside(inner, best) and _is_sleeve(small, best, inner):
            return inner
    return best


# A card in a sleeve fills this share of the sleeve's outline (training.synth draws 1.5-5% margins; a
# penny sleeve's is ~2.5%); a card's own inner frame fills ~85% of the card, which the colour test tells
# apart.
SLEEVE_RATIO = (0.75, 0.97)
COLOUR_EDGES = False


def _inside(inner: np.ndarray, outer: np.ndarray) -> bool:
    contour = outer.reshape(-1, 1, 2).astype(np.float32)
    return all(cv2.pointPolygonTest(contour, (float(x), float(y)), False) >= 0 for x, y in inner)


def _is_sleeve(small: np.ndarray, outer: np.ndarray, inner: np.ndarray) -> bool:
    """Whether the ring between two nested outlines is clear film over the background (a sleeve round the
    card) rather than the card's own border: its colour is the colour just outside the outer outline."""
    h, w = small.shape[:2]
    outer_mask, inner_mask, around = (np.zeros((h, w), np.uint8) for _ in range(3))
    cv2.fillPoly(outer_mask, [np.round(outer).astype(np.int32)], 1)
    cv2.fillPoly(inner_mask, [np.round(inner).astype(np.int32)], 1)
    band = max(3, round(0.02 * max(h, w)))
    ring = (outer_mask > 0) & (cv2.dilate(inner_mask, np.ones((3, 3), np.uint8)) == 0)
    around = (cv2.dilate(outer_mask, np.ones((2 * band + 1, 2 * band + 1), np.uint8)) > 0) & (outer_mask == 0)
    if ring.sum() < 20 or around.sum() < 20:
        return False
    difference = np.median(small[ring].astype(np.float32), axis=0) - np.median(small[around].astype(np.float32), axis=0)
    return float(np.linalg.norm(difference)) < SLEEVE_COLOUR_DISTANCE


SLEEVE_COLOUR_DISTANCE = 40.0  # RGB levels between the ring's median colour and the background's


def _side_lines(points: np.ndarray, quad: np.ndarray) -> np.ndarray | None:
    """The quad with each side refitted as a line through the contour points near its middle 70%: the
    simplified polygon cuts a card's rounded corners, the lines do not."""
    lines = []
    for i in range(4):
        p0, p1 = quad[i], quad[(i + 1) % 4]
        length = float(np.linalg.norm(p1 - p0))
        if length < 1:
            return None
        direction = (p1 - p0) / length
        rel = points - p0
        along = rel @ direction
        across = np.abs(rel @ np.array([-direction[1], direction[0]]))
        near = points[(along > 0.15 * length) & (along < 0.85 * length) & (across < max(2.0, 0.012 * length))]
        if len(near) < 2:
            lines.append((p0.astype(np.float64), direction.astype(np.float64)))
            continue
        vx, vy, x0, y0 = cv2.fitLine(near, cv2.DIST_HUBER, 0, 0.01, 0.01).ravel()
        lines.append((np.array([x0, y0]), np.array([vx, vy])))
    return _corners(lines)


def _corners(lines: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray | None:
    """Where each side's line (point, direction) meets the one before it: corner i between sides i-1 and i."""
    corners = []
    for i in range(4):
        (a, da), (b, db) = lines[i - 1], lines[i]
        m = np.array([da, -db]).T
        if abs(np.linalg.det(m)) < 1e-6:
            return None
        corners.append(a + np.linalg.solve(m, b - a)[0] * da)
    return np.array(corners, np.float32)


def _plausible(quad: np.ndarray, image_area: float, limits: LookLimits) -> bool:
    """Convex, of a card's proportions, large enough, corners near square."""
    q = quad.reshape(4, 2).astype(np.float64)
    area = abs(_signed_area(q))
    if not limits.min_area * image_area <= area <= limits.max_area * image_area:
        return False
    sides = np.linalg.norm(np.roll(q, -1, axis=0) - q, axis=1)
    a, b = (sides[0] + sides[2]) / 2, (sides[1] + sides[3]) / 2
    if min(a, b) <= 0 or not limits.aspect[0] <= max(a, b) / min(a, b) <= limits.aspect[1]:
        return False
    for i in range(4):
        u, v = q[i - 1] - q[i], q[(i + 1) % 4] - q[i]
        cos = float(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))
        if abs(np.degrees(np.arccos(np.clip(cos, -1, 1))) - 90) > limits.max_corner_bend:
            return False
    crosses = [np.cross(q[(i + 1) % 4] - q[i], q[(i + 2) % 4] - q[(i + 1) % 4]) for i in range(4)]
    return all(c > 0 for c in crosses) or all(c < 0 for c in crosses)


def _signed_area(q: np.ndarray) -> float:
    x, y = q[:, 0], q[:, 1]
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))


def _refit(grey: np.ndarray, quad: np.ndarray, limits: LookLimits) -> np.ndarray | None:
    """Each side of the coarse quad refitted in the working image: along its middle 80%, the strongest
    step in brightness across the side within a band a few coarse pixels wide, to a tenth of a pixel;
    a line through those points (Huber), the corners where neighbouring lines meet. None when a side
    has too few clear steps to be an edge."""
    q = quad.reshape(4, 2).astype(np.float64)
    band = max(3.0, 3.0 * max(grey.shape) / limits.look_side)  # three coarse pixels either side
    offsets = np.arange(-band, band + 0.5, 0.5)
    t = np.linspace(0.1, 0.9, limits.samples)
    lines = []
    for i in range(4):
        p0, p1 = q[i], q[(i + 1) % 4]
        direction = (p1 - p0) / max(np.linalg.norm(p1 - p0), 1e-6)
        normal = np.array([-direction[1], direction[0]])
        points = p0 + t[:, None] * (p1 - p0)  # (S, 2)
        grid = points[:, None, :] + offsets[None, :, None] * normal  # (S, K, 2)
        profile = cv2.remap(
            grey.astype(np.float32),
            grid[..., 0].astype(np.float32),
            grid[..., 1].astype(np.float32),
            cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_REPLICATE,
        )
        step = np.abs(np.diff(profile, axis=1)) / 0.5  # grey levels per pixel between neighbours
        k = np.argmax(step, axis=1)
        strong = step[np.arange(len(k)), k] >= limits.min_step
        if strong.mean() < limits.min_support:
            return None
        # Parabola through the peak and its neighbours: the step's centre to a fraction of a sample.
        k = np.clip(k, 1, step.shape[1] - 2)
        left, mid, right = (step[np.arange(len(k)), k + d] for d in (-1, 0, 1))
        denom = left - 2 * mid + right
        frac = np.where(np.abs(denom) > 1e-6, 0.5 * (left - right) / np.where(denom == 0, 1, denom), 0.0)
        where = offsets[k] + 0.25 + 0.5 * np.clip(frac, -0.5, 0.5)
        edge = (points + where[:, None] * normal)[strong]
        vx, vy, x0, y0 = cv2.fitLine(edge.astype(np.float32), cv2.DIST_HUBER, 0, 0.01, 0.01).ravel()
        lines.append((np.array([x0, y0]), np.array([vx, vy])))
    return _corners(lines)


def _card_order(quad: np.ndarray) -> np.ndarray:
    """TL, TR, BR, BL clockwise on screen (y down), a short side first: upright or upside down, which
    the embedder's two-way search settles."""
    q = quad.reshape(4, 2)
    if _signed_area(q.astype(np.float64)) < 0:
        q = q[::-1]
    sides = np.linalg.norm(np.roll(q, -1, axis=0) - q, axis=1)
    if sides[0] + sides[2] > sides[1] + sides[3]:  # the first side is a long one: start one corner on
        q = np.roll(q, -1, axis=0)
    # Of the two short-side-first orders, the one whose top is higher in the photo (a card lying the
    # usual way round needs no turn).
    if q[0, 1] + q[1, 1] > q[2, 1] + q[3, 1]:
        q = np.roll(q, 2, axis=0)
    return np.ascontiguousarray(q, dtype=np.float32)
