"""The page detector (#48): every card in one photo (a binder page, cards on a table), not one card.

The single-card detector's network and passes (`models.detector.CardDetector`), with its own weights
(`models/weights/page_detector.pt`, trained by `training/detector/cpu-pages.yaml` and
`cpu-pages-more.yaml` to mask every card of a photo, and a card back without the name and number bands
of a face) and its own first look: the whole
photo at `page_input` px, then a zoomed look at every card-like blob and, round by round, at the pockets
beside each card found. `serve_app.stages.locate_page` runs it for `POST /v1/scan/page`.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from models.detector import WEIGHTS, AnyPyramid, CardDetector, Find, Pixels, _letterbox, _pyramid, _size
from models.geometry import CARD_ASPECT
from models.quads import apply, blob_areas, fit_quads, orient, rect_quad

PAGE_WEIGHTS = WEIGHTS.with_name("page_detector.pt")
# Every card of a photo (`locate_all`): a blob smaller than this share of the page view is not a card (a
# card of a 3x4 binder page filling the frame is ~2% of it); two finds covering more than PAGE_OVERLAP of
# the smaller one are the same card.
PAGE_MIN_AREA = 0.0015
PAGE_OVERLAP = 0.5
# The page view's card map is eroded by this many px (a disc) before its blobs are fitted, at each of these
# thresholds; a neighbour's place already covered by more than PAGE_SEEN of a found card is not looked at;
# a card's neighbours are looked for up to PAGE_ROUNDS - 1 times (a 3x4 page from one corner card: 3).
PAGE_ERODE = 7
PAGE_THRESHOLDS = (0.5, 0.8)
PAGE_SEEN = 0.3
PAGE_ON_CARD = 0.5  # the card map's value at a neighbour's centre for it to be looked at
PAGE_ROUNDS = 4
# A pocket's pitch over the card's own side: training.pages draws pockets 1.03-1.06 of the card and
# seams of 3-5% of a pocket.
PAGE_PITCH = 1.09
# A blob's cores (`split_blobs`): where the distance to its edge passes this share of its largest.
PAGE_CORE = 0.8
# `centre_card`: a blob of a zoomed view's map smaller than this share of the view is no card (a card there
# fills ~40% of it).
PAGE_RETRY_AREA = 0.02
# A find whose longest side passes this many times its shortest is no card's outline (a card is 1.4, and
# tilted cards on validation pages and spreads reach 1.82; the finds there that lay on no card, 1.43-2.92).
PAGE_SIDE_RATIO = 2.0
# Nor is a find with a corner further than this from a right angle, in degrees (true cards on validation
# pages and spreads reach 20, seen at a slant; half the finds there that lay on no card pass 15).
PAGE_SKEW = 25.0
# A zoomed view's card is the blob of its map above this (the zoomed pass marks the card it was drawn
# for near 1 and a neighbour it touches at 0.3-0.6, which at 0.5 merges the two).
PAGE_ACCEPT_THRESHOLD = 0.85


@dataclass(frozen=True)
class PageFind:
    """One card of a page (`PageDetector.locate_all`): its quad (TL, TR, BR, BL, photo px), its band
    evidence (`Find`) and whether that says it lies face up (a card back shows no name or number band)."""

    quad: np.ndarray
    bands: float
    face_up: bool


class PageDetector(CardDetector):
    """`CardDetector` with `locate_all`; loads the page detector's weights unless told others."""

    default_weights = PAGE_WEIGHTS
    accept_threshold = PAGE_ACCEPT_THRESHOLD
    accept_enclose = True  # cards on a table cover each other's corners

    def locate_all(self, image: Pixels, limit: int = 48) -> list[PageFind]:
        """Every card in one photo (#48: a binder page, a table spread), up to `limit`, largest first, each
        TL,TR,BR,BL in photo px as `locate_batch` orients them, and whether it lies face up. The whole
        photo is seen once at `page_input` px, so a card of a 12-pocket page is ~100 px tall there; every
        card-like blob of that view gets a zoomed pass, in one batch a pass, and keeps the find the
        zoomed view accepts; a find gets the next pass only while the last one still moved it
        (`page_refine_moved`: most cards are found where they were looked for); a view that finds no
        card is drawn once more around the card nearest its centre (`_look`). Then, round by round,
        the places beside each card found (a pocket's pitch along its sides) are looked at too: cards
        side by side in pockets touch in the whole-photo view's mask, and a blob of two or three of them
        fits no quad, but each pocket's zoomed view sees one card. The page detector's weights mask every
        card and mark a back without bands; the single-card detector's mask one card a photo, so they
        find few cards of a page here."""
        self.load()
        cfg = self.cfg
        photo = _pyramid(image)
        h, w = _size(photo)
        view, m = _letterbox(photo, cfg.page_input)
        probs = self._infer_views([view])[0]
        kept: list[Find] = []
        looked: list[np.ndarray] = []
        candidates = self._page_candidates(probs, m)
        for _ in range(PAGE_ROUNDS):
            fresh: list[np.ndarray] = []
            for q in candidates:
                if any(overlap(q, k[0]) > PAGE_SEEN for k in kept):
                    continue
                if not any(same_place(q, seen) for seen in looked):
                    fresh.append(q)
                    looked.append(q)
            if not fresh:
                break
            # (the quad last zoomed on, its find): a find is zoomed on again only while it still moves.
            finds_of = self._look([photo], fresh)
            pairs = [(q, f) for q, f in finds_of if f is not None]
            for _ in range(max(1, cfg.page_refine_passes or cfg.refine_passes) - 1):
                moving = [i for i, (q, f) in enumerate(pairs) if moved(q, f[0]) > cfg.page_refine_moved]
                again = self._zoom([photo], [(0, pairs[i][1][0]) for i in moving])
                for i, (_, r) in zip(moving, again, strict=True):
                    pairs[i] = (pairs[i][1][0], card_like(r) or pairs[i][1])
            finds = [f for _, f in pairs]
            added = []
            for find in sorted(finds, key=lambda f: -f[1]):
                if all(overlap(find[0], k[0]) < PAGE_OVERLAP for k in kept):
                    kept.append(find)
                    added.append(find)
            # A neighbour's place is looked at only where the whole-photo view saw card there: not in an
            # empty pocket, off the page or on the table.
            candidates = [
                q for f in added for q in _neighbours(f[0]) if _inside(q, w, h) and _on_card(probs[0], m, q)
            ]
        kept.sort(key=lambda f: -abs(_area(f[0])))
        return [PageFind(quad, bands, bands >= cfg.page_face_bands) for quad, _, bands in kept[:limit]]

    def _look(
        self, images: list[AnyPyramid], quads: list[np.ndarray]
    ) -> list[tuple[np.ndarray, Find | None]]:
        """A zoomed look at each quad: (the quad last looked at, its card-like find or None). A quad whose
        view gives no card is looked at once more, drawn around the card nearest the view's centre
        (`centre_card`): the zoomed pass finds a card drawn upright in its view, and a candidate from a
        blob of several cards can stand at any angle to them, while the card it lies on still shows in
        that view's map."""
        maps = self._zoom_maps(images, [(0, q) for q in quads])
        looks = [(q, card_like(self._accept(p, m))) for q, (p, m) in zip(quads, maps, strict=True)]
        again = [(i, centre_card(p[0], m)) for i, (p, m) in enumerate(maps) if looks[i][1] is None]
        retries = [(i, q) for i, q in again if q is not None]
        for (i, q), (_, find) in zip(retries, self._zoom(images, [(0, q) for _, q in retries]), strict=True):
            looks[i] = (q, card_like(find))
        return looks

    def _page_candidates(self, probs: np.ndarray, m: np.ndarray) -> list[np.ndarray]:
        """Card-like blobs of the page view's maps as oriented quads in photo px: the card map eroded a
        little first (pockets' cards touch there; the zoomed pass finds each card's own edges again), at
        two thresholds (a low one outlines faint cards, a high one splits touching ones), and a quad
        around each card's core in blobs of several (`split_blobs`)."""
        cfg = self.cfg
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (PAGE_ERODE, PAGE_ERODE))
        card = cv2.erode(probs[0], kernel)
        back = np.linalg.inv(m)
        quads: list[np.ndarray] = []
        for threshold in PAGE_THRESHOLDS:
            quads += fit_quads(
                card, PAGE_MIN_AREA, cfg.min_fit * 0.9, threshold, cfg.page_close, 64, True, enclose=True
            )
        quads += split_blobs(card > PAGE_THRESHOLDS[0])
        return [apply(back, orient(q, probs[1:], apply(back, q), cfg.geo)) for q in quads]


