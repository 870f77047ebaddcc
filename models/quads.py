"""The detector's geometry: the views it looks through, and the quads it fits to what it sees.

No network here, only NumPy and OpenCV: letterboxed and zoomed views of a photo (with the matrices that
map them back), sub-pixel card sides fitted to the mask, and the orientation read off the name/number
bands. `models.detector` runs the network between these steps; `training.detector` builds its targets
with the same views, so training and serving see a card the same way.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import cv2
import numpy as np

from models.geometry import CARD_ASPECT, card_height

PAD_VALUE = 114
BAND_DEPTH = 0.1  # top/bottom bands: this fraction of the card height


# -------------------------------------------------------------------------------------------- views
def _pixel_scale(sx: float, sy: float) -> np.ndarray:
    """Resize matrix in the pixel-centre convention: x' = (x + 0.5) * s - 0.5."""
    return np.array([[sx, 0, 0.5 * sx - 0.5], [0, sy, 0.5 * sy - 0.5], [0, 0, 1]], np.float64)


class Pyramid:
    """A photo and its halvings (level i is 2^-i of it), each made once, when first asked for.

    The detector draws three or four zoomed views from one photo (one per candidate and refinement
    pass). When the card is much larger than a view needs, each view used to area-average its crop of
    the full working image at a fractional factor; now it starts from the level just above the size it
    needs, so the photo's megapixels are averaged down once, in OpenCV's 2x2 path (cProfile of 24 2 MP
    photos on one thread, twice each: `cv2.resize` 19-22 -> 12-15 ms a photo).
    """

    def __init__(self, image: np.ndarray) -> None:
        self.levels = [image]

    @property
    def image(self) -> np.ndarray:
        return self.levels[0]

    def level(self, scale: float) -> tuple[np.ndarray, float]:
        """The smallest level at least `scale` times the photo's size, and its scale (a power of 1/2)."""
        i = 0
        while 2.0 ** -(i + 1) >= scale and min(self.levels[i].shape[:2]) >= 2:
            if i + 1 == len(self.levels):
                top = self.levels[i]
                h, w = top.shape[0] // 2, top.shape[1] // 2
                # An odd last row or column is left out: pixel-centre x' = (x + 0.5) / 2 - 0.5 holds.
                self.levels.append(cv2.resize(top[: 2 * h, : 2 * w], (w, h), interpolation=cv2.INTER_AREA))
            i += 1
        return self.levels[i], 2.0**-i


def _as_pyramid(photo: np.ndarray | Pyramid) -> Pyramid:
    return photo if isinstance(photo, Pyramid) else Pyramid(photo)


