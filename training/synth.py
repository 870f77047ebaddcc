"""Deterministic synthetic phone photos of cards: the detector's only training and benchmark data.

No labelled phone photos exist, so every photo is drawn from a rendered card face and a seed. All randomness
comes from one `numpy.random.default_rng` per photo, so the same face, seed and difficulty give the same
pixels on every machine.

Difficulties: `standard`; `hard` (issue #13: glare bands over the text, steep perspective, any rotation,
small in frame, blur, low JPEG quality with phone sharpening, tinted sleeves, fingers, low light, look-alike
cards around; see docs/hard-photos.md); `hard-v1`, the hard bucket before #13, pixel for pixel, so figures
measured on it stay comparable; `harsh` (issue #43, for training): the hard bucket pushed further, a lamp's
reflection at up to three exposures anywhere on the card or beside it (art, text, edges, corners), smaller
in frame, steeper, darker and noisier. `hard` itself stays pixel for pixel what #13's figures measured.

Seed ranges (keep them apart, or a benchmark measures memorisation):
  * training uses seeds < 1_000_000 (`TRAIN_SEED_LIMIT`); 990_000..999_999 are kept for validation;
  * benchmarks and tests use seeds >= 10_000_000 (`BENCH_SEED_BASE`); never train on those.

Preview (writes JPEGs with the true corners drawn, TL in red):
    python -m training.synth --faces ~/.cache/cardcat/renders/catalog --out /tmp/synth --count 8 \
        [--difficulty hard|hard-v1] [--nocard 4]
"""

from __future__ import annotations

import argparse
import math
import string
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import cv2
import numpy as np

from models.geometry import card_height, read_face, rectify

Difficulty = Literal["standard", "hard", "hard-v1", "harsh"]
DIFFICULTIES: tuple[Difficulty, ...] = ("standard", "hard", "hard-v1", "harsh")

TRAIN_SEED_LIMIT = 1_000_000
VAL_SEED_BASE = 990_000
BENCH_SEED_BASE = 10_000_000
FACE_W, FACE_H = 600, 838
# (width, height) of common phone photos, and how often each occurs.
PHOTO_SIZES = ((960, 1280), (1280, 960), (720, 960), (960, 720))
PHOTO_SIZE_P = (0.4, 0.4, 0.1, 0.1)
# Face rows (in the 838-px face) of the name line and the bottom-left number line, where hard glare goes.
NAME_BOX = (30, 30, 420, 85)
NUMBER_BOX = (30, 770, 260, 800)
_SALT = {"standard": 11, "hard-v1": 23, "nocard": 37, "hard": 53, "harsh": 71, "empty": 89}


@dataclass
class Photo:
    """A synthetic photo; `corners` are the face's TL,TR,BR,BL in photo px (None: no card in it)."""

    image: np.ndarray
    corners: np.ndarray | None
    card_id: str | None = None
    jpeg: bytes | None = None  # the photo as its simulated phone encoded it (hard bucket only)
    # #43: a card lying face down in a no-card photo (`make_empty_photo`'s backs), TL,TR,BR,BL in photo px,
    # so a detector can be taught to find it as a card without a face's bands (`mark_backs`)
    back: np.ndarray | None = None


# ---------------------------------------------------------------------------------------------- helpers
def _colour(rng: np.random.Generator, lo: int = 0, hi: int = 255) -> np.ndarray:
    return rng.integers(lo, hi + 1, size=3).astype(np.float32)