def split_blobs(mask: np.ndarray) -> list[np.ndarray]:
    """A card-shaped quad (view px) around each card's core in every blob of a 0/1 map that holds more
    than one: the cores are where the distance to the blob's edge passes PAGE_CORE of its largest. Cards
    on a table touch and overlap at any angle, so the whole-photo view merges them into one blob no quad
    fits, whose minimum-area rectangle spans several cards. A card's core is the card shrunk by PAGE_CORE
    of its half-width on every side, so its rectangle gives the card's centre, angle and width; its height
    is the card's aspect. The zoomed pass then finds each card's own edges."""
    dist, blobs = _blob_cores(mask, PAGE_MIN_AREA)
    # One core: the blob is one card's, or cards the cores cannot tell apart. A card's half-width is where
    # its core is widest (the map was eroded by PAGE_ERODE first).
    return [
        _core_quad(core, float(dist[core].max()) + PAGE_ERODE / 2)
        for cores in blobs
        if len(cores) > 1
        for core in cores
    ]


def centre_card(card: np.ndarray, m: np.ndarray) -> np.ndarray | None:
    """A card-shaped quad (photo px; `m`: photo px -> view px) around the card of a zoomed view's card map
    whose core lies nearest the view's centre, its short side first, as `split_blobs` draws one: a view
    drawn at an angle to the cards marks each of them in part, merged, and their cores still tell them
    apart. None when the map shows no card."""
    dist, blobs = _blob_cores(card > 0.5, PAGE_RETRY_AREA)
    cores = [core for blob in blobs for core in blob]
    if not cores:
        return None
    centre = np.array([card.shape[1], card.shape[0]], np.float64) / 2
    core = min(cores, key=lambda c: _gap(c, centre))
    quad = _core_quad(core, float(dist[core].max()))
    if np.linalg.norm(quad[1] - quad[0]) > np.linalg.norm(quad[3] - quad[0]):
        quad = np.roll(quad, -1, axis=0)  # the short side first: the zoomed view draws the card upright
    return apply(np.linalg.inv(m), quad).astype(np.float32)


