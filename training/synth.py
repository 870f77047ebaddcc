"""Deterministic synthetic phone photos of cards: the detector's only training and benchmark data.

No labelled phone photos exist, so every photo is drawn from a rendered card face and a seed. All randomness
comes from one `numpy.random.default_rng` per photo, so the same face, seed and difficulty give the same
pixels on every machine.

Seed ranges (keep them apart, or a benchmark measures memorisation):
  * training uses seeds < 1_000_000 (`TRAIN_SEED_LIMIT`); 990_000..999_999 are kept for validation;
  * benchmarks and tests use seeds >= 10_000_000 (`BENCH_SEED_BASE`); never train on those.

Preview (writes JPEGs with the true corners drawn, TL in red):
    python -m training.synth --faces ~/.cache/cardcat/renders/catalog --out /tmp/synth --count 8 \
        [--difficulty hard] [--nocard 4]
"""

from __future__ import annotations

import argparse
import math
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import cv2
import numpy as np

from models.geometry import read_face

Difficulty = Literal["standard", "hard"]

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
_SALT = {"standard": 11, "hard": 23, "nocard": 37}


@dataclass
class Photo:
    """A synthetic photo; `corners` are the face's TL,TR,BR,BL in photo px (None: no card in it)."""

    image: np.ndarray
    corners: np.ndarray | None
    card_id: str | None = None


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
) -> Photo:
    """A phone photo of `face` (HxWx3 uint8 RGB); the same face, seed and difficulty give the same pixels.

    Training-only knobs (the defaults give the benchmark photos, pixel for pixel): `scale` composes the
    photo that much smaller (much faster; the detector sees it at 224 px anyway), `touching` adds that many
    card-like objects (paper, notes, books, phones) lying under or against the card, drawn from their own
    random stream so the rest of the photo does not change.
    """
    hard = difficulty == "hard"
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


def make_nocard_photo(seed: int, scale: float = 1.0) -> Photo:
    """A photo with no card: surfaces, clutter and card-like rectangles (paper, phone, book, notes)."""
    rng = np.random.default_rng([seed, _SALT["nocard"]])
    hard = rng.random() < 0.4
    img, _ = _scene(rng, hard, int(rng.choice([0, 1, 2, 3], p=[0.15, 0.4, 0.3, 0.15])), scale)
    return Photo(image=_camera(rng, img, hard, scale), corners=None, card_id=None)


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
    parser.add_argument("--difficulty", choices=["standard", "hard"], default="standard")
    parser.add_argument("--nocard", type=int, default=0, help="also write this many no-card photos")
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
        photo = make_nocard_photo(args.seed_base + i)
        cv2.imwrite(str(args.out / f"nocard-{args.seed_base + i}.jpg"), photo.image[..., ::-1])
    print(f"wrote {args.count + args.nocard} photos to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