def letterbox(photo: np.ndarray | Pyramid, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The whole photo shrunk into a size x size view; returns it and the 3x3 photo->view matrix.

    Always from the full photo, not a pyramid level: this coarse view decides which blobs are candidates,
    and drawing it from a level flipped borderline hard photos (`benchmarks/scan_accuracy.py` lost one,
    docs/scanner-performance.md); the zoomed views, which only sharpen a candidate, take levels without
    that effect."""
    image = photo.image if isinstance(photo, Pyramid) else photo
    h, w = image.shape[:2]
    (nw, nh), (ox, oy), m = letterbox_plan(h, w, size)
    small = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_AREA)
    view = np.full((size, size, 3), PAD_VALUE, np.uint8)
    view[oy : oy + nh, ox : ox + nw] = small
    return view, m


def letterbox_plan(h: int, w: int, size: int) -> tuple[tuple[int, int], tuple[int, int], np.ndarray]:
    """Where an h x w photo goes in its size x size letterbox: the shrunk (width, height), its (x, y)
    offset, and the photo->view matrix. Shared by `letterbox` and its torch twin
    (`models.tensor_ops.letterbox_tensor`), so both map a view back to the photo the same way."""
    s = size / max(h, w)
    nw, nh = max(1, round(w * s)), max(1, round(h * s))
    ox, oy = (size - nw) // 2, (size - nh) // 2
    m = _pixel_scale(nw / w, nh / h)
    m[0, 2] += ox
    m[1, 2] += oy
    return (nw, nh), (ox, oy), m


def zoom_target(size: int, fill: float) -> np.ndarray:
    """Where the zoomed pass puts the card: a centred upright rectangle (edge convention corners)."""
    h = fill * size
    w = h / CARD_ASPECT
    x0, y0 = (size - w) / 2 - 0.5, (size - h) / 2 - 0.5
    return np.array([[x0, y0], [x0 + w, y0], [x0 + w, y0 + h], [x0, y0 + h]], np.float32)


@dataclass(frozen=True)
class ZoomPlan:
    """How one zoomed view is cut from a pyramid level: crop `box` (x0, y0, x1, y1) of the level, shrink
    the crop to `resize` (width, height) when set, then warp it with `warp` (crop px -> view px).
    `to_view` maps photo px to view px, for the quad fitted in the view."""

    box: tuple[int, int, int, int]
    resize: tuple[int, int] | None
    warp: np.ndarray
    to_view: np.ndarray


def zoom_view(
    photo: np.ndarray | Pyramid, quad: np.ndarray, size: int, fill: float
) -> tuple[np.ndarray, np.ndarray]:
    """A size x size view in which `quad` becomes the upright card rectangle; returns it and photo->view.

    Only the photo region the view covers is cropped, from the pyramid level that still shows the card at
    least 1.5x the view's size, and pre-shrunk with INTER_AREA when it is still much larger, so the warp
    does not alias.
    """
    pyramid = _as_pyramid(photo)
    shrink = zoom_shrink(quad, size, fill)
    # A card much larger than the view is pre-shrunk to 1.5x the view's card, as from the full photo
    # before the pyramid existed, only from the level just above that size (less to average); for
    # shrink > 0.5 that level is the photo itself.
    image, scale = pyramid.level(shrink)
    plan = zoom_plan(image.shape[0], image.shape[1], scale, quad, size, fill, shrink)
    x0, y0, x1, y1 = plan.box
    crop = image[y0:y1, x0:x1]
    if plan.resize is not None:
        crop = cv2.resize(crop, plan.resize, interpolation=cv2.INTER_AREA)
    view = cv2.warpPerspective(
        crop,
        plan.warp,
        (size, size),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=(PAD_VALUE,) * 3,
    )
    return view, plan.to_view


def zoom_shrink(quad: np.ndarray, size: int, fill: float) -> float:
    """How much a zoomed view shrinks the photo around `quad` (at most 1): its card drawn 1.5x the view's."""
    return min(1.0, 1.5 * fill * size / max(card_height(quad), 1.0))


def zoom_plan(
    h: int, w: int, scale: float, quad: np.ndarray, size: int, fill: float, shrink: float
) -> ZoomPlan:
    """The crop, pre-shrink and warp that draw `zoom_view`'s view from an h x w pyramid level at `scale`;
    shared with its torch twin (`models.tensor_ops.zoom_view_tensor`)."""
    level = _pixel_scale(scale, scale)
    quad = apply(level, quad)
    hom = cv2.getPerspectiveTransform(quad.astype(np.float32), zoom_target(size, fill)).astype(np.float64)
    edges = np.array(
        [[-0.5, -0.5], [size - 0.5, -0.5], [size - 0.5, size - 0.5], [-0.5, size - 0.5]], np.float32
    )
    try:
        foot = cv2.perspectiveTransform(edges.reshape(-1, 1, 2), np.linalg.inv(hom)).reshape(-1, 2)
    except np.linalg.LinAlgError:
        foot = np.array([[0, 0], [w, h]], np.float32)
    if not np.isfinite(foot).all():
        foot = np.array([[0, 0], [w, h]], np.float32)
    x0, y0 = np.clip(np.floor(foot.min(0)) - 2, 0, [w - 1, h - 1]).astype(int)
    x1, y1 = np.clip(np.ceil(foot.max(0)) + 3, [x0 + 1, y0 + 1], [w, h]).astype(int)
    shift = np.array([[1, 0, -x0], [0, 1, -y0], [0, 0, 1]], np.float64)
    resize = None
    if shrink < 0.75 and shrink < scale:
        nw, nh = max(1, round((x1 - x0) * shrink / scale)), max(1, round((y1 - y0) * shrink / scale))
        resize = (nw, nh)
        shift = _pixel_scale(nw / (x1 - x0), nh / (y1 - y0)) @ shift
    m = hom @ np.linalg.inv(shift)
    return ZoomPlan((int(x0), int(y0), int(x1), int(y1)), resize, m, m @ shift @ level)


def apply(m: np.ndarray, pts: np.ndarray) -> np.ndarray:
    return (
        cv2.perspectiveTransform(pts.reshape(-1, 1, 2).astype(np.float64), m)
        .reshape(-1, 2)
        .astype(np.float32)
    )


# ------------------------------------------------------------------------------------- quad fitting
def rect_quad(rect: cv2.typing.RotatedRect) -> np.ndarray:
    """An OpenCV rotated rectangle ((cx, cy), (w, h), angle) as a quad with positive shoelace, as the
    fitted ones."""
    box = cv2.boxPoints(rect).astype(np.float32)
    return box if _shoelace(box) > 0 else box[::-1].copy()


def _shoelace(q: np.ndarray) -> float:
    x, y = q[:, 0], q[:, 1]
    # Each coordinate with its next point's: np.roll(., -1), spelt out (np.roll costs ~10x; same values).
    x_next, y_next = np.concatenate((x[1:], x[:1])), np.concatenate((y[1:], y[:1]))
    return float(0.5 * (np.dot(x, y_next) - np.dot(x_next, y)))


def _intersect(l1: np.ndarray, l2: np.ndarray) -> np.ndarray | None:
    """Lines as (vx, vy, x0, y0)."""
    d1, p1, d2, p2 = l1[:2], l1[2:], l2[:2], l2[2:]
    den = d1[0] * d2[1] - d1[1] * d2[0]
    if abs(den) < 1e-6:
        return None
    t = ((p2[0] - p1[0]) * d2[1] - (p2[1] - p1[1]) * d2[0]) / den
    return p1 + t * d1


@functools.cache
def _along(samples: int) -> np.ndarray:
    """Where on a side its normals are sampled: fractions of its length, as a (samples, 1) column."""
    t = np.linspace(0.12, 0.88, samples)[:, None]
    t.flags.writeable = False
    return t


def _refine_sides(prob: np.ndarray, quad: np.ndarray, samples: int = 32) -> np.ndarray | None:
    """Move each side onto the mask's 0.5 crossing, measured sub-pixel along normals, then intersect."""
    lines = []
    centre = quad.mean(0)
    t = _along(samples)
    for i in range(4):
        a, b = quad[i], quad[(i + 1) % 4]
        length = float(np.linalg.norm(b - a))
        if length < 4:
            return None
        d = (b - a) / length
        n = np.array([d[1], -d[0]])
        if np.dot(n, (a + b) / 2 - centre) < 0:
            n = -n
        reach = max(3.0, 0.06 * length)
        offs = np.arange(-reach, reach + 1e-6, 0.25, dtype=np.float32)
        pts = (a + (b - a) * t)[:, None, :] + offs[None, :, None] * n  # (samples, K, 2)
        prof = cv2.remap(
            prob,
            pts[..., 0].astype(np.float32),
            pts[..., 1].astype(np.float32),
            cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=0.0,
        )
        # Per sample row: the last inside sample before the first outside one, rows that start inside
        # and leave it; the crossing is interpolated between those two samples (vectorised over rows).
        inside = prof >= 0.5
        j = np.argmin(inside, axis=1)  # first outside sample (0 when the row never leaves the card)
        rows = np.flatnonzero(inside[:, 0] & (j > 0) & ~inside[np.arange(samples), j])
        j = j[rows]
        before, after = prof[rows, j - 1], prof[rows, j]
        frac = (before - 0.5) / np.maximum(before - after, np.float32(1e-6))
        good = pts[rows, j - 1] + (frac * 0.25)[:, None] * n
        if len(good) < samples // 3:
            line = np.array([d[0], d[1], a[0], a[1]], np.float64)
        else:
            line = (
                cv2.fitLine(good.astype(np.float32), cv2.DIST_HUBER, 0, 0.01, 0.01).ravel().astype(np.float64)
            )
        lines.append(line)
    corners = []
    for i in range(4):
        p = _intersect(lines[i - 1], lines[i])
        if p is None:
            return None
        corners.append(p)
    out = np.array(corners, np.float32)
    if np.abs(out - quad).max() > 0.25 * math.sqrt(abs(_shoelace(quad))):
        return None
    return out


def blob_areas(binary: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """4-connected blobs of a 0/1 map: the label image and each label's pixel count (label 0 is the
    background). The areas are counted here: OpenCV's full statistics (boxes, centroids) cost ~3x the
    labelling on a 224-px map. int32, as OpenCV's areas are, so sorting them orders blobs the same way."""
    count, labels = cv2.connectedComponents(binary, connectivity=4)
    return labels, np.bincount(labels.ravel(), minlength=count).astype(np.int32)


# `fit_quads(enclose=True)`: the blob's hull is simplified to within this share of its perimeter before its
# sides are extended to four (chosen on validation spreads: 0.02 lost more covered corners).
ENCLOSE_EPS = 0.01


def fit_quads(
    prob: np.ndarray,
    min_area: float,
    min_fit: float,
    threshold: float = 0.5,
    close: int = 0,
    limit: int = 1,
    fallback: bool = False,
    enclose: bool = False,
) -> list[np.ndarray]:
    """Sub-pixel corners (positive shoelace, view px) of up to `limit` card-like blobs, largest first.

    `close` (px) bridges the gaps an unsure mask leaves inside a blob (glare, dark art), one blob at a
    time so that a card and a sheet of paper beside it never merge; the blob's outline, not its pixel
    count, is compared with the quad, so holes inside the card do not count against it. With `fallback`, a
    blob no quad fits (a ragged or merged mask) gives its minimum-area rectangle, for the zoomed pass to
    judge and correct. With `enclose`, the quad is the outline's sides extended to four
    (`enclosing_quad`), not four of its corners: a card another card covers a corner of keeps that
    corner where its two sides meet.
    """
    labels, areas = blob_areas((prob > threshold).astype(np.uint8))
    out = []
    for label in 1 + np.argsort(-areas[1:])[:limit]:
        if areas[label] < min_area * prob.size:
            break
        blob = (labels == label).astype(np.uint8)
        if close > 1:
            kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (close, close))
            blob = cv2.morphologyEx(blob, cv2.MORPH_CLOSE, kernel)
        quad = _blob_quad(prob, blob, min_fit, enclose)
        if quad is None and fallback:
            quad = rect_quad(cv2.minAreaRect(cv2.findNonZero(blob)))
        if quad is not None:
            out.append(quad)
    return out


def corner_shift(before: np.ndarray, after: np.ndarray) -> float:
    """How far the corners moved between two passes, as a fraction of the card's long side."""
    height = max(float(np.linalg.norm(after[0] - after[3])), float(np.linalg.norm(after[0] - after[1])), 1.0)
    return float(np.linalg.norm(after - before, axis=1).max()) / height


def same_quad(a: np.ndarray, b: np.ndarray, tolerance: float) -> bool:
    """Whether every corner of `a` lies within `tolerance` x the quad's size of a corner of `b`."""
    if tolerance <= 0:
        return False
    size = math.sqrt(max(abs(_shoelace(b)), 1e-6))
    gaps = np.linalg.norm(a[:, None, :] - b[None, :, :], axis=2).min(axis=1)
    return bool(gaps.max() <= tolerance * size)


def _blob_quad(
    prob: np.ndarray, blob: np.ndarray, min_fit: float, enclose: bool = False
) -> np.ndarray | None:
    contours, _ = cv2.findContours(blob, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    outline = max(contours, key=cv2.contourArea)
    area = float(cv2.contourArea(outline))
    hull = cv2.convexHull(outline)
    perimeter = cv2.arcLength(hull, True)
    approx = None
    if enclose:
        approx = enclosing_quad(cv2.approxPolyDP(hull, ENCLOSE_EPS * perimeter, True).reshape(-1, 2))
    for eps in (0.02, 0.03, 0.045, 0.06, 0.08, 0.1) if approx is None else ():
        cand = cv2.approxPolyDP(hull, eps * perimeter, True)
        if len(cand) == 4:
            approx = cand.reshape(4, 2).astype(np.float32)
            break
        if len(cand) < 4:
            break
    if approx is None:
        return None
    if _shoelace(approx) < 0:
        approx = approx[::-1].copy()
    quad_area = abs(_shoelace(approx))
    if min(area, quad_area) / max(area, quad_area, 1e-6) < min_fit:
        return None
    refined = _refine_sides(prob, approx)
    if refined is None or _shoelace(refined) <= 0 or not cv2.isContourConvex(refined.reshape(-1, 1, 2)):
        return approx
    return refined


def enclosing_quad(polygon: np.ndarray) -> np.ndarray | None:
    """A convex polygon's sides extended to four (None when they cannot be): again and again, the side
    whose two neighbours, extended until they meet, add the least area gives way to their meeting point.
    A card whose corner another card covers has a fifth side where the cover cuts it; its two own sides
    there meet where the hidden corner lies, which choosing four of the polygon's corners cannot give."""
    poly = [point.astype(np.float64) for point in polygon]
    while len(poly) > 4:
        n = len(poly)
        best: tuple[float, int, np.ndarray] | None = None
        for i in range(n):
            before, start, end, after = poly[i - 1], poly[i], poly[(i + 1) % n], poly[(i + 2) % n]
            ahead, back = start - before, end - after  # the neighbours' directions, towards side i
            denom = ahead[0] * back[1] - ahead[1] * back[0]
            if abs(denom) < 1e-9:
                continue
            t = ((after - before)[0] * back[1] - (after - before)[1] * back[0]) / denom
            meet = before + t * ahead
            if t <= 1 or float(np.dot(meet - end, back)) <= 0:  # they meet behind side i: no corner there
                continue
            u, v = meet - start, end - start
            added = 0.5 * abs(float(u[0] * v[1] - u[1] * v[0]))
            if best is None or added < best[0]:
                best = (added, i, meet)
        if best is None:
            return None
        _, i, meet = best
        poly[i] = meet
        del poly[(i + 1) % n]
    return np.array(poly, np.float32) if len(poly) == 4 else None


def band_scores(maps: np.ndarray, quad: np.ndarray) -> np.ndarray:
    """Mean top/bottom band probability next to each side k (corners k -> k+1): shape (2, 4)."""
    h, w = maps.shape[1:]
    scores = np.zeros((2, 4), np.float32)
    for k in range(4):
        a, b, c, d = quad[k], quad[(k + 1) % 4], quad[(k + 2) % 4], quad[(k + 3) % 4]
        band = np.array([a, b, b + BAND_DEPTH * (c - b), a + BAND_DEPTH * (d - a)], np.float32)
        # The band's pixels, found in its bounding box only: the same pixels in the same order as a
        # whole-view mask, at a tenth of the cost.
        fixed = np.round(band * 4).astype(np.int32)
        (lx, ly), (hx, hy) = fixed.min(axis=0) // 4, fixed.max(axis=0) // 4
        x0, y0 = min(max(int(lx) - 1, 0), w), min(max(int(ly) - 1, 0), h)
        x1, y1 = min(max(int(hx) + 2, 0), w), min(max(int(hy) + 2, 0), h)
        if x1 <= x0 or y1 <= y0:
            continue
        mask = np.zeros((y1 - y0, x1 - x0), np.uint8)
        cv2.fillPoly(mask, [fixed], 1, cv2.LINE_8, shift=2, offset=(-4 * x0, -4 * y0))
        pixels = np.flatnonzero(mask)
        if len(pixels):
            # The band's values in row-major order, added one after another: how NumPy reduces a
            # fancy-indexed (2, N) selection, so the same bits as `maps[:, mask > 0].mean(1)` at a third of
            # its cost (tests/models/test_quads.py compares the two on hundreds of random bands).
            values = np.take(maps[:, y0:y1, x0:x1].reshape(len(maps), -1), pixels, axis=1)
            scores[:, k] = np.cumsum(values, axis=1, dtype=maps.dtype)[:, -1] / len(pixels)
    return scores


def orient(
    quad: np.ndarray, bands: np.ndarray, photo_quad: np.ndarray | None = None, geo: float = 0.0
) -> np.ndarray:
    """Roll the corners so side 0 is the top (name) and side 2 the bottom (number): TL, TR, BR, BL.

    Which pair of sides is short comes from the band maps plus `geo` times the log ratio of side lengths
    in the photo (a tilted card is still longer than wide unless the tilt is steep); which end is up
    comes from the bands alone (the caller tries both anyway).
    """
    return np.roll(quad, -orient_roll(quad, band_scores(bands, quad), photo_quad, geo), axis=0)


def orient_roll(
    quad: np.ndarray, scores: np.ndarray, photo_quad: np.ndarray | None = None, geo: float = 0.0
) -> int:
    """`orient`'s decision from the quad's `band_scores`: the roll r that makes side r the top. The
    oriented quad's band scores are these with their columns rolled by r (the same bands, renumbered), so a
    caller that scores the oriented quad too needs no second `band_scores`."""
    s = scores
    votes = [s[0, r] + s[1, (r + 2) % 4] + 0.5 * (s[0, (r + 2) % 4] + s[1, r]) for r in range(4)]
    evidence = (votes[0] + votes[2]) - (votes[1] + votes[3])
    if geo and photo_quad is not None:
        sides = np.linalg.norm(photo_quad - np.roll(photo_quad, -1, axis=0), axis=1)
        evidence += geo * math.log(max(sides[1] + sides[3], 1e-6) / max(sides[0] + sides[2], 1e-6))
    r = 0 if evidence >= 0 else 1
    return r if votes[r] >= votes[r + 2] else r + 2