def _gap(core: np.ndarray, centre: np.ndarray) -> float:
    """How far a core's centroid lies from a point (x, y), px."""
    ys, xs = np.nonzero(core)
    return float(np.hypot(xs.mean() - centre[0], ys.mean() - centre[1]))


def _blob_cores(mask: np.ndarray, min_share: float) -> tuple[np.ndarray, list[list[np.ndarray]]]:
    """The distance to the edge of a 0/1 map's blobs, and each blob's cores (where that distance passes
    PAGE_CORE of the blob's largest), one list a blob of at least `min_share` of the map."""
    binary = mask.astype(np.uint8)
    labels, areas = blob_areas(binary)
    dist = cv2.distanceTransform(binary, cv2.DIST_L2, 5)
    blobs = []
    for label in np.flatnonzero(areas[1:] >= min_share * mask.size) + 1:
        blob = labels == label
        cores = (blob & (dist > PAGE_CORE * float(dist[blob].max()))).astype(np.uint8)
        count, markers = cv2.connectedComponents(cores, connectivity=8)
        blobs.append([markers == k for k in range(1, count)])
    return dist, blobs


def _core_quad(core: np.ndarray, half_width: float) -> np.ndarray:
    """The card around a core of its map (a card shrunk by the same margin on every side): the core's
    centre and angle, `half_width` its half-width, the card's aspect its height."""
    centre, (a, b), angle = cv2.minAreaRect(cv2.findNonZero(core.astype(np.uint8)))
    width = 2 * half_width
    height = width * CARD_ASPECT
    return rect_quad((centre, (height, width) if a > b else (width, height), angle))