def _smooth_noise(rng: np.random.Generator, w: int, h: int, cells: int) -> np.ndarray:
    """Value noise in [0, 1]: a coarse random grid upsampled (cheap, smooth, deterministic)."""
    gh, gw = max(2, cells * h // max(w, h)), max(2, cells * w // max(w, h))
    grid = rng.random((gh + 1, gw + 1), dtype=np.float32)
    return cv2.resize(grid, (w, h), interpolation=cv2.INTER_CUBIC).clip(0, 1)


def _fractal(rng: np.random.Generator, w: int, h: int, octaves: int = 4) -> np.ndarray:
    out = np.zeros((h, w), np.float32)
    amp = 1.0
    for o in range(octaves):
        out += amp * _smooth_noise(rng, w, h, 3 * 2**o)
        amp *= 0.5
    return out / (2.0 - 2.0 ** (1 - octaves))


def _ramp(t: np.ndarray, c1: np.ndarray, c2: np.ndarray) -> np.ndarray:
    return c1 + (c2 - c1) * t[..., None]


def _text(
    img: np.ndarray,
    text: str,
    org: tuple[int, int],
    font: int,
    scale: float,
    col: tuple[float, ...],
    thickness: int,
) -> None:
    """cv2.putText for float images (OpenCV 5 draws text on uint8 only): draw a mask patch, then blend."""
    (tw, th), base = cv2.getTextSize(text, font, scale, thickness)
    pad = thickness + 2
    x0, y0 = org[0] - pad, org[1] - th - pad
    mask = np.zeros((th + base + 2 * pad, tw + 2 * pad), np.uint8)
    cv2.putText(mask, text, (pad, th + pad), font, scale, 255, thickness, cv2.LINE_AA)
    h, w = img.shape[:2]
    xs0, ys0 = max(0, x0), max(0, y0)
    xs1, ys1 = min(w, x0 + mask.shape[1]), min(h, y0 + mask.shape[0])
    if xs1 <= xs0 or ys1 <= ys0:
        return
    m = mask[ys0 - y0 : ys1 - y0, xs0 - x0 : xs1 - x0].astype(np.float32)[..., None] / 255
    sub = img[ys0:ys1, xs0:xs1]
    sub += (np.asarray(col, np.float32) - sub) * m


def _words(rng: np.random.Generator, n: int) -> str:
    letters = string.ascii_letters + string.digits
    return " ".join("".join(rng.choice(list(letters), size=int(rng.integers(2, 9)))) for _ in range(n))


# ------------------------------------------------------------------------------------------ backgrounds
def _background(rng: np.random.Generator, w: int, h: int) -> np.ndarray:
    """A table, desk, cloth or floor: one of several procedural textures, float32 RGB 0..255."""
    kind = rng.choice(
        ["gradient", "noise", "wood", "fabric", "tiles", "plain"], p=[0.15, 0.2, 0.2, 0.2, 0.1, 0.15]
    )
    c1 = _colour(rng)
    c2 = np.clip(c1 + rng.normal(0, 60, 3), 0, 255).astype(np.float32) if rng.random() < 0.6 else _colour(rng)
    if rng.random() < 0.25:  # light neutral surfaces: low contrast with the silver and yellow borders
        c1 = np.full(3, rng.uniform(170, 250), np.float32) + rng.normal(0, 8, 3).astype(np.float32)
        c2 = np.clip(c1 - rng.uniform(0, 50), 0, 255)
    hs, ws = h // 4, w // 4
    if kind == "gradient":
        a = rng.uniform(0, math.pi)
        yy, xx = np.mgrid[0:hs, 0:ws].astype(np.float32)
        t = xx * math.cos(a) + yy * math.sin(a)
        t = (t - t.min()) / max(1e-6, float(t.max() - t.min()))
        img = _ramp(t, c1, c2)
    elif kind == "noise":
        img = _ramp(_fractal(rng, ws, hs), c1, c2)
    elif kind == "wood":
        a = rng.uniform(0, math.pi)
        yy, xx = np.mgrid[0:hs, 0:ws].astype(np.float32)
        u = xx * math.cos(a) + yy * math.sin(a) + rng.uniform(5, 30) * _fractal(rng, ws, hs, 3)
        t = 0.5 + 0.5 * np.sin(2 * math.pi * u / rng.uniform(3, 25))
        img = _ramp(t ** rng.uniform(0.5, 3), c1, c2)
    elif kind == "tiles":
        step = int(rng.integers(8, 60))
        yy, xx = np.mgrid[0:hs, 0:ws]
        t = (((xx // step) + (yy // step)) % 2).astype(np.float32)
        img = _ramp(t, c1, c2)
    else:  # plain and fabric start flat with a faint blotch
        img = _ramp(0.3 * _fractal(rng, ws, hs, 3), c1, c2)
    img = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)
    if kind == "fabric":  # fine weave at full resolution
        p = rng.uniform(2.5, 8)
        sx = np.sin(2 * math.pi * np.arange(w, dtype=np.float32) / p)
        sy = np.sin(2 * math.pi * np.arange(h, dtype=np.float32) / (p * rng.uniform(0.8, 1.25)))
        img += (rng.uniform(6, 25) * 0.5 * (sx[None, :] + sy[:, None]))[..., None]
    return img


def _clutter(rng: np.random.Generator, img: np.ndarray, count: int) -> None:
    """Shapes, scribbles and text lying around, drawn in place."""
    h, w = img.shape[:2]
    for _ in range(count):
        col = tuple(float(c) for c in _colour(rng))
        kind = rng.integers(0, 4)
        cx, cy = int(rng.integers(0, w)), int(rng.integers(0, h))
        size = int(rng.uniform(0.03, 0.25) * min(w, h))
        if kind == 0:
            axes = (size, max(2, int(size * rng.uniform(0.3, 1))))
            cv2.ellipse(img, (cx, cy), axes, float(rng.uniform(0, 180)), 0, 360, col, -1, cv2.LINE_AA)
        elif kind == 1:
            pts = np.array([[cx, cy]]) + rng.integers(-size, size + 1, size=(int(rng.integers(3, 7)), 2))
            cv2.fillPoly(img, [pts.astype(np.int32)], col, cv2.LINE_AA)
        elif kind == 2:
            pts = np.array([[cx, cy]]) + np.cumsum(rng.integers(-size, size + 1, size=(6, 2)), axis=0)
            cv2.polylines(img, [pts.astype(np.int32)], False, col, int(rng.integers(1, 8)), cv2.LINE_AA)
        else:
            scale = rng.uniform(0.6, 3.0)
            font = int(rng.choice([0, 1, 2, 3, 4, 6]))
            _text(
                img,
                _words(rng, int(rng.integers(1, 4))),
                (cx - size, cy),
                font,
                scale,
                col,
                int(rng.integers(1, 4)),
            )


def _distractor(rng: np.random.Generator, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """A flat object that is not a card (paper, phone, book, note), as RGB + alpha in its own frame."""
    if kind == "paper":
        w, h = 420, int(420 * rng.choice([1.414, 1.294, 1.0, 0.707]))
        img = np.full((h, w, 3), rng.uniform(200, 255), np.float32) + rng.normal(0, 5, 3).astype(np.float32)
        for y in range(40, h - 30, int(rng.integers(14, 30))):
            if rng.random() < 0.8:
                x1 = int(rng.integers(30, 60))
                cv2.line(
                    img,
                    (x1, y),
                    (int(rng.integers(w // 2, w - 30)), y),
                    (60, 60, 70),
                    int(rng.integers(1, 4)),
                )
    elif kind == "phone":
        w, h = 300, int(300 * rng.uniform(1.9, 2.2))
        img = np.zeros((h, w, 3), np.float32) + rng.uniform(10, 60)
        sx, sy = 14, 20
        screen = _ramp(_fractal(rng, w - 2 * sx, h - 2 * sy, 3), _colour(rng), _colour(rng))
        img[sy : h - sy, sx : w - sx] = screen if rng.random() < 0.7 else 15.0
    elif kind == "book":
        w, h = 400, int(400 * rng.uniform(1.3, 1.6))
        img = np.zeros((h, w, 3), np.float32) + _colour(rng)
        cv2.rectangle(img, (0, int(h * 0.6)), (w, int(h * 0.75)), tuple(float(c) for c in _colour(rng)), -1)
        for i in range(int(rng.integers(1, 4))):
            _text(
                img,
                _words(rng, 1),
                (20, 60 + 70 * i),
                int(rng.choice([0, 2, 3])),
                rng.uniform(1.2, 2.2),
                tuple(float(c) for c in _colour(rng)),
                int(rng.integers(2, 5)),
            )
    else:  # sticky note / coaster / envelope
        w = 300
        h = int(w * rng.uniform(0.5, 1.6))
        img = np.zeros((h, w, 3), np.float32) + _colour(rng, 100, 255)
        _clutter(rng, img, int(rng.integers(0, 4)))
    alpha: np.ndarray = np.ones(img.shape[:2], np.float32)
    radius = {"phone": 40.0}.get(kind, rng.uniform(0, 8))
    _round_corners(alpha, 0, 0, alpha.shape[1], alpha.shape[0], radius)
    return img, alpha


# ----------------------------------------------------------------------------------------- geometry
def _round_corners(alpha: np.ndarray, x0: float, y0: float, w: float, h: float, r: float) -> None:
    """Zero `alpha` outside a rounded rectangle (edge-pixel convention), antialiased, in place."""
    if r < 0.5:
        return
    ri = math.ceil(r) + 1
    yy, xx = np.mgrid[0:ri, 0:ri].astype(np.float32) + 0.5  # pixel centres measured from the corner
    d = np.sqrt(np.maximum(r - xx, 0) ** 2 + np.maximum(r - yy, 0) ** 2)
    patch = np.clip(r - d + 0.5, 0, 1) * (d > 0) + (d <= 0)
    ix0, iy0, ix1, iy1 = round(x0), round(y0), round(x0 + w), round(y0 + h)
    for flip_x, flip_y in ((False, False), (True, False), (False, True), (True, True)):
        p = patch[:, ::-1] if flip_x else patch
        p = p[::-1, :] if flip_y else p
        xs = slice(ix1 - ri, ix1) if flip_x else slice(ix0, ix0 + ri)
        ys = slice(iy1 - ri, iy1) if flip_y else slice(iy0, iy0 + ri)
        alpha[ys, xs] *= p


def _project(rng: np.random.Generator, w: float, h: float, angle: float, tilt: float) -> np.ndarray:
    """Corners of a w x h plane rectangle seen by a pinhole camera: in-plane angle, then tilt (radians)."""
    pts = np.array(
        [[-w / 2, -h / 2, 0], [w / 2, -h / 2, 0], [w / 2, h / 2, 0], [-w / 2, h / 2, 0]], np.float64
    )
    c, s = math.cos(angle), math.sin(angle)
    rz = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    axis_angle = rng.uniform(0, 2 * math.pi)
    ax = np.array([math.cos(axis_angle), math.sin(axis_angle), 0.0])
    kx = np.array([[0, -ax[2], ax[1]], [ax[2], 0, -ax[0]], [-ax[1], ax[0], 0]])
    rt = np.eye(3) + math.sin(tilt) * kx + (1 - math.cos(tilt)) * kx @ kx  # Rodrigues
    cam = (rt @ rz @ pts.T).T
    cam[:, 2] += max(w, h) * rng.uniform(1.6, 4.0)  # phone held close: noticeable perspective
    return (cam[:, :2] / cam[:, 2:3]).astype(np.float64)


def _place(
    rng: np.random.Generator,
    obj_w: float,
    obj_h: float,
    inner: np.ndarray,
    photo_wh: tuple[int, int],
    height_frac: float,
    angle: float,
    tilt: float,
    inside: bool,
) -> np.ndarray:
    """Homography from object px to photo px: the `inner` quad (object px) is `height_frac` of the short side.

    With `inside`, the whole object stays in frame (a margin of 2%); otherwise it may hang off the edge.
    """
    W, H = photo_wh
    src = np.array([[0, 0], [obj_w, 0], [obj_w, obj_h], [0, obj_h]], np.float32) - 0.5
    dst = _project(rng, obj_w, obj_h, angle, tilt)
    hom = cv2.getPerspectiveTransform(src, dst.astype(np.float32))
    q = cv2.perspectiveTransform(inner.reshape(-1, 1, 2).astype(np.float32), hom).reshape(-1, 2)
    qh = 0.5 * (np.linalg.norm(q[3] - q[0]) + np.linalg.norm(q[2] - q[1]))
    scale = height_frac * min(W, H) / qh
    outer = dst * scale
    lo, hi = outer.min(0), outer.max(0)
    margin = 0.02 * min(W, H)
    span = hi - lo
    room = np.array([W, H]) - 2 * margin - span
    if inside and (room < 0).any():  # too big to fit: shrink until it does
        shrink = float(np.min((np.array([W, H]) - 2 * margin) / span))
        outer *= shrink
        lo, hi = outer.min(0), outer.max(0)
        room = np.array([W, H]) - 2 * margin - (hi - lo)
    if inside:
        offset = margin - lo + rng.random(2) * np.maximum(room, 0)
    else:
        offset = rng.random(2) * np.array([W, H]) - (lo + hi) / 2
    return cv2.getPerspectiveTransform(src, (outer + offset).astype(np.float32))


def _paste(
    img: np.ndarray,
    rgb: np.ndarray,
    alpha: np.ndarray,
    hom: np.ndarray,
    shadow: float = 0.0,
    shadow_shift: tuple[float, float] = (0.0, 0.0),
) -> None:
    """Composite an RGB+alpha object through `hom` onto `img` in place, with an optional soft drop shadow.

    Large downscales are pre-shrunk with INTER_AREA: warpPerspective alone would alias like no camera does.
    """
    H, W = img.shape[:2]
    corners = np.array(
        [[0, 0], [rgb.shape[1], 0], [rgb.shape[1], rgb.shape[0]], [0, rgb.shape[0]]], np.float32
    )
    q = cv2.perspectiveTransform(corners.reshape(-1, 1, 2), hom).reshape(-1, 2)
    ratio = math.sqrt(max(cv2.contourArea(q), 1.0) / (rgb.shape[0] * rgb.shape[1]))
    if ratio < 0.7:
        r = min(1.0, ratio * 1.4)
        size = (max(2, round(rgb.shape[1] * r)), max(2, round(rgb.shape[0] * r)))
        sx, sy = rgb.shape[1] / size[0], rgb.shape[0] / size[1]
        rgb = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
        alpha = cv2.resize(alpha, size, interpolation=cv2.INTER_AREA)
        back = np.array([[sx, 0, 0.5 * sx - 0.5], [0, sy, 0.5 * sy - 0.5], [0, 0, 1]])
        hom = hom @ back
    premult = np.dstack([rgb * alpha[..., None], alpha])
    warped = cv2.warpPerspective(premult, hom, (W, H), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    a = warped[..., 3:4]
    if shadow > 0:  # blurred and shifted at quarter resolution: a soft shadow has no detail to lose
        small = cv2.resize(a[..., 0], (W // 4, H // 4), interpolation=cv2.INTER_AREA)
        m = np.array([[1, 0, shadow_shift[0] / 4], [0, 1, shadow_shift[1] / 4]], np.float32)
        small = cv2.warpAffine(
            cv2.GaussianBlur(small, (0, 0), 0.75 + 0.0025 * min(W, H)), m, small.shape[::-1]
        )
        # A black shadow under the object is just more opacity with nothing premultiplied.
        a = np.maximum(a, (shadow * cv2.resize(small, (W, H), interpolation=cv2.INTER_LINEAR))[..., None])
    img *= 1 - a
    img += warped[..., :3]


# --------------------------------------------------------------------------------------------- card
def _card_layer(
    rng: np.random.Generator, face: np.ndarray, hard: bool
) -> tuple[np.ndarray, np.ndarray, float, bool]:
    """The card (maybe in a sleeve) with glare, as RGB + alpha; returns the face's offset inside it."""
    fh, fw = face.shape[:2]
    sleeve = rng.random() < 0.35
    m = rng.uniform(0.015, 0.05) * fw if sleeve else 2.0
    mi = round(m)
    rgb = np.zeros((fh + 2 * mi, fw + 2 * mi, 3), np.float32)
    alpha = np.zeros(rgb.shape[:2], np.float32)
    rgb[mi : mi + fh, mi : mi + fw] = face
    alpha[mi : mi + fh, mi : mi + fw] = 1.0
    _round_corners(alpha, mi, mi, fw, fh, rng.uniform(0.025, 0.05) * fw)
    if sleeve:  # clear plastic: a faint tinted film, a darker tinted rim and a diagonal sheen
        tint = np.clip(np.array([235, 240, 245], np.float32) + rng.normal(0, 15, 3), 0, 255).astype(
            np.float32
        )
        film: np.ndarray = np.ones(alpha.shape, np.float32)
        _round_corners(film, 0, 0, film.shape[1], film.shape[0], rng.uniform(2, 12))
        a_film = rng.uniform(0.08, 0.35)
        rim = rng.uniform(1.5, 5)
        edge = np.zeros_like(film)
        cv2.rectangle(edge, (0, 0), (film.shape[1] - 1, film.shape[0] - 1), 1.0, max(1, int(rim)))
        edge_col = tint * rng.uniform(0.4, 0.95) if rng.random() < 0.7 else _colour(rng)
        a_sleeve = film * (a_film + edge * rng.uniform(0.2, 0.6))
        colour = np.where(edge[..., None] > 0, edge_col, tint)
        over = a_sleeve * (1 - alpha) + alpha * a_sleeve * rng.uniform(0.05, 0.35)
        rgb = rgb * alpha[..., None] * (1 - over[..., None]) + colour * over[..., None]
        new_alpha = np.maximum(alpha, a_sleeve)
        rgb /= np.maximum(new_alpha, 1e-3)[..., None]
        alpha = new_alpha
        _sheen(rng, rgb, alpha)
    _glare(rng, rgb, mi, hard)
    return rgb, alpha, float(mi), sleeve


def _sheen(rng: np.random.Generator, rgb: np.ndarray, alpha: np.ndarray) -> None:
    h, w = alpha.shape
    a = rng.uniform(0, math.pi)
    yy, xx = np.mgrid[0:h:4, 0:w:4].astype(np.float32)
    d = (xx - rng.uniform(0, w)) * math.cos(a) + (yy - rng.uniform(0, h)) * math.sin(a)
    band = np.exp(-((d / rng.uniform(20, 120)) ** 2)) * rng.uniform(0.05, 0.3)
    band = cv2.resize(band, (w, h))
    rgb += (255 - rgb) * (band * (alpha > 0))[..., None]


def _glare(rng: np.random.Generator, rgb: np.ndarray, off: float, hard: bool) -> None:
    """Specular blobs; hard photos put a strong one over the name or number line."""
    h, w = rgb.shape[:2]
    blobs = []
    if hard and rng.random() < 0.6:
        x0, y0, x1, y1 = NAME_BOX if rng.random() < 0.5 else NUMBER_BOX
        blobs.append((rng.uniform(x0, x1), rng.uniform(y0, y1), rng.uniform(30, 110), rng.uniform(0.7, 1.2)))
    elif rng.random() < (0.5 if hard else 0.35):  # mild and in the art, away from the text a user reads
        blobs.append(
            (rng.uniform(100, 500), rng.uniform(130, 380), rng.uniform(25, 80), rng.uniform(0.2, 0.55))
        )
    for cx, cy, r, strength in blobs:
        cx, cy = cx + off, cy + off
        ratio = rng.uniform(0.3, 1.0)
        ang = rng.uniform(0, math.pi)
        pad = int(3 * r)
        xs0, xs1 = int(max(0, cx - pad)), int(min(w, cx + pad))
        ys0, ys1 = int(max(0, cy - pad)), int(min(h, cy + pad))
        yy, xx = np.mgrid[ys0:ys1, xs0:xs1].astype(np.float32)
        u = (xx - cx) * math.cos(ang) + (yy - cy) * math.sin(ang)
        v = -(xx - cx) * math.sin(ang) + (yy - cy) * math.cos(ang)
        g = np.exp(-((u / r) ** 2 + (v / (r * ratio)) ** 2)) * strength
        sub = rgb[ys0:ys1, xs0:xs1]
        sub += (255 - sub) * np.clip(g, 0, 1)[..., None]


# ------------------------------------------------------------------------------------ photo effects
def _camera(rng: np.random.Generator, img: np.ndarray, hard: bool, scale: float = 1.0) -> np.ndarray:
    """Lighting, colour cast, blur, sensor noise and JPEG: float RGB in, uint8 RGB out.

    `scale` < 1 (training only) shrinks the blur lengths with the photo; the draws stay the same.
    """
    H, W = img.shape[:2]
    # Uneven light: a tilted gradient and a vignette, computed small and upsampled.
    yy, xx = np.mgrid[0:32, 0:32].astype(np.float32) / 31 - 0.5
    a = rng.uniform(0, 2 * math.pi)
    light = 1 + rng.uniform(0, 0.6 if hard else 0.35) * (xx * math.cos(a) + yy * math.sin(a))
    light -= rng.uniform(0, 0.5) * (xx**2 + yy**2)
    light *= rng.uniform(0.55, 1.2) if hard else rng.uniform(0.75, 1.15)
    light = cv2.resize(light, (W, H), interpolation=cv2.INTER_LINEAR)
    cast = 1 + rng.normal(0, 0.08 if hard else 0.05, 3).astype(np.float32)
    img *= light[..., None] * cast
    # Blur: defocus and hand shake.
    sigma = (rng.uniform(0.8, 3.5) if hard else rng.uniform(0, 1.1)) * scale
    if sigma > 0.3:
        img = cv2.GaussianBlur(img, (0, 0), sigma)
    if rng.random() < (0.5 if hard else 0.2):
        length = int((rng.uniform(6, 22) if hard else rng.uniform(2, 6)) * scale)
        k = np.zeros((length | 1, length | 1), np.float32)
        c = (length | 1) // 2
        ang = rng.uniform(0, math.pi)
        dx, dy = c * math.cos(ang), c * math.sin(ang)
        cv2.line(k, (round(c - dx), round(c - dy)), (round(c + dx), round(c + dy)), 1.0, 1, cv2.LINE_AA)
        img = cv2.filter2D(img, -1, k / k.sum())
    # Sensor noise: luminance at full resolution, chroma at half.
    sd = rng.uniform(3, 12) if hard else rng.uniform(1, 5)
    chroma = rng.standard_normal((H // 2, W // 2, 3), dtype=np.float32) * (sd * 0.5)
    chroma += (rng.standard_normal((H // 2, W // 2), dtype=np.float32) * (sd * 0.5))[..., None]
    img += cv2.resize(chroma, (W, H), interpolation=cv2.INTER_LINEAR)
    img += (rng.standard_normal((H, W), dtype=np.float32) * (sd * 0.7))[..., None]
    out = np.clip(img, 0, 255, out=img).astype(np.uint8)
    quality = int(rng.uniform(30, 90) if hard else rng.uniform(65, 95))
    ok, buf = cv2.imencode(".jpg", out[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, quality])
    decoded = cv2.imdecode(buf, cv2.IMREAD_COLOR)
    assert ok and decoded is not None
    return decoded[..., ::-1].copy()


def _scene(
    rng: np.random.Generator, hard: bool, distractors: int, scale: float = 1.0
) -> tuple[np.ndarray, tuple[int, int]]:
    W, H = PHOTO_SIZES[int(rng.choice(len(PHOTO_SIZES), p=PHOTO_SIZE_P))]
    W, H = (W, H) if scale == 1 else (round(W * scale), round(H * scale))
    img = _background(rng, W, H)
    _clutter(rng, img, int(rng.integers(0, 7 if hard else 5)))
    for _ in range(distractors):
        kind = str(rng.choice(["paper", "phone", "book", "note"]))
        rgb, alpha = _distractor(rng, kind)
        h, w = alpha.shape
        inner = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32) - 0.5
        hom = _place(
            rng,
            w,
            h,
            inner,
            (W, H),
            rng.uniform(0.25, 0.9),
            rng.uniform(0, 2 * math.pi),
            math.radians(rng.uniform(0, 40)),
            inside=rng.random() < 0.5,
        )
        _paste(img, rgb, alpha, hom, shadow=rng.uniform(0, 0.4), shadow_shift=tuple(rng.normal(0, 6, 2)))
    return img, (W, H)


# ---------------------------------------------------------------------------------------------- API
def make_photo(
    face: np.ndarray,
    seed: int,
    difficulty: Difficulty = "standard",
    card_id: str | None = None,
    scale: float = 1.0,
    touching: int = 0,
    look: HardLook | None = None,
) -> Photo:
    """A phone photo of `face` (HxWx3 uint8 RGB); the same face, seed and difficulty give the same pixels.

    Training-only knobs (the defaults give the benchmark photos, pixel for pixel): `scale` composes the
    photo that much smaller (much faster; the detector sees it at 224 px anyway), `touching` adds that many
    card-like objects (paper, notes, books, phones) lying under or against the card, drawn from their own
    random stream so the rest of the photo does not change. `look` (hard and harsh) replaces the effects the
    seed drew (`hard_look(seed)`), e.g. to show one effect alone.
    """
    if difficulty in ("hard", "harsh"):
        return _hard_photo(face, seed, card_id, scale, touching, look, harsh=difficulty == "harsh")
    hard = difficulty == "hard-v1"
    rng = np.random.default_rng([seed, _SALT[difficulty]])
    n_distract = int(rng.choice([0, 1, 2], p=[0.6, 0.3, 0.1] if not hard else [0.4, 0.4, 0.2]))
    img, (W, H) = _scene(rng, hard, n_distract, scale)
    face_f = face.astype(np.float32)
    fh, fw = face.shape[:2]
    rgb, alpha, off, _ = _card_layer(rng, face_f, hard)
    if hard:
        angle = rng.uniform(0, 2 * math.pi)
        tilt = math.radians(rng.uniform(5, 45))
        frac = rng.uniform(0.2, 0.85)
    else:
        base = float(rng.choice([0, 90, 180, 270], p=[0.55, 0.15, 0.15, 0.15]))
        angle = math.radians(rng.uniform(0, 360) if rng.random() < 0.25 else base + rng.normal(0, 8))
        tilt = math.radians(rng.uniform(0, 25))
        frac = rng.uniform(0.35, 0.8)
    inner = np.array([[0, 0], [fw, 0], [fw, fh], [0, fh]], np.float32) + off - 0.5
    hom = _place(rng, rgb.shape[1], rgb.shape[0], inner, (W, H), frac, angle, tilt, inside=True)
    if touching:
        card = cv2.perspectiveTransform(inner.reshape(-1, 1, 2), hom).reshape(4, 2)
        _touching(np.random.default_rng([seed, _SALT[difficulty], 101]), img, card, touching)
    shift = tuple(rng.normal(0, 0.01 * min(W, H), 2))
    _paste(img, rgb, alpha, hom, shadow=rng.uniform(0.1, 0.5), shadow_shift=shift)
    if hard and rng.random() < 0.25:  # a fingertip over one edge
        q = cv2.perspectiveTransform(inner.reshape(-1, 1, 2), hom).reshape(-1, 2)
        i = int(rng.integers(0, 4))
        p = q[i] + (q[(i + 1) % 4] - q[i]) * rng.uniform(0.25, 0.75)
        skin = np.array([225, 172, 140], np.float32) * rng.uniform(0.6, 1.1)
        r = 0.06 * min(W, H)
        cv2.ellipse(
            img,
            (int(p[0]), int(p[1])),
            (int(r), int(r * 1.6)),
            float(rng.uniform(0, 180)),
            0,
            360,
            tuple(float(c) for c in skin),
            -1,
            cv2.LINE_AA,
        )
    corners = cv2.perspectiveTransform(inner.reshape(-1, 1, 2), hom).reshape(4, 2).astype(np.float32)
    return Photo(image=_camera(rng, img, hard, scale), corners=corners, card_id=card_id)


def photo_view(
    face: np.ndarray,
    seed: int,
    difficulty: Difficulty,
    scale: float,
    corner_error: float,
    look: HardLook | None = None,
) -> np.ndarray:
    """The scanner's view of a synthetic phone photo of `face`: rectified from its true corners, each moved
    by up to `corner_error` of the card's height (what the detector leaves), upright. The embedder's and
    the reader's training and evaluations share it, so they see the photos the scanner would. `look` as
    `make_photo`'s (hard and harsh)."""
    photo = make_photo(face, seed, difficulty, scale=scale, look=look)
    assert photo.corners is not None
    rng = np.random.default_rng([seed, 7])
    height = float(np.linalg.norm(photo.corners[3] - photo.corners[0]))
    quad = photo.corners + rng.uniform(-1, 1, (4, 2)) * rng.uniform(0, 1) * corner_error * height
    return rectify(photo.image, quad)


def _touching(rng: np.random.Generator, img: np.ndarray, card: np.ndarray, count: int) -> None:
    """Card-like objects under or against the card (quad `card`, photo px), pasted before the card."""
    centre = card.mean(0)
    card_h = 0.5 * (np.linalg.norm(card[3] - card[0]) + np.linalg.norm(card[2] - card[1]))
    up = card[0] - card[3]
    card_angle = math.atan2(up[0], -up[1])  # the card's in-plane rotation, so objects can line up with it
    for _ in range(count):
        kind = str(rng.choice(["paper", "note", "book", "phone", "card"], p=[0.3, 0.25, 0.2, 0.1, 0.15]))
        if kind == "card":  # a plain card-sized rectangle (a card back, a token, a coaster)
            w, h = 300, int(300 * rng.uniform(1.25, 1.55))
            rgb = np.zeros((h, w, 3), np.float32) + _colour(rng)
            if rng.random() < 0.6:
                cv2.rectangle(rgb, (14, 14), (w - 15, h - 15), tuple(float(c) for c in _colour(rng)), -1)
            alpha = np.ones((h, w), np.float32)
            _round_corners(alpha, 0, 0, w, h, rng.uniform(4, 16))
        else:
            rgb, alpha = _distractor(rng, kind)
        h, w = alpha.shape
        size = card_h * (rng.uniform(0.6, 1.3) if kind in ("card", "note") else rng.uniform(0.9, 2.2))
        s = size / max(h, w)
        aligned = rng.random() < 0.6
        turn = (
            rng.choice([0.0, math.pi / 2]) + rng.normal(0, 0.05) if aligned else rng.uniform(0, 2 * math.pi)
        )
        ang = card_angle + turn
        # Put the object's centre so that it overlaps or just touches one side of the card.
        side = rng.uniform(0, 2 * math.pi)
        dirv = np.array([math.cos(side), math.sin(side)])
        reach = 0.5 * card_h * rng.uniform(0.3, 1.0) + 0.5 * size * rng.uniform(0.3, 1.05)
        c = centre + dirv * reach
        cs, sn = math.cos(ang), math.sin(ang)
        rot = np.array([[cs, -sn], [sn, cs]]) * s
        src = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32) - 0.5
        dst = (src - [w / 2, h / 2]) @ rot.T + c + rng.normal(0, 0.01 * size, (4, 2))
        hom = cv2.getPerspectiveTransform(src, dst.astype(np.float32))
        _paste(img, rgb, alpha, hom, shadow=rng.uniform(0, 0.4), shadow_shift=tuple(rng.normal(0, 4, 2)))


def make_nocard_photo(seed: int, scale: float = 1.0, hard_bucket: Difficulty = "hard-v1") -> Photo:
    """A photo with no card: surfaces, clutter and card-like rectangles (paper, phone, book, notes).

    40% of them are hard; `hard_bucket="hard"` draws those as #13's hard scenes (look-alike cards, low
    light, low JPEG quality); the default keeps the photos every figure so far was measured on."""
    rng = np.random.default_rng([seed, _SALT["nocard"]])
    hard = rng.random() < 0.4
    if hard and hard_bucket == "hard":
        return _hard_nocard(seed, scale)
    img, _ = _scene(rng, hard, int(rng.choice([0, 1, 2, 3], p=[0.15, 0.4, 0.3, 0.15])), scale)
    return Photo(image=_camera(rng, img, hard, scale), corners=None, card_id=None)


# ------------------------------------------------------------------------------ the hard bucket (#13)
# Real collectors' photos (issue #13): under a lamp, in a sleeve, at an angle, small in the frame, on a
# table with other cards. Every range below is what docs/hard-photos.md documents; change them together.
HARD_AREA = (0.15, 0.35)  # the card's share of the photo's area
HARD_TILT_DEG = (10.0, 40.0)  # out of plane
HARD_RIGHT_ANGLE_P = (
    0.5  # in plane: 0/90/180/270 degrees give or take HARD_RIGHT_ANGLE_SD_DEG, else any angle
)
HARD_RIGHT_ANGLE_SD_DEG = 4.0
HARD_GLARE_P = 0.7  # a band over the name row, the footer, or both
HARD_GLARE_WIDTH = (15.0, 40.0)  # the band's half-width, in face px (face 838 px tall)
HARD_GLARE_STRENGTH = (0.7, 1.0)  # how far toward white the band's centre goes
HARD_GLARE_TILT_DEG = 4.0  # the band's angle to the text line, at most
NAME_ROW = (40.0, 80.0)  # face rows where a name-row band is centred
FOOTER_ROW = (772.0, 808.0)  # face rows where a footer band is centred
HARD_SLEEVE_P = 0.5
HARD_SLEEVE_TINTS = {  # film colours of common sleeves
    "clear": (238.0, 242.0, 246.0),
    "blue": (140.0, 185.0, 255.0),
    "smoke": (90.0, 90.0, 95.0),
    "yellowed": (250.0, 225.0, 140.0),
    "red": (240.0, 120.0, 130.0),
    "green": (150.0, 225.0, 160.0),
}
HARD_SLEEVE_FILM = (0.12, 0.35)  # the film's opacity over the face
HARD_SLEEVE_REFLECTIONS = (1, 3)  # bright streaks across the sleeve
HARD_SLEEVE_REFLECTION_STRENGTH = (0.15, 0.5)
HARD_FINGER_P = 0.35  # a finger over a corner (60%) or over the name row / footer
HARD_FINGER_WIDTH = (0.18, 0.28)  # of the card's width
HARD_FINGER_TONES = ((226.0, 180.0, 150.0), (198.0, 140.0, 105.0), (141.0, 96.0, 70.0), (92.0, 62.0, 45.0))
HARD_DEFOCUS_P = 0.6
HARD_DEFOCUS_PX = (1.0, 3.5)  # radius of the disc the lens blurs a point into, at scale 1
HARD_MOTION_P = 0.5
HARD_MOTION_PX = (4.0, 20.0)  # length of the hand's shake during the exposure, at scale 1
HARD_CAST_P = 0.6  # a white-balance error: warm (lamp), cool (shade), green (fluorescent) or magenta
HARD_CAST = (0.06, 0.22)  # how far the red and blue gains move apart
HARD_LOW_LIGHT_P = 0.4
HARD_EXPOSURE = (0.3, 0.6)  # low light: the exposure's share of a good one (else 0.8..1.15)
HARD_NOISE_SD = (2.0, 6.0)  # sensor noise in 0..255 units; low light: HARD_LOW_LIGHT_NOISE_SD
HARD_LOW_LIGHT_NOISE_SD = (8.0, 18.0)
HARD_JPEG_QUALITY = (30, 65)
HARD_SHARPEN = (0.4, 1.5)  # unsharp-mask amount, as phone cameras sharpen before they encode
HARD_SHARPEN_SIGMA = (1.0, 2.0)  # px at scale 1
HARD_LOOKALIKE_P = 0.7  # other cards (or card-like rectangles) around the card
HARD_LOOKALIKES = (1, 5)
# The harsh bucket (#43): the hard look drawn again with these wider ranges, plus a lamp's reflection.
# Misses on photos the models were never tuned on were mostly the detector losing a card under strong
# glare, small and steep, in low light (docs/hard-photos.md), which the hard bucket draws only mildly.
HARSH_AREA = (0.04, 0.25)
HARSH_TILT_DEG = (10.0, 50.0)
HARSH_LOW_LIGHT_P = 0.45
HARSH_EXPOSURE = (0.2, 0.6)  # low light
HARSH_JPEG_QUALITY = (25, 60)
HARSH_LAMP_P = 0.8
HARSH_LAMP = (0.6, 3.0)  # the reflection's peak, in exposures added on top of the lit scene: clips white
HARSH_LAMP_RADIUS = (0.1, 0.6)  # of the card's height in the photo
HARSH_LAMP_SPOTS = ("art", "text", "edge", "corner", "beside")
HARSH_LAMP_SPOT_P = (0.3, 0.2, 0.25, 0.15, 0.1)
HARSH_TABLE_GLOSS = (0.05, 0.5)  # how much of the reflection the table beside the card throws back
# Each effect draws its details from its own random stream, so switching one on or off (`look`) leaves
# the rest of the photo as it was.
_STREAMS = (
    "scene", "card", "glare", "pose", "touching", "lookalikes", "finger", "light", "blur", "noise", "lamp",
    "holder",
)  # fmt: skip
CARD_ASPECT = FACE_H / FACE_W


@dataclass(frozen=True)
class HardLook:
    """The effects of one hard photo, drawn from its seed (`hard_look`); a caller may replace any of them."""

    rotation_deg: float
    tilt_deg: float
    area: float  # the card's share of the photo
    glare: Literal["name", "footer", "both"] | None
    sleeve: str | None  # a HARD_SLEEVE_TINTS key
    finger: Literal["corner", "text"] | None
    defocus_px: float  # 0: sharp
    motion_px: float  # 0: still
    cast: tuple[float, float, float]  # RGB gains
    exposure: float
    noise_sd: float
    sharpen: float  # 0: none
    jpeg_quality: int
    lookalikes: int
    lamp: float = 0.0  # harsh only: the lamp reflection's peak in exposures (0: none)
    lamp_spot: str | None = None  # a HARSH_LAMP_SPOTS entry
    holder: str | None = None  # a HOLDERS entry: never drawn from a seed; set by a caller (`p_holder`)


def _draw_look(rng: np.random.Generator) -> HardLook:
    if rng.random() < HARD_RIGHT_ANGLE_P:
        rotation = 90.0 * int(rng.integers(0, 4)) + rng.normal(0, HARD_RIGHT_ANGLE_SD_DEG)
    else:
        rotation = rng.uniform(0, 360)
    glare = rng.choice(["name", "footer", "both"]) if rng.random() < HARD_GLARE_P else None
    sleeve = rng.choice(list(HARD_SLEEVE_TINTS)) if rng.random() < HARD_SLEEVE_P else None
    finger: Literal["corner", "text"] | None = None
    if rng.random() < HARD_FINGER_P:
        finger = "corner" if rng.random() < 0.6 else "text"
    defocus = rng.uniform(*HARD_DEFOCUS_PX) if rng.random() < HARD_DEFOCUS_P else 0.0
    motion = rng.uniform(*HARD_MOTION_PX) if rng.random() < HARD_MOTION_P else 0.0
    cast = (1.0, 1.0, 1.0)
    if rng.random() < HARD_CAST_P:
        u = rng.uniform(*HARD_CAST)
        cast = [
            (1 + u, 1.0, 1 - u),
            (1 - u, 1.0, 1 + u),
            (1 - u / 2, 1 + u / 2, 1 - u / 2),
            (1 + u / 2, 1 - u / 2, 1 + u / 2),
        ][int(rng.integers(0, 4))]
    low = rng.random() < HARD_LOW_LIGHT_P
    exposure = rng.uniform(*HARD_EXPOSURE) if low else rng.uniform(0.8, 1.15)
    noise = rng.uniform(*(HARD_LOW_LIGHT_NOISE_SD if low else HARD_NOISE_SD))
    lookalikes = (
        int(rng.integers(HARD_LOOKALIKES[0], HARD_LOOKALIKES[1] + 1))
        if rng.random() < HARD_LOOKALIKE_P
        else 0
    )
    return HardLook(
        rotation_deg=float(rotation),
        tilt_deg=float(rng.uniform(*HARD_TILT_DEG)),
        area=float(rng.uniform(*HARD_AREA)),
        glare=None if glare is None else str(glare),  # type: ignore[arg-type]
        sleeve=None if sleeve is None else str(sleeve),
        finger=finger,
        defocus_px=float(defocus),
        motion_px=float(motion),
        cast=tuple(float(c) for c in cast),  # type: ignore[arg-type]
        exposure=float(exposure),
        noise_sd=float(noise),
        sharpen=float(rng.uniform(*HARD_SHARPEN)),
        jpeg_quality=int(rng.integers(HARD_JPEG_QUALITY[0], HARD_JPEG_QUALITY[1] + 1)),
        lookalikes=lookalikes,
    )


def hard_look(seed: int) -> HardLook:
    """The effects `make_photo(face, seed, "hard")` draws for `seed` (start from it to force one)."""
    return _draw_look(np.random.default_rng([seed, _SALT["hard"]]))


def harsh_look(seed: int) -> HardLook:
    """The effects `make_photo(face, seed, "harsh")` draws: a hard look on wider ranges, and a lamp."""
    rng = np.random.default_rng([seed, _SALT["harsh"]])
    look = _draw_look(rng)
    low = rng.random() < HARSH_LOW_LIGHT_P
    lamp = rng.random() < HARSH_LAMP_P
    return replace(
        look,
        area=float(rng.uniform(*HARSH_AREA)),
        tilt_deg=float(rng.uniform(*HARSH_TILT_DEG)),
        exposure=float(rng.uniform(*HARSH_EXPOSURE)) if low else look.exposure,
        noise_sd=float(rng.uniform(*HARD_LOW_LIGHT_NOISE_SD)) if low else look.noise_sd,
        jpeg_quality=int(rng.integers(HARSH_JPEG_QUALITY[0], HARSH_JPEG_QUALITY[1] + 1)),
        lamp=float(rng.uniform(*HARSH_LAMP)) if lamp else 0.0,
        lamp_spot=str(rng.choice(HARSH_LAMP_SPOTS, p=HARSH_LAMP_SPOT_P)) if lamp else None,
    )


def _streams(seed: int, salt: int = _SALT["hard"]) -> dict[str, np.random.Generator]:
    return {name: np.random.default_rng([seed, salt, 1000 + i]) for i, name in enumerate(_STREAMS)}


def _hard_photo(
    face: np.ndarray,
    seed: int,
    card_id: str | None,
    scale: float,
    touching: int,
    look: HardLook | None,
    harsh: bool = False,
) -> Photo:
    drawn = harsh_look(seed) if harsh else hard_look(seed)
    look = drawn if look is None else look
    rng = _streams(seed, _SALT["harsh" if harsh else "hard"])
    n_distract = int(rng["scene"].choice([0, 1, 2], p=[0.4, 0.4, 0.2]))
    img, (W, H) = _scene(rng["scene"], True, n_distract, scale)
    fh, fw = face.shape[:2]
    if look.sleeve is not None:
        rgb, alpha, off = _sleeve(rng["card"], face.astype(np.float32), HARD_SLEEVE_TINTS[look.sleeve])
    else:
        rgb, alpha, off = _bare_card(rng["card"], face.astype(np.float32))
    if look.glare is not None:
        _glare_bands(rng["glare"], rgb, off, fh, look.glare)
    if look.holder is not None:
        rgb, alpha, margin = _in_holder(rng["holder"], rgb, alpha, look.holder)
        off += margin
    inner = np.array([[0, 0], [fw, 0], [fw, fh], [0, fh]], np.float32) + off - 0.5
    hom = _pose(rng["pose"], rgb.shape[1], rgb.shape[0], inner, (W, H), look)
    corners = cv2.perspectiveTransform(inner.reshape(-1, 1, 2), hom).reshape(4, 2).astype(np.float32)
    if touching:
        _touching(rng["touching"], img, corners, touching)
    if look.lookalikes:
        _lookalikes(rng["lookalikes"], img, corners, look.lookalikes)
    shift = tuple(rng["pose"].normal(0, 0.01 * min(W, H), 2))
    _paste(img, rgb, alpha, hom, shadow=rng["pose"].uniform(0.1, 0.5), shadow_shift=shift)
    if look.finger is not None:
        _finger(rng["finger"], img, hom, off, (fw, fh), look.finger, scale)
    lamp = None
    if look.lamp > 0 and look.lamp_spot is not None:
        lamp = _lamp_reflection(rng["lamp"], alpha, hom, off, (fw, fh), corners, (W, H), look)
    image, data = _phone_camera(rng, img, look, scale, lamp)
    return Photo(image=image, corners=corners, card_id=card_id, jpeg=data)


def _lamp_reflection(
    rng: np.random.Generator,
    alpha: np.ndarray,
    hom: np.ndarray,
    off: float,
    face_wh: tuple[int, int],
    corners: np.ndarray,
    photo_wh: tuple[int, int],
    look: HardLook,
) -> np.ndarray:
    """A lamp mirrored in the card's gloss (or its sleeve's): an elliptical lobe with a flat, clipped core,
    centred on the look's spot, full strength over the card and a fraction of it on the table beside.
    Returns the light it adds, in exposures (H x W), for `_phone_camera` to add after the scene's light,
    so at full strength it washes out whatever it covers, edges and corners included."""
    fw, fh = face_wh
    W, H = photo_wh
    spot = look.lamp_spot
    if spot == "art":
        u, v = rng.uniform(0.1, 0.9) * fw, rng.uniform(0.12, 0.55) * fh
    elif spot == "text":
        u, v = rng.uniform(0.1, 0.9) * fw, rng.uniform(0.55, 0.97) * fh
    elif spot in ("edge", "beside"):
        t = rng.uniform(0, 1)
        side = int(rng.integers(0, 4))
        out = rng.uniform(0.05, 0.25) if spot == "beside" else rng.uniform(-0.04, 0.04)
        sides = [(t * fw, -out * fh), (fw * (1 + out), t * fh), (t * fw, fh * (1 + out)), (-out * fw, t * fh)]
        u, v = sides[side]
    else:  # a corner
        u = (rng.uniform(-0.05, 0.12) if rng.random() < 0.5 else rng.uniform(0.88, 1.05)) * fw
        v = (rng.uniform(-0.05, 0.1) if rng.random() < 0.5 else rng.uniform(0.9, 1.05)) * fh
    centre = cv2.perspectiveTransform(np.array([[[u + off, v + off]]], np.float32), hom)[0, 0]
    card_h = 0.5 * (np.linalg.norm(corners[3] - corners[0]) + np.linalg.norm(corners[2] - corners[1]))
    r = rng.uniform(*HARSH_LAMP_RADIUS) * card_h
    ratio, ang, sharp = rng.uniform(0.35, 1.0), rng.uniform(0, math.pi), rng.uniform(0.7, 2.0)
    step = 4  # the lobe is smooth: draw it at a quarter of the size
    yy, xx = np.mgrid[0:H:step, 0:W:step].astype(np.float32)
    du, dv = xx - centre[0], yy - centre[1]
    a = (du * math.cos(ang) + dv * math.sin(ang)) / r
    b = (-du * math.sin(ang) + dv * math.cos(ang)) / (r * ratio)
    lobe = np.exp(-((a * a + b * b) ** sharp))
    lobe = cv2.resize(lobe, (W, H), interpolation=cv2.INTER_LINEAR)
    on_card = cv2.warpPerspective(alpha, hom, (W, H), flags=cv2.INTER_LINEAR)
    gloss = on_card + (1 - on_card) * rng.uniform(*HARSH_TABLE_GLOSS)
    return (lobe * gloss * look.lamp).astype(np.float32)


# ------------------------------------------------------------------------- hard: the card and sleeve
def _bare_card(rng: np.random.Generator, face: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """The card alone: the face with rounded corners, 2 px of transparent margin for antialiasing."""
    fh, fw = face.shape[:2]
    m = 2
    rgb = np.zeros((fh + 2 * m, fw + 2 * m, 3), np.float32)
    alpha = np.zeros(rgb.shape[:2], np.float32)
    rgb[m : m + fh, m : m + fw] = face
    alpha[m : m + fh, m : m + fw] = 1.0
    _round_corners(alpha, m, m, fw, fh, rng.uniform(0.025, 0.05) * fw)
    return rgb, alpha, float(m)


def _sleeve(
    rng: np.random.Generator, face: np.ndarray, tint: tuple[float, float, float], empty: bool = False
) -> tuple[np.ndarray, np.ndarray, float]:
    """The card in a tinted plastic sleeve: a coloured film over the face (sleeves shift every colour the
    embedder sees), a rim around it and bright reflection streaks that wash out whatever they cross.
    `empty`: the sleeve alone, as a collector leaves one on the table (`face` gives only its size)."""
    fh, fw = face.shape[:2]
    m = round(rng.uniform(0.02, 0.05) * fw)
    rgb = np.zeros((fh + 2 * m, fw + 2 * m, 3), np.float32)
    card = np.zeros(rgb.shape[:2], np.float32)
    if not empty:
        rgb[m : m + fh, m : m + fw] = face
        card[m : m + fh, m : m + fw] = 1.0
    _round_corners(card, m, m, fw, fh, rng.uniform(0.025, 0.05) * fw)
    h, w = card.shape
    film = np.ones((h, w), np.float32)
    _round_corners(film, 0, 0, w, h, rng.uniform(2, 12))
    colour = np.asarray(tint, np.float32) * rng.uniform(0.9, 1.05)
    opacity = rng.uniform(*HARD_SLEEVE_FILM)
    rim = np.zeros_like(film)
    cv2.rectangle(rim, (0, 0), (w - 1, h - 1), 1.0, max(1, round(rng.uniform(1.5, 5))))
    # Over the card the film tints; beyond it, the sleeve is a faint film with a darker rim.
    over = film * np.where(card > 0, opacity, rng.uniform(0.1, 0.3) + rim * rng.uniform(0.2, 0.5))
    rgb = (
        rgb * card[..., None] * (1 - over[..., None])
        + colour * np.where(rim[..., None] > 0, 0.6, 1.0) * over[..., None]
    )
    alpha = np.maximum(card, over * film)
    rgb /= np.maximum(alpha, 1e-3)[..., None]
    _streaks(rng, rgb, alpha)
    return rgb, alpha, float(m)


def _streaks(rng: np.random.Generator, rgb: np.ndarray, alpha: np.ndarray) -> None:
    """Bright streaks where plastic mirrors a lamp, over whatever the object covers; in place."""
    h, w = alpha.shape
    yy, xx = np.mgrid[0:h:4, 0:w:4].astype(np.float32)
    for _ in range(int(rng.integers(HARD_SLEEVE_REFLECTIONS[0], HARD_SLEEVE_REFLECTIONS[1] + 1))):
        a = rng.uniform(0, math.pi)
        d = (xx - rng.uniform(0, w)) * math.cos(a) + (yy - rng.uniform(0, h)) * math.sin(a)
        half = rng.uniform(4, 40)  # plastic reflects a lamp as a streak with soft but short edges
        band = np.clip((half - np.abs(d)) / (0.5 * half), 0, 1) * rng.uniform(
            *HARD_SLEEVE_REFLECTION_STRENGTH
        )
        band = cv2.resize(band, (w, h), interpolation=cv2.INTER_LINEAR)
        rgb += (255 - rgb) * (band * (alpha > 0))[..., None]


def _glare_bands(rng: np.random.Generator, rgb: np.ndarray, off: float, face_h: int, where: str) -> None:
    """A lamp's reflection lying across the name row and/or the footer: the lines the print reader needs,
    which is what made real hard photos `print_unreadable` (#13). Blends toward white, in place."""
    h, w = rgb.shape[:2]
    rows = {"name": [NAME_ROW], "footer": [FOOTER_ROW], "both": [NAME_ROW, FOOTER_ROW]}[where]
    yy, xx = np.mgrid[0:h:2, 0:w:2].astype(np.float32)
    total = np.zeros(yy.shape, np.float32)
    for lo, hi in rows:
        cy = off + rng.uniform(lo, hi) * face_h / FACE_H
        tilt = math.radians(rng.uniform(-HARD_GLARE_TILT_DEG, HARD_GLARE_TILT_DEG))
        d = (yy - cy) * math.cos(tilt) - (xx - w / 2) * math.sin(tilt)  # distance from the band's axis
        width = rng.uniform(*HARD_GLARE_WIDTH) * face_h / FACE_H
        along = 1 - rng.uniform(0, 0.4) * ((xx - rng.uniform(0, w)) / w) ** 2  # not perfectly even
        plateau = np.exp(-((d / width) ** 4))  # a lamp's reflection: flat-topped, soft-edged
        total = np.maximum(total, plateau * along * rng.uniform(*HARD_GLARE_STRENGTH))
    band = cv2.resize(total, (w, h), interpolation=cv2.INTER_LINEAR)
    rgb += (255 - rgb) * np.clip(band, 0, 1)[..., None]


# ---------------------------------------------------------------------------- hard: where the card lies
def _pose(
    rng: np.random.Generator,
    obj_w: int,
    obj_h: int,
    inner: np.ndarray,
    photo_wh: tuple[int, int],
    look: HardLook,
) -> np.ndarray:
    """Homography from card-layer px to photo px: the look's rotation and tilt, the face quad covering
    `look.area` of the photo (shrunk only if it cannot fit), all of it inside the frame."""
    W, H = photo_wh
    src = np.array([[0, 0], [obj_w, 0], [obj_w, obj_h], [0, obj_h]], np.float32) - 0.5
    dst = _project(rng, obj_w, obj_h, math.radians(look.rotation_deg), math.radians(look.tilt_deg))
    hom = cv2.getPerspectiveTransform(src, dst.astype(np.float32))
    q = cv2.perspectiveTransform(inner.reshape(-1, 1, 2).astype(np.float32), hom).reshape(-1, 2)
    outer = dst * math.sqrt(look.area * W * H / cv2.contourArea(q))
    margin = 0.02 * min(W, H)
    span = outer.max(0) - outer.min(0)
    outer *= min(1.0, float(np.min((np.array([W, H]) - 2 * margin) / span)))
    lo, hi = outer.min(0), outer.max(0)
    offset = margin - lo + rng.random(2) * np.maximum(np.array([W, H]) - 2 * margin - (hi - lo), 0)
    return cv2.getPerspectiveTransform(src, (outer + offset).astype(np.float32))


def _lookalike(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A card-like face (border, name bar, art box, text lines, footer) as RGB + alpha: what lies next to a
    collector's card on the table, and what the detector must not take for it."""
    w, h = 300, round(300 * CARD_ASPECT)
    borders = ((235, 200, 60), (200, 200, 205), (245, 245, 240), (25, 25, 30), (40, 70, 160))
    rgb = np.zeros((h, w, 3), np.float32) + np.asarray(
        borders[int(rng.integers(0, len(borders)))], np.float32
    )
    b = int(rng.integers(8, 16))
    rgb[b : h - b, b : w - b] = _colour(rng, 60, 240)
    rgb[2 * b + 30 : h // 2, 2 * b : w - 2 * b] = _ramp(
        _fractal(rng, w - 4 * b, h // 2 - 2 * b - 30, 3), _colour(rng), _colour(rng)
    )
    dark = (20.0, 20.0, 20.0)
    _text(rgb, _words(rng, 1), (2 * b, 2 * b + 18), cv2.FONT_HERSHEY_DUPLEX, 0.7, dark, 2)
    for y in range(h // 2 + 20, h - 60, int(rng.integers(18, 30))):
        _text(rgb, _words(rng, 3), (2 * b, y), cv2.FONT_HERSHEY_SIMPLEX, 0.4, dark, 1)
    _text(rgb, _words(rng, 2), (2 * b, h - 2 * b), cv2.FONT_HERSHEY_SIMPLEX, 0.35, dark, 1)
    alpha = np.ones((h, w), np.float32)
    _round_corners(alpha, 0, 0, w, h, rng.uniform(0.025, 0.05) * w)
    return rgb, alpha


def _lookalikes(rng: np.random.Generator, img: np.ndarray, card: np.ndarray | None, count: int) -> None:
    """Up to `count` card-sized look-alikes around the card (quad `card`, photo px; None: anywhere), placed
    apart from it and from each other, maybe hanging off the frame: a table of cards, a binder page."""
    H, W = img.shape[:2]
    if card is not None:
        card_h = card_height(card)
    else:
        card_h = math.sqrt(rng.uniform(*HARD_AREA) * W * H * CARD_ASPECT)
    taken = [] if card is None else [card.astype(np.float32)]
    for _ in range(count):
        rgb, alpha = _lookalike(rng)
        h, w = alpha.shape
        src = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32) - 0.5
        s = card_h * rng.uniform(0.8, 1.1) / h
        ang = rng.uniform(0, 2 * math.pi)
        rot = np.array([[math.cos(ang), -math.sin(ang)], [math.sin(ang), math.cos(ang)]]) * s
        for _try in range(12):
            centre = (0.1 + 0.8 * rng.random(2)) * [W, H]  # mostly in frame
            dst = ((src - [w / 2, h / 2]) @ rot.T + centre + rng.normal(0, 0.01 * card_h, (4, 2))).astype(
                np.float32
            )
            if all(cv2.intersectConvexConvex(dst, q)[0] < 1.0 for q in taken):
                break
        else:
            continue
        taken.append(dst)
        hom = cv2.getPerspectiveTransform(src, dst)
        _paste(img, rgb, alpha, hom, shadow=rng.uniform(0, 0.4), shadow_shift=tuple(rng.normal(0, 4, 2)))


def _finger(
    rng: np.random.Generator,
    img: np.ndarray,
    hom: np.ndarray,
    off: float,
    face_wh: tuple[int, int],
    where: str,
    scale: float,
) -> None:
    """A finger or thumb holding the card: over one corner, or over the name row or footer, coming in from
    outside the card. It hides what the detector's corners and the print reader rely on."""
    fw, fh = face_wh
    if where == "corner":
        cx, cy = [(0, 0), (fw, 0), (fw, fh), (0, fh)][int(rng.integers(0, 4))]
        inward = rng.uniform(0.1, 0.2) * fw
        tip_face = (cx + (inward if cx == 0 else -inward), cy + (inward if cy == 0 else -inward))
    else:
        lo, hi = NAME_ROW if rng.random() < 0.5 else FOOTER_ROW
        tip_face = (rng.uniform(0.3, 0.7) * fw, rng.uniform(lo, hi) * fh / FACE_H)
    pts = np.array([tip_face, (fw / 2, fh / 2), (0, 0), (fw, 0)], np.float32) + off
    tip, centre, tl, tr = cv2.perspectiveTransform(pts.reshape(-1, 1, 2), hom).reshape(-1, 2)
    card_w = float(np.linalg.norm(tr - tl))
    away = tip - centre
    if where == "text":  # from the nearer long side, roughly across the card
        side = (tr - tl) / max(card_w, 1e-6)
        away = side * (1 if np.dot(away, side) >= 0 else -1)
    ang = math.atan2(away[1], away[0]) + rng.normal(0, 0.3)
    direction = np.array([math.cos(ang), math.sin(ang)])
    width = rng.uniform(*HARD_FINGER_WIDTH) * card_w
    base = tip + direction * card_w * 1.5
    H, W = img.shape[:2]
    pad = int(width)
    x0 = int(max(0, min(tip[0], base[0]) - pad))
    x1 = int(min(W, max(tip[0], base[0]) + pad))
    y0 = int(max(0, min(tip[1], base[1]) - pad))
    y1 = int(min(H, max(tip[1], base[1]) + pad))
    if x1 <= x0 or y1 <= y0:
        return
    mask: np.ndarray = np.zeros((y1 - y0, x1 - x0), np.float32)
    p0 = (round(tip[0] - x0 + direction[0] * width / 2), round(tip[1] - y0 + direction[1] * width / 2))
    p1 = (round(base[0] - x0), round(base[1] - y0))
    cv2.line(mask, p0, p1, 1.0, max(2, round(width)), cv2.LINE_AA)  # thick lines end in round caps
    mask = cv2.GaussianBlur(mask, (0, 0), 0.8 * scale + 0.3)
    # Rounded shading across the finger: bright along its axis, darker toward its sides.
    yy, xx = np.mgrid[y0:y1, x0:x1].astype(np.float32)
    across = np.abs((xx - tip[0]) * -direction[1] + (yy - tip[1]) * direction[0]) / (width / 2)
    shade = 1.0 - 0.35 * np.clip(across, 0, 1) ** 2
    tone = np.asarray(HARD_FINGER_TONES[int(rng.integers(0, len(HARD_FINGER_TONES)))], np.float32)
    colour = tone * rng.uniform(0.8, 1.1) * shade[..., None]
    sub = img[y0:y1, x0:x1]
    sub += (colour - sub) * mask[..., None]


# ------------------------------------------------------------------------------ hard: the phone camera
def _light(
    rng: np.random.Generator, img: np.ndarray, exposure: float, cast: tuple[float, float, float]
) -> None:
    """Uneven lamp light, a vignette, the exposure (low light: the sensor gets too few photons) and a
    white-balance error (warm lamps, cool shade), in place."""
    H, W = img.shape[:2]
    yy, xx = np.mgrid[0:32, 0:32].astype(np.float32) / 31 - 0.5
    a = rng.uniform(0, 2 * math.pi)
    light = (
        1
        + rng.uniform(0, 0.6) * (xx * math.cos(a) + yy * math.sin(a))
        - rng.uniform(0, 0.5) * (xx**2 + yy**2)
    )
    light = cv2.resize(light * exposure, (W, H), interpolation=cv2.INTER_LINEAR)
    img *= light[..., None] * np.asarray(cast, np.float32)


def _defocus(img: np.ndarray, radius: float) -> np.ndarray:
    """A lens focused off the card spreads each point into a disc (not a Gaussian): soft print, same art."""
    if radius < 0.5:
        return img
    r = math.ceil(radius)
    k = np.zeros((2 * r + 1, 2 * r + 1), np.float32)
    cv2.circle(k, (r, r), max(1, round(radius)), 1.0, -1, cv2.LINE_AA)
    return cv2.filter2D(img, -1, k / k.sum())


def _motion(rng: np.random.Generator, img: np.ndarray, length: float) -> np.ndarray:
    """A hand that moved during the exposure: a line-shaped smear in one direction."""
    if length < 1.5:
        return img
    n = int(length) | 1
    k = np.zeros((n, n), np.float32)
    c = n // 2
    ang = rng.uniform(0, math.pi)
    dx, dy = c * math.cos(ang), c * math.sin(ang)
    cv2.line(k, (round(c - dx), round(c - dy)), (round(c + dx), round(c + dy)), 1.0, 1, cv2.LINE_AA)
    return cv2.filter2D(img, -1, k / k.sum())


def _noise(rng: np.random.Generator, img: np.ndarray, sd: float) -> None:
    """Sensor noise, luminance at full resolution and chroma at half (as phone sensors show it), in place."""
    H, W = img.shape[:2]
    chroma = rng.standard_normal((H // 2, W // 2, 3), dtype=np.float32) * (sd * 0.5)
    img += cv2.resize(chroma, (W, H), interpolation=cv2.INTER_LINEAR)
    img += (rng.standard_normal((H, W), dtype=np.float32) * (sd * 0.8))[..., None]


def _unsharp(img: np.ndarray, amount: float, sigma: float) -> np.ndarray:
    """Phone sharpening (an unsharp mask): halos along edges and amplified noise, before the JPEG."""
    if amount <= 0:
        return img
    return cv2.addWeighted(img, 1 + amount, cv2.GaussianBlur(img, (0, 0), sigma), -amount, 0)


def _jpeg(img: np.ndarray, quality: int) -> tuple[np.ndarray, bytes]:
    """The photo as the phone stores it: uint8 RGB decoded back from a JPEG of `quality`, and the bytes."""
    out = np.clip(img, 0, 255).astype(np.uint8)
    ok, buf = cv2.imencode(".jpg", out[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, quality])
    decoded = cv2.imdecode(buf, cv2.IMREAD_COLOR)
    assert ok and decoded is not None
    return decoded[..., ::-1].copy(), buf.tobytes()


def _phone_camera(
    rng: dict[str, np.random.Generator],
    img: np.ndarray,
    look: HardLook,
    scale: float,
    lamp: np.ndarray | None = None,
) -> tuple[np.ndarray, bytes]:
    """Light, blur, noise, sharpening and JPEG in the order a phone applies them; lengths follow `scale`.
    `lamp` (exposures, H x W) is a reflection added after the scene's light, so dim light leaves it bright."""
    _light(rng["light"], img, look.exposure, look.cast)
    if lamp is not None:
        img += (255.0 * lamp)[..., None]
    img = _defocus(img, look.defocus_px * scale)
    img = _motion(rng["blur"], img, look.motion_px * scale)
    _noise(rng["noise"], img, look.noise_sd)
    sigma = rng["blur"].uniform(*HARD_SHARPEN_SIGMA) * scale
    img = _unsharp(img, look.sharpen, sigma)
    return _jpeg(img, look.jpeg_quality)


def _hard_nocard(seed: int, scale: float) -> Photo:
    """A hard scene with no card: look-alikes, a tinted lamp, low light, blur and a low-quality JPEG."""
    look = hard_look(seed)
    rng = _streams(seed)
    img, _ = _scene(
        rng["scene"], True, int(rng["scene"].choice([0, 1, 2, 3], p=[0.15, 0.4, 0.3, 0.15])), scale
    )
    _lookalikes(rng["lookalikes"], img, None, look.lookalikes)
    image, data = _phone_camera(rng, img, look, scale)
    return Photo(image=image, corners=None, card_id=None, jpeg=data)


# ----------------------------------------------------------------------- harsh: no card face (#43)
# What a collector's table holds besides cards, under the harsh bucket's lamp: a detector that learnt the
# glare on harsh photos (v10) also took these for cards (docs/hard-photos.md), and the embedder then found
# a catalog face close to a card back or an empty sleeve. None of them has a face to name, so a photo of
# them is a no-card photo; #48's pages will name backs and empty pockets on their own.
EMPTY_OBJECTS = ("back", "sleeve", "toploader", "binder")
EMPTY_OBJECT_P = (0.35, 0.25, 0.2, 0.2)
EMPTY_BINDER_GRIDS = ((2, 2), (3, 3), (3, 4))  # rows, columns of pockets
EMPTY_BINDER_BACK_P = 0.3  # a pocket holding a card seen from the back
EMPTY_BINDER_AREA = (0.35, 0.8)  # the page's share of the photo


def _card_back(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A card seen from the back, as RGB + alpha: a wide border, a swirled field, a round emblem and maybe a
    word. Backs differ between games, so each part is drawn from a range rather than one design."""
    w, h = FACE_W // 2, round(FACE_W // 2 * CARD_ASPECT)
    border = [(30, 50, 140), (20, 20, 25), (110, 30, 35), (30, 90, 50), (200, 170, 60)][
        int(rng.integers(0, 5))
    ]
    rgb = np.zeros((h, w, 3), np.float32) + np.asarray(border, np.float32) * rng.uniform(0.8, 1.2)
    b = int(rng.uniform(0.04, 0.09) * w)
    yy, xx = np.mgrid[0 : h - 2 * b, 0 : w - 2 * b].astype(np.float32)
    cx, cy = (w - 2 * b) / 2, (h - 2 * b) / 2
    r = np.hypot(xx - cx, yy - cy) / max(cx, cy)
    swirl = np.arctan2(yy - cy, xx - cx) + rng.uniform(1, 6) * r
    t = 0.5 + 0.5 * np.sin(rng.integers(2, 9) * swirl) * np.exp(-r * rng.uniform(0.3, 1.5))
    c1, c2 = _colour(rng, 20, 140), _colour(rng, 60, 220)
    field = _ramp(t, c1, c2)
    if rng.random() < 0.4:  # a printed pattern instead of a swirl
        field = _ramp(_fractal(rng, w - 2 * b, h - 2 * b, 3), c1, c2)
    rgb[b : h - b, b : w - b] = field
    if rng.random() < 0.8:  # a round emblem in the middle: two halves and a band
        cc, rad = (w // 2, h // 2), int(rng.uniform(0.15, 0.3) * w)
        cv2.circle(rgb, cc, rad, tuple(float(c) for c in _colour(rng)), -1, cv2.LINE_AA)
        cv2.ellipse(rgb, cc, (rad, rad), 0, 0, 180, (240.0, 240.0, 240.0), -1, cv2.LINE_AA)
        band = max(2, rad // 6)
        cv2.rectangle(
            rgb, (cc[0] - rad, cc[1] - band // 2), (cc[0] + rad, cc[1] + band // 2), (20.0,) * 3, -1
        )
        cv2.circle(rgb, cc, max(3, rad // 3), (20.0,) * 3, -1, cv2.LINE_AA)
        cv2.circle(rgb, cc, max(2, rad // 4), (240.0,) * 3, -1, cv2.LINE_AA)
    if rng.random() < 0.6:
        word = _words(rng, 1)
        _text(rgb, word, (2 * b, int(h * rng.uniform(0.15, 0.3))), cv2.FONT_HERSHEY_TRIPLEX, 1.0,
              tuple(float(c) for c in _colour(rng, 150, 255)), 2)  # fmt: skip
    alpha = np.ones((h, w), np.float32)
    _round_corners(alpha, 0, 0, w, h, rng.uniform(0.025, 0.05) * w)
    return rgb, alpha


def _toploader(rng: np.random.Generator, fw: int, fh: int) -> tuple[np.ndarray, np.ndarray, float]:
    """An empty toploader: a rigid clear case a little larger than a card, faintly tinted, with thick bright
    edges, the thumb notch at its open end and the streaks a lamp leaves on it."""
    m = round(rng.uniform(0.04, 0.08) * fw)
    h, w = fh + 2 * m, fw + 2 * m
    tint = np.asarray(HARD_SLEEVE_TINTS["clear"], np.float32) * rng.uniform(0.85, 1.0)
    rgb = np.zeros((h, w, 3), np.float32) + tint
    alpha = np.full((h, w), rng.uniform(0.06, 0.2), np.float32)
    edge = max(3, round(rng.uniform(0.012, 0.03) * fw))
    cv2.rectangle(alpha, (0, 0), (w - 1, h - 1), float(rng.uniform(0.4, 0.8)), edge)
    inner = max(1, edge // 3)  # the inner wall of the case throws a thin dark line
    cv2.rectangle(rgb, (edge, edge), (w - 1 - edge, h - 1 - edge), (60.0, 60.0, 65.0), inner)
    cv2.rectangle(alpha, (edge, edge), (w - 1 - edge, h - 1 - edge), float(rng.uniform(0.2, 0.5)), inner)
    notch = round(rng.uniform(0.08, 0.14) * fw)
    cv2.ellipse(
        alpha, (w // 2, 0), (notch, notch // 2), 0, 0, 180, float(rng.uniform(0.3, 0.6)), edge // 2 + 1
    )
    _round_corners(alpha, 0, 0, w, h, rng.uniform(2, 8))
    _streaks(rng, rgb, alpha)
    return rgb, alpha, float(m)


def _binder_page(rng: np.random.Generator, fw: int, fh: int) -> tuple[np.ndarray, np.ndarray, float]:
    """A binder page of empty pockets (some holding a card back): a hazy film over the table, welded seams
    between the pockets, punched holes down one side, and streaks of reflected light."""
    rows, cols = EMPTY_BINDER_GRIDS[int(rng.integers(0, len(EMPTY_BINDER_GRIDS)))]
    scale = 0.5  # pockets at half the face's size: the page is large and lies far from the lens
    pw, ph = round(fw * scale * 1.06), round(fh * scale * 1.04)
    seam = max(3, round(rng.uniform(0.03, 0.06) * pw))
    side = round(rng.uniform(0.12, 0.2) * pw)  # the holed strip
    w, h = side + cols * pw + (cols + 1) * seam, rows * ph + (rows + 1) * seam
    tint = np.asarray(HARD_SLEEVE_TINTS["clear"], np.float32) * rng.uniform(0.85, 1.0)
    rgb = np.zeros((h, w, 3), np.float32) + tint
    alpha = np.full((h, w), rng.uniform(0.08, 0.3), np.float32)
    seam_alpha, seam_colour = float(rng.uniform(0.4, 0.8)), tint * rng.uniform(0.75, 1.0)
    for r in range(rows + 1):
        y = r * (ph + seam)
        alpha[y : y + seam] = seam_alpha
        rgb[y : y + seam] = seam_colour
    for c in range(cols + 1):
        x = side + c * (pw + seam)
        alpha[:, x : x + seam] = seam_alpha
        rgb[:, x : x + seam] = seam_colour
    alpha[:, :side] = seam_alpha
    for k in range(3):
        cv2.circle(alpha, (side // 2, round(h * (k + 1) / 4)), max(3, side // 4), 0.0, -1, cv2.LINE_AA)
    for r in range(rows):
        for c in range(cols):
            if rng.random() >= EMPTY_BINDER_BACK_P:
                continue
            back, back_alpha = _card_back(rng)
            bw, bh = pw - 2, ph - 2
            x0, y0 = side + seam + c * (pw + seam) + 1, seam + r * (ph + seam) + 1
            back = cv2.resize(back, (bw, bh), interpolation=cv2.INTER_AREA)
            a = cv2.resize(back_alpha, (bw, bh), interpolation=cv2.INTER_AREA)[..., None]
            film = alpha[y0 : y0 + bh, x0 : x0 + bw, None]
            # The film over the back: the back shows through, tinted as much as the film is opaque.
            rgb[y0 : y0 + bh, x0 : x0 + bw] = (
                back * a * (1 - film) + rgb[y0 : y0 + bh, x0 : x0 + bw] * film
            ) / np.maximum(a * (1 - film) + film, 1e-3)
            alpha[y0 : y0 + bh, x0 : x0 + bw] = np.maximum(film[..., 0], a[..., 0])
    _streaks(rng, rgb, alpha)
    return rgb, alpha, 0.0


# #43: a card photographed in its holder. The held-out maker's photos of cards in toploaders and binder
# pockets were the detector's worst (docs/hard-photos.md), and training.synth drew holders only empty.
HOLDERS = ("toploader", "pocket")


def held_look(seed: int) -> HardLook:
    """#43's `held` evaluation photos (the detector's and the embedder's alike): the harsh look of `seed`
    with the card in a toploader or a binder pocket, alternately."""
    return replace(harsh_look(seed), holder=HOLDERS[seed % len(HOLDERS)])


POCKET_SLIVER = (0.08, 0.3)  # how much of the next pockets a pocket photo shows, of the card's width
POCKET_NEIGHBOUR_P = 0.5  # a next pocket's sliver holds a card (a back or a look-alike face)


def _in_holder(
    rng: np.random.Generator, rgb: np.ndarray, alpha: np.ndarray, kind: str
) -> tuple[np.ndarray, np.ndarray, float]:
    """The card layer (`rgb`, `alpha`: a bare or sleeved card) inside a toploader or a binder pocket: the
    holder's clear plastic over the card and around it, with its thick bright edges (a toploader's walls, a
    pocket's welded seams) just outside the card's own, which a detector must not take for its outline.
    Returns the new layer and how far the old one moved into it (px, both ways)."""
    h, w = alpha.shape
    plastic, cover, margin = _toploader(rng, w, h) if kind == "toploader" else _pocket(rng, w, h)
    m = round(margin)
    card, card_alpha = np.zeros_like(plastic), np.zeros_like(cover)
    card[m : m + h, m : m + w], card_alpha[m : m + h, m : m + w] = rgb, alpha
    # The plastic over the card: premultiplied "over", then back to straight colour.
    out_alpha = cover + card_alpha * (1 - cover)
    out = plastic * cover[..., None] + card * (card_alpha * (1 - cover))[..., None]
    return out / np.maximum(out_alpha, 1e-3)[..., None], out_alpha, float(m)


def _pocket(rng: np.random.Generator, fw: int, fh: int) -> tuple[np.ndarray, np.ndarray, float]:
    """A binder pocket for a card layer of fw x fh px: a hazy film, the welded seams around the pocket a
    little outside the card, and beyond them a sliver of the next pockets, each empty or holding a card (a
    back, or a card-like face) under the same film. Returns RGB, alpha and the card layer's margin in it."""
    seam = max(3, round(rng.uniform(0.03, 0.06) * fw))
    slack = max(1, round(rng.uniform(0.01, 0.03) * fw))
    sliver = round(rng.uniform(*POCKET_SLIVER) * fw)
    m = sliver + seam + slack
    h, w = fh + 2 * m, fw + 2 * m
    tint = np.asarray(HARD_SLEEVE_TINTS["clear"], np.float32) * rng.uniform(0.85, 1.0)
    film = float(rng.uniform(0.08, 0.3))
    rgb = np.zeros((h, w, 3), np.float32) + tint
    alpha = np.full((h, w), film, np.float32)
    # The next pockets' slivers (above, right, below, left), some holding a card under the film: each the
    # edge of that card nearest this pocket, as (rows, columns) here and in the other card.
    slivers = [
        ((0, sliver), (m, m + fw), (fh - sliver, fh), (0, fw)),
        ((m, m + fh), (w - sliver, w), (0, fh), (0, sliver)),
        ((h - sliver, h), (m, m + fw), (0, sliver), (0, fw)),
        ((m, m + fh), (0, sliver), (0, fh), (fw - sliver, fw)),
    ]
    for (r0, r1), (c0, c1), (o_r0, o_r1), (o_c0, o_c1) in slivers:
        if sliver < 2 or rng.random() >= POCKET_NEIGHBOUR_P:
            continue
        other, _ = _card_back(rng) if rng.random() < 0.5 else _lookalike(rng)
        other = cv2.resize(other, (fw, fh), interpolation=cv2.INTER_AREA)
        rgb[r0:r1, c0:c1] = other[o_r0:o_r1, o_c0:o_c1] * (1 - film) + tint * film
        alpha[r0:r1, c0:c1] = 1.0
    seam_alpha, seam_colour = float(rng.uniform(0.4, 0.8)), tint * rng.uniform(0.75, 1.0)
    ring = np.zeros((h, w), np.uint8)
    cv2.rectangle(ring, (sliver, sliver), (w - 1 - sliver, h - 1 - sliver), 1, seam)
    rgb[ring > 0] = seam_colour
    alpha[ring > 0] = np.maximum(alpha[ring > 0], seam_alpha)
    _streaks(rng, rgb, alpha)
    return rgb, alpha, float(m)


# #43: holofoil. Many real cards are printed on foil, whose rainbow sheen moves with the light; the held-out
# maker's foil cards were most of its standard photos' detector misses (docs/hard-photos.md); training.synth's
# faces were all plain ink. A property of the card, so it is applied to the face before the photo is made.
FOIL_PLACES = ("art", "frame", "whole")  # holo (the art window), reverse holo (all but the art), full art
FOIL_STRENGTH = (0.15, 0.5)  # how far toward the rainbow sheen the foiled area goes
FOIL_PERIOD = (0.08, 0.35)  # one rainbow's width, of the face's height
ART_BOX = (40 / FACE_W, 88 / FACE_H, 560 / FACE_W, 420 / FACE_H)  # cardrender's art window, of the face
FOIL_SALT = 29  # training's foil draws `holofoil(face, default_rng([seed, FOIL_SALT]))`: its own stream


def holofoil(face: np.ndarray, rng: np.random.Generator, place: str | None = None) -> np.ndarray:
    """`face` (HxWx3 uint8) printed on foil: rainbow bands at a slant, bright and dark as the foil turns
    to or from the light, and a glitter of sparkles, over the art window, everything but it, or the whole
    face (`place`, else drawn). Returns a new face; the print stays legible under it."""
    h, w = face.shape[:2]
    place = str(rng.choice(FOIL_PLACES)) if place is None else place
    region = np.zeros((h, w), np.float32)
    x0, y0, x1, y1 = (round(v * n) for v, n in zip(ART_BOX, (w, h, w, h), strict=True))
    if place == "art":
        region[y0:y1, x0:x1] = 1.0
    else:
        region[:] = 1.0
        if place == "frame":
            region[y0:y1, x0:x1] = 0.0
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    angle = rng.uniform(0, math.pi)
    t = (xx * math.cos(angle) + yy * math.sin(angle)) / (rng.uniform(*FOIL_PERIOD) * h) + rng.uniform(0, 1)
    hue = (t % 1.0) * 180
    hsv = np.stack([hue, np.full_like(hue, rng.uniform(120, 220)), np.full_like(hue, 235)], -1)
    rainbow = cv2.cvtColor(hsv.astype(np.uint8), cv2.COLOR_HSV2RGB).astype(np.float32)
    # the foil's facets catch the light unevenly: a slow brightness swell and a glitter of sparkles
    swell = 0.75 + 0.5 * np.sin(2 * math.pi * (t * rng.uniform(0.2, 0.6)) + rng.uniform(0, 2 * math.pi))
    glints = (rng.random((h, w)) < rng.uniform(0.001, 0.01)).astype(np.float32)
    sparkle = cv2.GaussianBlur(glints, (0, 0), 1.0) * 255 * 4
    strength = rng.uniform(*FOIL_STRENGTH) * region[..., None]
    base = face.astype(np.float32)
    foiled = base * (1 - strength) + (0.5 * base + 0.5 * rainbow) * swell[..., None] * strength
    foiled += (sparkle * region)[..., None] * strength
    return np.clip(foiled, 0, 255).astype(np.uint8)


def empty_object(seed: int) -> str:
    """Which object `make_empty_photo(seed)` draws: one of EMPTY_OBJECTS."""
    rng = np.random.default_rng([seed, _SALT["empty"]])
    return str(rng.choice(EMPTY_OBJECTS, p=EMPTY_OBJECT_P))


def make_empty_photo(seed: int, scale: float = 1.0, kind: str | None = None) -> Photo:
    """A harsh photo with no card face: a card back, an empty sleeve, an empty toploader or a binder page of
    empty pockets and backs, under the harsh bucket's lamp, light, blur and JPEG, with look-alikes around.
    `kind` forces the object (default: `empty_object(seed)`); the rest of the photo stays as drawn."""
    look = harsh_look(seed)
    rng = _streams(seed, _SALT["empty"])
    kind = empty_object(seed) if kind is None else kind
    img, (W, H) = _scene(rng["scene"], True, int(rng["scene"].choice([0, 1, 2], p=[0.4, 0.4, 0.2])), scale)
    fw, fh = FACE_W, FACE_H
    if kind == "back":
        rgb, alpha = _card_back(rng["card"])
        rgb = cv2.resize(rgb, (fw + 4, fh + 4), interpolation=cv2.INTER_LINEAR)
        alpha = cv2.resize(alpha, (fw + 4, fh + 4), interpolation=cv2.INTER_LINEAR)
        off = 2.0
    elif kind == "sleeve":
        tint = HARD_SLEEVE_TINTS[str(rng["card"].choice(list(HARD_SLEEVE_TINTS)))]
        rgb, alpha, off = _sleeve(rng["card"], np.zeros((fh, fw, 3), np.float32), tint, empty=True)
    elif kind == "toploader":
        rgb, alpha, off = _toploader(rng["card"], fw, fh)
    else:
        rgb, alpha, off = _binder_page(rng["card"], fw, fh)
        fh, fw = alpha.shape
        look = replace(
            look, area=float(rng["pose"].uniform(*EMPTY_BINDER_AREA)), tilt_deg=look.tilt_deg * 0.6
        )
    inner = np.array([[0, 0], [fw, 0], [fw, fh], [0, fh]], np.float32) + off - 0.5
    hom = _pose(rng["pose"], rgb.shape[1], rgb.shape[0], inner, (W, H), look)
    corners = cv2.perspectiveTransform(inner.reshape(-1, 1, 2), hom).reshape(4, 2).astype(np.float32)
    if look.lookalikes and kind != "binder":
        _lookalikes(rng["lookalikes"], img, corners, look.lookalikes)
    _paste(img, rgb, alpha, hom, shadow=rng["pose"].uniform(0.0, 0.4) * float(alpha.mean()))
    if look.finger is not None and kind != "binder":
        _finger(rng["finger"], img, hom, off, (fw, fh), look.finger, scale)
    lamp = None
    if look.lamp > 0 and look.lamp_spot is not None:
        gloss = (alpha > 0.01).astype(np.float32)  # clear plastic mirrors a lamp as a card's gloss does
        lamp = _lamp_reflection(rng["lamp"], gloss, hom, off, (fw, fh), corners, (W, H), look)
    image, data = _phone_camera(rng, img, look, scale, lamp)
    return Photo(image=image, corners=None, card_id=None, jpeg=data, back=corners if kind == "back" else None)


# ------------------------------------------------------------------------------------------ preview
def draw_corners(
    image: np.ndarray, corners: np.ndarray | None, colour: tuple[int, int, int] = (0, 255, 0)
) -> np.ndarray:
    """A copy of `image` with the quad drawn and its first corner (TL) marked red."""
    out = image.copy()
    if corners is not None:
        pts = np.round(corners).astype(np.int32)
        cv2.polylines(out, [pts], True, colour, 2, cv2.LINE_AA)
        cv2.circle(out, tuple(int(v) for v in pts[0]), 8, (255, 0, 0), -1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write preview synthetic photos with their corners drawn")
    parser.add_argument("--faces", type=Path, required=True, help="a render folder: <card id>/high.jpg")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--difficulty", choices=DIFFICULTIES, default="standard")
    parser.add_argument(
        "--nocard",
        type=int,
        default=0,
        help="also write this many no-card photos (hard ones as --difficulty)",
    )
    parser.add_argument(
        "--empty",
        type=int,
        default=0,
        help="also write this many harsh photos of card backs and empty holders",
    )
    parser.add_argument("--seed-base", type=int, default=0)
    args = parser.parse_args(argv)
    faces = sorted(args.faces.glob("*/high.jpg"))
    if not faces:
        parser.error(f"no */high.jpg under {args.faces}")
    args.out.mkdir(parents=True, exist_ok=True)
    for i in range(args.count):
        seed = args.seed_base + i
        path = faces[(seed * 7919) % len(faces)]
        photo = make_photo(read_face(path), seed, args.difficulty, path.parent.name)
        name = args.out / f"{args.difficulty}-{seed}.jpg"
        cv2.imwrite(str(name), draw_corners(photo.image, photo.corners)[..., ::-1])
    for i in range(args.nocard):
        photo = make_nocard_photo(
            args.seed_base + i, hard_bucket="hard" if args.difficulty == "hard" else "hard-v1"
        )
        cv2.imwrite(str(args.out / f"nocard-{args.seed_base + i}.jpg"), photo.image[..., ::-1])
    for i in range(args.empty):
        photo = make_empty_photo(args.seed_base + i)
        cv2.imwrite(str(args.out / f"empty-{args.seed_base + i}.jpg"), photo.image[..., ::-1])
    print(f"wrote {args.count + args.nocard + args.empty} photos to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