def _neighbours(quad: np.ndarray) -> list[np.ndarray]:
    """Where the cards beside this one would lie in a binder page's pockets: the quad moved a pocket's
    pitch (`PAGE_PITCH` of its own side) along each of its sides."""
    across, down = quad[1] - quad[0], quad[3] - quad[0]
    steps = (across, -across, down, -down)
    return [(quad + PAGE_PITCH * step).astype(np.float32) for step in steps]


def _on_card(card: np.ndarray, m: np.ndarray, quad: np.ndarray) -> bool:
    """Whether the page view's card map (`m`: photo px -> view px) is sure of a card at the quad's
    centre."""
    x, y = apply(m, quad.mean(0, keepdims=True))[0]
    row, col = round(float(y)), round(float(x))
    return 0 <= row < card.shape[0] and 0 <= col < card.shape[1] and card[row, col] >= PAGE_ON_CARD


def _inside(quad: np.ndarray, w: int, h: int) -> bool:
    """Whether the quad's centre lies in the photo."""
    cx, cy = quad.mean(0)
    return 0 <= cx < w and 0 <= cy < h


def _area(quad: np.ndarray) -> float:
    x, y = quad[:, 0], quad[:, 1]
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))


def moved(before: np.ndarray, after: np.ndarray) -> float:
    """How far a zoomed pass moved a card's quad: the farthest corner of `after` from its nearest corner
    of `before` (either may start at any corner), over `after`'s shorter side."""
    gaps = np.linalg.norm(after[:, None, :] - before[None, :, :], axis=2).min(axis=1)
    return float(gaps.max()) / max(float(_sides(after).min()), 1e-6)


def card_like(find: Find | None) -> Find | None:
    """The find, unless its outline is no card's: a side more than PAGE_SIDE_RATIO times another (the
    zoomed view of a card another covers can wander to the pair's union), or a corner more than
    PAGE_SKEW degrees from a right angle."""
    if find is None or side_ratio(find[0]) > PAGE_SIDE_RATIO or corner_skew(find[0]) > PAGE_SKEW:
        return None
    return find


def corner_skew(quad: np.ndarray) -> float:
    """How far the quad's corner angles stray from a right angle at most, in degrees."""
    before, after = np.roll(quad, 1, axis=0) - quad, np.roll(quad, -1, axis=0) - quad
    lengths = np.linalg.norm(before, axis=1) * np.linalg.norm(after, axis=1)
    cos = (before * after).sum(1) / np.maximum(lengths, 1e-9)
    return float(np.abs(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))) - 90.0).max())


def side_ratio(quad: np.ndarray) -> float:
    """A quad's longest side over its shortest."""
    sides = _sides(quad)
    return float(sides.max()) / max(float(sides.min()), 1e-6)


def _sides(quad: np.ndarray) -> np.ndarray:
    """Each side's length, from each corner to the next."""
    return np.linalg.norm(quad - np.roll(quad, -1, axis=0), axis=1)


def same_place(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two candidate quads outline the same place: their intersection covers more than
    PAGE_OVERLAP of the larger one. (Over the smaller one, a blob of several cards merged in the
    whole-photo view, which finds nothing when zoomed on, would stand for every card inside it.)"""
    return _intersection(a, b) > PAGE_OVERLAP * max(abs(_area(a)), abs(_area(b)), 1e-6)


def overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection of two convex quads over the smaller one's area: one card found twice is ~1, two
    overlapping cards of a spread at most `SPREAD_OVERLAP` of the lower one (training.pages)."""
    return _intersection(a, b) / max(min(abs(_area(a)), abs(_area(b))), 1e-6)


def _intersection(a: np.ndarray, b: np.ndarray) -> float:
    """The area two convex quads share."""
    inter, _ = cv2.intersectConvexConvex(a.astype(np.float32), b.astype(np.float32))
    return float(inter)
