"""A second phone-photo maker, for judging the scanner only (issue #43, item 1).

The scanner's models, thresholds and fusion rules were chosen on photos from `training/synth.py`, so
figures measured on that maker's photos flatter it (#43: 6-8 points on hard photos). This module is a
different model of the camera, written apart from `training/synth.py` and sharing none of its code,
so a figure measured here says how the scanner does on photos nothing in it was tuned on. It must
never feed training or choose a threshold: no module under `training/` may import it, and it imports
nothing from `training/` (`tests/test_heldout_photos.py` checks both).

The model, in the order light reaches the file:

* **Scene in 3-D.** A card of real proportions (63 x 88 mm, 3 mm corner radius) lies on a table
  plane, or is held a few cm above it. A pinhole camera with a phone-like focal length (24-35 mm
  equivalent) looks at it from a distance chosen so the card covers a drawn fraction of the frame; the
  card is rolled by any angle and tilted about any in-plane axis. Table, neighbouring cards, clutter
  and binder pages are drawn in the plane's own millimetres and projected by the same camera, so their
  perspective agrees with the card's.
* **Holders.** Penny sleeves (tinted film, haze, welded edges), toploaders (a thick clear case with a
  bright wall, its own haze and reflections of the room) and binder pockets (a pocket page with seams
  and neighbouring cards in the other pockets).
* **Light.** One lamp (a point or a short tube) lights everything: diffuse shading falls off with
  distance and angle, and a Blinn specular lobe, computed per pixel from the lamp, the 3-D surface point
  and the view ray, reflects off glossy layers (sleeve and toploader film sharply, the bare card and
  the table weakly, foil with a rainbow). The lamp is placed so its mirror image lands on a drawn spot
  (name row, art, text, footer, anywhere, or off the card), at up to several times the exposure, so at
  full strength it washes out art and text. A hand or phone between lamp and table casts a soft
  shadow; fingers holding the card cover its edges and corners.
* **Camera.** Radial lens distortion (k1, k2), defocus and motion blur, vignetting, exposure and
  white-balance errors, then sensor noise in linear light (shot noise that grows with the signal and
  read noise, both scaled by the ISO gain), clipping, a tone curve and sRGB encoding, the phone's
  denoise (chroma blur, edge-preserving luma) and sharpening, and JPEG at a drawn quality (30-95).

Everything is drawn from `seed` and `kind`, so the same face, seed and kind give the same bytes. Each
effect draws its details from a random stream of its own, and `effects=` overrides any drawn value, so
a test can switch one effect on or off and nothing else in the photo moves (`NEUTRAL_EFFECTS` switches
them all off). The photo's `effects` says what was drawn, for the benchmark's misses table.

    .venv/bin/python benchmarks/heldout_photos.py --out /tmp/heldout --cards 6 --seed 1
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import math
import os
import sys
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any, Literal

import cv2
import numpy as np
from PIL import Image

Kind = Literal["standard", "hard"]
FloatArray = np.ndarray

CARD_W_MM, CARD_H_MM = 63.0, 88.0
CARD_CORNER_MM = 3.0
# 35 mm-equivalent focal lengths are defined against the 43.27 mm diagonal of a 36 x 24 mm frame.
FULL_FRAME_DIAGONAL_MM = 43.27
# Photo sizes of a phone's 4:3 mode, scaled down to 1.3-2 MP so a photo takes well under a second.
SIZES = ((1600, 1200), (1440, 1080), (1280, 960))
# Where a glare spot may be aimed, in face fractions (x0, x1, y0, y1) of a typical card layout.
GLARE_REGIONS = {
    "name": (0.08, 0.92, 0.03, 0.10),
    "art": (0.10, 0.90, 0.12, 0.48),
    "text": (0.08, 0.92, 0.55, 0.88),
    "footer": (0.08, 0.92, 0.89, 0.97),
    "anywhere": (0.0, 1.0, 0.0, 1.0),
}
BACKGROUNDS = ("wood", "cloth", "playmat", "desk", "cards")
HOLDERS = ("none", "sleeve", "toploader", "binder")
# Skin tones (sRGB) for fingers.
SKIN = ((233, 190, 160), (205, 150, 115), (160, 105, 75), (100, 65, 45))
# Film tints (sRGB transmission) for sleeves and toploaders: clear, smoke, blue, red, green, yellowed.
FILMS = ((250, 250, 250), (190, 190, 195), (200, 215, 250), (250, 200, 200), (205, 245, 210), (250, 240, 200))

# Every effect at its "off" value: a flat grey table, a square-on card lit evenly, a perfect lens and
# sensor, no phone processing and JPEG 95. Tests start here and switch one effect on.
NEUTRAL_EFFECTS: Mapping[str, Any] = MappingProxyType(
    {
        "size": (1600, 1200),
        "focal_mm": 28.0,
        "tilt_deg": 0.0,
        "tilt_axis_deg": 0.0,
        "roll_deg": 0.0,
        "card_fraction": 0.2,
        "center": (0.5, 0.5),
        "lift_mm": 0.0,
        "background": "flat",
        "clutter": 0,
        "neighbours": 0,
        "holder": "none",
        "film": 0,
        "foil": 0.0,
        "glare": 0.0,
        "glare_target": "art",
        "shininess": 200.0,
        "light_mm": 600.0,
        "light_size_mm": 0.0,
        "ambient": 1.0,
        "wrinkle": 0.0,
        "shadow": 0.0,
        "shadow_kind": "hand",
        "fingers": 0,
        "distortion": (0.0, 0.0),
        "vignette": 0.0,
        "defocus_px": 0.0,
        "motion_px": 0.0,
        "motion_deg": 0.0,
        "exposure_ev": 0.0,
        "wb_gains": (1.0, 1.0, 1.0),
        "iso_gain": 0.0,
        "tone": 0.0,
        "denoise": 0.0,
        "sharpen": 0.0,
        "jpeg_quality": 95,
    }
)


@dataclass(frozen=True)
class HeldoutPhoto:
    """One photo as the scanner receives it, with its ground truth.

    `jpeg` is what a client uploads; `image` is those bytes decoded (RGB uint8), so a test or a
    benchmark sees exactly the pixels the scanner sees. `corners` are the card face's TL, TR, BR, BL
    in photo pixels (where the face's own top-left lies, whatever the roll; occluded or not), None for a
    photo without a card. `effects` is every drawn setting plus where the glare, shadow and finger
    landed (`glare_at`, `shadow_at`, `finger_at`, photo pixels), for a misses table.
    """

    jpeg: bytes
    image: np.ndarray
    corners: np.ndarray | None
    card_id: str | None
    effects: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------------
# Drawing the look: which effects a photo gets and how strong.


def _stream(seed: int, kind: str, name: str) -> np.random.Generator:
    """A random stream per (seed, kind, effect): switching one effect leaves the others' draws alone."""
    if seed < 0:
        raise ValueError("seed must be >= 0")
    return np.random.default_rng(
        [seed & 0xFFFFFFFF, seed >> 32, zlib.crc32(kind.encode()), zlib.crc32(name.encode()), 4343]
    )


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _draw_look(seed: int, kind: Kind, card: bool) -> dict[str, Any]:
    """Which effects this photo gets and how strong: "standard" is a decent phone photo, "hard" the worst
    case a collector produces (steep, small, glare over the print, blur, noise, holders, fingers)."""
    if kind not in ("standard", "hard"):
        raise ValueError(f"kind must be 'standard' or 'hard', not {kind!r}")
    rng = _stream(seed, kind, "look" if card else "look-nocard")
    hard = kind == "hard"
    w, h = SIZES[int(rng.integers(len(SIZES)))]
    size = (w, h) if rng.random() < 0.5 else (h, w)
    roll = (
        float(rng.uniform(0, 360))
        if hard or rng.random() < 0.5
        else float(90 * rng.integers(4) + rng.normal(0, 6))
    )
    look: dict[str, Any] = {
        "size": size,
        "focal_mm": float(rng.uniform(24, 35)),
        "tilt_deg": float(rng.uniform(12, 50) if hard else rng.uniform(0, 18)),
        "tilt_axis_deg": float(rng.uniform(0, 180)),
        "roll_deg": roll % 360,
        "card_fraction": _log_uniform(rng, 0.05, 0.25) if hard else float(rng.uniform(0.15, 0.40)),
        "center": (
            (float(rng.uniform(0.2, 0.8)), float(rng.uniform(0.2, 0.8)))
            if hard
            else (float(rng.uniform(0.35, 0.65)), float(rng.uniform(0.35, 0.65)))
        ),
        "background": str(rng.choice(BACKGROUNDS, p=(0.25, 0.2, 0.2, 0.15, 0.2))),
        "clutter": int(rng.integers(0, 7) if hard else rng.integers(0, 3)),
        "neighbours": int(rng.integers(0, 5) if hard else rng.integers(0, 2)),
        "holder": str(rng.choice(HOLDERS, p=(0.2, 0.35, 0.25, 0.2) if hard else (0.55, 0.3, 0.1, 0.05))),
        "film": int(rng.choice(len(FILMS), p=(0.55, 0.15, 0.1, 0.07, 0.07, 0.06))),
        "foil": float(rng.uniform(0.1, 0.35)) if rng.random() < (0.3 if hard else 0.1) else 0.0,
        "shininess": _log_uniform(rng, 40, 1200),
        "light_mm": float(rng.uniform(300, 1500)),
        "light_size_mm": float(rng.uniform(0, 250)),
        "ambient": float(rng.uniform(0.1, 0.5) if hard else rng.uniform(0.35, 0.65)),
        "wrinkle": float(rng.uniform(0.0, 0.06)),
        "distortion": (
            float(rng.uniform(-0.2, 0.1) if hard else rng.uniform(-0.06, 0.04)),
            float(rng.uniform(-0.03, 0.03)),
        ),
        "vignette": float(rng.uniform(0.2, 0.9) if hard else rng.uniform(0.05, 0.3)),
        "motion_deg": float(rng.uniform(0, 180)),
        "exposure_ev": float(rng.uniform(-1.8, 0.6) if hard else rng.uniform(-0.4, 0.15)),
        "tone": float(rng.uniform(0.1, 0.5)),
        "denoise": float(rng.uniform(0.3, 1.0) if hard else rng.uniform(0.15, 0.5)),
        "sharpen": float(rng.uniform(0.5, 2.0) if hard else rng.uniform(0.3, 1.0)),
        "jpeg_quality": int(rng.integers(30, 81) if hard else rng.integers(85, 96)),
    }
    if hard:
        strong = rng.random() < 0.85
        look["glare"] = float(rng.uniform(0.8, 3.0) if strong else rng.uniform(0.0, 0.5))
        look["glare_target"] = str(rng.choice(list(GLARE_REGIONS), p=(0.25, 0.25, 0.25, 0.1, 0.15)))
        look["shadow"] = float(rng.uniform(0.35, 0.85)) if rng.random() < 0.45 else 0.0
        look["fingers"] = int(rng.integers(1, 3)) if rng.random() < 0.5 else 0
        look["defocus_px"] = float(rng.uniform(1.0, 6.0)) if rng.random() < 0.55 else 0.0
        look["motion_px"] = float(rng.uniform(2.0, 20.0)) if rng.random() < 0.45 else 0.0
        low_light = rng.random() < 0.45
        look["iso_gain"] = float(rng.uniform(6, 24) if low_light else rng.uniform(1, 5))
        cast = str(rng.choice(["warm", "cool", "green", "magenta"]))
        amount = float(rng.uniform(0.08, 0.3))
    else:
        look["glare"] = float(rng.uniform(0.0, 0.25))
        look["glare_target"] = "off" if rng.random() < 0.6 else "anywhere"
        look["shadow"] = float(rng.uniform(0.2, 0.4)) if rng.random() < 0.1 else 0.0
        look["fingers"] = 1 if rng.random() < 0.1 else 0
        look["defocus_px"] = float(rng.uniform(0.5, 1.5)) if rng.random() < 0.3 else 0.0
        look["motion_px"] = float(rng.uniform(1.0, 3.0)) if rng.random() < 0.1 else 0.0
        look["iso_gain"] = float(rng.uniform(1, 3))
        cast = str(rng.choice(["warm", "cool", "green", "magenta"]))
        amount = float(rng.uniform(0.0, 0.06))
    gains = {"warm": (1 + amount, 1.0, 1 - amount), "cool": (1 - amount, 1.0, 1 + amount)}
    gains["green"] = (1 - amount / 2, 1 + amount / 2, 1 - amount / 2)
    gains["magenta"] = (1 + amount / 2, 1 - amount / 2, 1 + amount / 2)
    look["wb_gains"] = gains[cast]
    look["shadow_kind"] = "hand" if rng.random() < 0.6 else "phone"
    # A card held by fingers is lifted off the table (and casts a shadow on it); in a pocket it is not.
    held = look["fingers"] > 0 and look["holder"] != "binder"
    look["lift_mm"] = float(rng.uniform(5, 50)) if held else 0.0
    if not card:
        look["fingers"] = 0
        look["lift_mm"] = 0.0
        look["glare_target"] = "anywhere"
    return look


def _apply_overrides(look: dict[str, Any], effects: Mapping[str, Any] | None) -> dict[str, Any]:
    if effects:
        unknown = sorted(set(effects) - set(NEUTRAL_EFFECTS))
        if unknown:
            raise ValueError(f"unknown effects: {unknown}; known: {sorted(NEUTRAL_EFFECTS)}")
        look.update(effects)
    return look


# ---------------------------------------------------------------------------------------------------
# Colour: the scene is lit and blurred in linear light, as a sensor records it.

_TO_LINEAR = ((np.arange(256) / 255.0 + 0.055) / 1.055) ** 2.4
_TO_LINEAR[:11] = np.arange(11) / 255.0 / 12.92
TO_LINEAR = _TO_LINEAR.astype(np.float32)


def _linear(rgb: np.ndarray) -> FloatArray:
    """sRGB uint8 -> linear float32 (a table lookup: fast)."""
    out: FloatArray = TO_LINEAR[rgb]
    return out


def _lin_colour(srgb: tuple[int, int, int] | np.ndarray) -> FloatArray:
    return TO_LINEAR[np.asarray(srgb, dtype=np.uint8)].astype(np.float32)


def _encode_table(tone: float) -> np.ndarray:
    """Linear [0, 1] in 4096 steps -> sRGB uint8, through a phone-like S-shaped tone curve."""
    x = np.linspace(0, 1, 4096)
    y = np.where(x <= 0.0031308, 12.92 * x, 1.055 * np.power(x, 1 / 2.4) - 0.055)
    y = y + tone * (y * y * (3 - 2 * y) - y)
    table: np.ndarray = np.clip(np.round(y * 255), 0, 255).astype(np.uint8)
    return table


# ---------------------------------------------------------------------------------------------------
# Camera and pose.


@dataclass(frozen=True)
class _Camera:
    """Pinhole camera (+ radial distortion) and the card plane's pose in camera coordinates (mm).

    Camera axes: x right, y down, z forward. The card's local frame: u right and v down along the face,
    w away from the camera (the card's front faces the camera); a local point p maps to T + R p.
    """

    w: int
    h: int
    f: float
    pad: int
    k1: float
    k2: float
    rot: np.ndarray
    trans: np.ndarray

    @property
    def cx(self) -> float:
        return (self.w - 1) / 2 + self.pad

    @property
    def cy(self) -> float:
        return (self.h - 1) / 2 + self.pad

    @property
    def canvas(self) -> tuple[int, int]:
        """Size (w, h) of the undistorted canvas the scene is drawn on before the lens bends it."""
        return self.w + 2 * self.pad, self.h + 2 * self.pad

    def k(self) -> np.ndarray:
        return np.array([[self.f, 0, self.cx], [0, self.f, self.cy], [0, 0, 1]])

    def plane_h(self, depth_mm: float = 0.0) -> np.ndarray:
        """Homography: local plane (u, v) mm at local depth w -> canvas pixels."""
        t = self.trans + self.rot[:, 2] * depth_mm
        return self.k() @ np.column_stack([self.rot[:, 0], self.rot[:, 1], t])

    def to_canvas(self, local: np.ndarray) -> np.ndarray:
        """Local 3-D points (n, 3) mm -> canvas pixels (n, 2)."""
        cam = local @ self.rot.T + self.trans
        return np.column_stack(
            [self.f * cam[:, 0] / cam[:, 2] + self.cx, self.f * cam[:, 1] / cam[:, 2] + self.cy]
        )

    def rays_to_plane(self, px: np.ndarray, depth_mm: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Canvas pixels (..., 2) -> (3-D camera points, local (u, v)) where their rays meet the plane."""
        d = np.stack(
            [(px[..., 0] - self.cx) / self.f, (px[..., 1] - self.cy) / self.f, np.ones(px.shape[:-1])],
            axis=-1,
        )
        normal = self.rot[:, 2]
        t = (depth_mm + normal @ self.trans) / np.maximum(d @ normal, 1e-3)
        points = d * np.minimum(t, 1e5)[..., None]
        local = (points - self.trans) @ self.rot
        return points, local[..., :2]

    def distort(self, canvas_px: np.ndarray) -> np.ndarray:
        """Canvas (ideal) pixels -> output photo pixels through the lens's radial distortion."""
        x = (canvas_px[:, 0] - self.cx) / self.f
        y = (canvas_px[:, 1] - self.cy) / self.f
        r2 = x * x + y * y
        s = 1 + self.k1 * r2 + self.k2 * r2 * r2
        return np.column_stack([x * s * self.f + (self.w - 1) / 2, y * s * self.f + (self.h - 1) / 2])

    def undistort_maps(self) -> tuple[np.ndarray, np.ndarray]:
        """For each output pixel, the canvas pixel it sees (the inverse of `distort`, solved by fixed-point
        iteration on a coarse grid and interpolated: the maps are smooth)."""
        gw, gh = max(8, self.w // 8), max(8, self.h // 8)
        xs = (np.arange(gw) + 0.5) * self.w / gw - 0.5
        ys = (np.arange(gh) + 0.5) * self.h / gh - 0.5
        gx, gy = np.meshgrid((xs - (self.w - 1) / 2) / self.f, (ys - (self.h - 1) / 2) / self.f)
        rd = np.sqrt(gx * gx + gy * gy)
        ru = rd.copy()
        for _ in range(12):
            r2 = ru * ru
            ru = rd / np.maximum(1 + self.k1 * r2 + self.k2 * r2 * r2, 0.2)
        scale = np.where(rd > 1e-9, ru / np.maximum(rd, 1e-9), 1.0)
        mx = (gx * scale * self.f + self.cx).astype(np.float32)
        my = (gy * scale * self.f + self.cy).astype(np.float32)
        size = (self.w, self.h)
        return (
            cv2.resize(mx, size, interpolation=cv2.INTER_LINEAR),
            cv2.resize(my, size, interpolation=cv2.INTER_LINEAR),
        )

    def canvas_bounds_needed(self) -> float:
        """How far outside the output frame (px) the canvas must reach: barrel distortion shows, at the
        photo's corners, scene from beyond the undistorted frame."""
        half = np.array([(self.w - 1) / 2, (self.h - 1) / 2])
        rd = float(np.hypot(*half)) / self.f
        ru = rd
        for _ in range(12):
            r2 = ru * ru
            ru = rd / max(1 + self.k1 * r2 + self.k2 * r2 * r2, 0.2)
        return float(np.max(half * (ru / rd) - half))


def _rotation(tilt_deg: float, axis_deg: float, roll_deg: float) -> np.ndarray:
    roll = math.radians(roll_deg)
    rz = np.array([[math.cos(roll), -math.sin(roll), 0], [math.sin(roll), math.cos(roll), 0], [0, 0, 1]])
    a = math.radians(axis_deg)
    axis = np.array([math.cos(a), math.sin(a), 0.0]) * math.radians(tilt_deg)
    rt, _ = cv2.Rodrigues(axis)
    out: np.ndarray = rt @ rz
    return out


CARD_CORNERS_MM = np.array(
    [
        [-CARD_W_MM / 2, -CARD_H_MM / 2, 0],
        [CARD_W_MM / 2, -CARD_H_MM / 2, 0],
        [CARD_W_MM / 2, CARD_H_MM / 2, 0],
        [-CARD_W_MM / 2, CARD_H_MM / 2, 0],
    ]
)


def _pose(look: dict[str, Any]) -> tuple[_Camera, np.ndarray]:
    """Place the card: distance from the wanted frame fraction, position from the wanted centre, moved
    toward the middle (then shrunk) until its corners are inside the frame with a margin."""
    w, h = (int(v) for v in look["size"])
    f = float(look["focal_mm"]) / FULL_FRAME_DIAGONAL_MM * math.hypot(w, h)
    rot = _rotation(look["tilt_deg"], look["tilt_axis_deg"], look["roll_deg"])
    k1, k2 = (float(v) for v in look["distortion"])
    fraction = float(look["card_fraction"])
    cxf, cyf = (float(v) for v in look["center"])
    margin = 0.03 * min(w, h)
    cam = _Camera(w, h, f, 0, k1, k2, rot, np.zeros(3))
    for _attempt in range(40):
        cos_tilt = max(math.cos(math.radians(look["tilt_deg"])), 0.2)
        z = f * math.sqrt(CARD_W_MM * CARD_H_MM * cos_tilt / (fraction * w * h))
        px = np.array([cxf * (w - 1), cyf * (h - 1)])
        ray = np.array([(px[0] - (w - 1) / 2) / f, (px[1] - (h - 1) / 2) / f, 1.0])
        cam = _Camera(w, h, f, 0, k1, k2, rot, ray * z)
        corners = cam.distort(cam.to_canvas(CARD_CORNERS_MM))
        inside = (corners.min(0) >= margin).all() and (corners.max(0) <= np.array([w, h]) - 1 - margin).all()
        if inside:
            break
        cxf, cyf = 0.5 + (cxf - 0.5) * 0.8, 0.5 + (cyf - 0.5) * 0.8
        if abs(cxf - 0.5) < 0.02 and abs(cyf - 0.5) < 0.02:
            fraction *= 0.85
    pad = math.ceil(max(0.0, cam.canvas_bounds_needed())) + 2 if (k1 or k2) else 0
    pad = min(pad, w // 3)
    cam = _Camera(w, h, f, pad, k1, k2, rot, cam.trans)
    look["card_fraction"] = float(fraction)
    look["center"] = (float(cxf), float(cyf))
    return cam, cam.to_canvas(CARD_CORNERS_MM)


# ---------------------------------------------------------------------------------------------------
# Textures and objects on the table plane (all in the plane's millimetres).


def _smooth(rng: np.random.Generator, h: int, w: int, cells_y: int, cells_x: int) -> FloatArray:
    """Smooth value noise in [0, 1]: a coarse random grid, bicubically enlarged."""
    grid = rng.random((max(2, cells_y), max(2, cells_x))).astype(np.float32)
    out: FloatArray = np.clip(cv2.resize(grid, (w, h), interpolation=cv2.INTER_CUBIC), 0, 1)
    return out


def _fbm(rng: np.random.Generator, h: int, w: int, cells: int, octaves: int = 4) -> FloatArray:
    total = np.zeros((h, w), np.float32)
    amp, norm = 1.0, 0.0
    for i in range(octaves):
        c = cells * 2**i
        total += amp * _smooth(rng, h, w, max(2, c * h // max(w, 1)), c)
        norm += amp
        amp *= 0.5
    out: FloatArray = total / norm
    return out


def _ramp(t: FloatArray, a: np.ndarray, b: np.ndarray) -> FloatArray:
    out: FloatArray = a[None, None, :] + (b - a)[None, None, :] * t[..., None]
    return out


def _texture(rng: np.random.Generator, kind: str, h: int, w: int, ppm: float) -> tuple[FloatArray, float]:
    """A table surface (linear RGB, h x w at `ppm` px per mm) and its gloss."""
    if kind == "wood":
        # Planks along x; grain = rings stretched along the plank, warped by low-frequency noise.
        light = _lin_colour(rng.integers([150, 95, 50], [225, 165, 110]))
        dark = light * float(rng.uniform(0.35, 0.6))
        plank_mm = float(rng.uniform(70, 180))
        ys = (np.arange(h, dtype=np.float32) / ppm)[:, None]
        plank = np.floor(ys / plank_mm)
        warp = _smooth(rng, h, w, max(2, int(h / ppm / 40)), max(2, int(w / ppm / 300))) * 25
        ring_mm = float(rng.uniform(2.5, 7))
        phase = (ys + warp + plank * 37.0) / ring_mm
        grain = 0.5 + 0.5 * np.sin(2 * np.pi * phase) ** 3
        fibre = _smooth(rng, h, w, max(2, int(h / ppm / 1.5)), max(2, int(w / ppm / 60)))
        t = np.clip(0.55 * grain + 0.45 * fibre, 0, 1)
        tex = _ramp(t, dark, light) * (0.85 + 0.3 * np.sin(plank * 2.1)[..., None])
        seam = (ys % plank_mm) < max(0.8, 1.5 / ppm)
        tex = np.where(np.broadcast_to(seam, (h, w))[..., None], tex * 0.35, tex)
        return tex.astype(np.float32), 0.12
    if kind == "cloth":
        # Woven threads (plain or twill) with a colour or a tartan of stripes, and fibre noise.
        period = max(2.5, 3.2 / ppm)
        ys, xs = np.mgrid[0:h, 0:w].astype(np.float32) / ppm
        twill = rng.random() < 0.5
        a = np.sin(2 * np.pi * (xs + (ys if twill else 0)) / period)
        b = np.sin(2 * np.pi * ys / period)
        weave = 0.5 + 0.25 * a * np.sign(b) + 0.25 * b * np.sign(a)
        base = _lin_colour(rng.integers(20, 200, 3))
        if rng.random() < 0.4:
            other = _lin_colour(rng.integers(20, 230, 3))
            stripe = float(rng.uniform(15, 60))
            band = ((xs // stripe + ys // stripe) % 2).astype(np.float32)
            colour = _ramp(band * 0.7, base, other)
        else:
            colour = np.broadcast_to(base, (h, w, 3))
        fuzz = _smooth(rng, h, w, max(2, h // 3), max(2, w // 3))
        tex = colour * (0.65 + 0.45 * weave + 0.15 * fuzz)[..., None]
        return tex.astype(np.float32), 0.0
    if kind == "playmat":
        # Printed art: big colour fields from a palette, rings and swooshes, zone frames the size of a
        # card (look-alike rectangles) and a title.
        palette = [_lin_colour(rng.integers(0, 256, 3)) for _ in range(4)]
        t = _fbm(rng, h, w, 3)
        tex = _ramp(np.clip(t * 1.6 - 0.3, 0, 1), palette[0], palette[1])
        u8 = np.zeros((h, w, 3), np.uint8)
        for _ in range(int(rng.integers(3, 8))):
            c = tuple(int(v) for v in rng.integers(0, 256, 3))
            centre = (int(rng.integers(0, w)), int(rng.integers(0, h)))
            radius = int(rng.uniform(20, 200) * ppm)
            cv2.circle(u8, centre, radius, c, max(1, int(rng.uniform(2, 25) * ppm)))
        zone = (int(rng.integers(0, 256)),) * 3
        x0, y0 = int(rng.integers(0, max(1, w // 2))), int(rng.integers(0, max(1, h // 2)))
        for i in range(int(rng.integers(2, 5))):
            zx = x0 + int(i * 75 * ppm)
            cv2.rectangle(u8, (zx, y0), (zx + int(66 * ppm), y0 + int(92 * ppm)), zone, max(1, int(ppm)))
        font_scale = max(0.5, 18 * ppm / 22)
        cv2.putText(
            u8,
            "".join(chr(int(c)) for c in rng.integers(65, 91, 7)),
            (int(w * 0.1), int(h * 0.9)),
            cv2.FONT_HERSHEY_TRIPLEX,
            font_scale,
            zone,
            max(1, int(2 * ppm)),
            cv2.LINE_AA,
        )
        drawn: np.ndarray = np.any(u8, axis=2)
        tex = np.where(drawn[..., None], _linear(u8), tex)
        tex = tex * (0.9 + 0.2 * _smooth(rng, h, w, h // 2 + 2, w // 2 + 2))[..., None]
        return tex.astype(np.float32), 0.04
    if kind == "desk":
        coloured = rng.random() < 0.5
        base = _lin_colour(rng.integers(30, 240, 3) if coloured else np.full(3, rng.integers(40, 235)))
        tex = base[None, None, :] * (0.9 + 0.15 * _fbm(rng, h, w, 6))[..., None]
        return tex.astype(np.float32), 0.2
    raise ValueError(f"unknown background {kind!r}")


def _fake_face(rng: np.random.Generator, back: bool = False, height: int = 352) -> np.ndarray:
    """A card-shaped look-alike (uint8 RGB): a border, a frame, an art window, a name bar and text
    lines, or a card back. Never a catalog card, so a scanner should not name it."""
    width = round(height * CARD_W_MM / CARD_H_MM)
    img = np.zeros((height, width, 3), np.uint8)
    if back:
        img[:] = (30, 60, 150)
        swirl = _fbm(rng, height, width, 3)
        img[..., 2] = np.clip(120 + 120 * swirl, 0, 255).astype(np.uint8)
        img[..., 1] = np.clip(40 + 60 * swirl, 0, 255).astype(np.uint8)
        centre = (width // 2 + int(rng.integers(-5, 6)), height // 2)
        cv2.ellipse(img, centre, (width // 4, width // 4), 0, 0, 360, (230, 230, 230), -1, cv2.LINE_AA)
        cv2.ellipse(img, centre, (width // 4, width // 4), 0, 180, 360, (200, 40, 40), -1, cv2.LINE_AA)
        cv2.line(
            img, (centre[0] - width // 4, centre[1]), (centre[0] + width // 4, centre[1]), (20, 20, 20), 5
        )
        cv2.rectangle(img, (0, 0), (width - 1, height - 1), (40, 70, 160), max(2, width // 20))
        return img
    border = [(235, 200, 70), (200, 200, 205), (30, 30, 30), (240, 240, 240)][int(rng.integers(4))]
    img[:] = border
    frame = tuple(int(v) for v in rng.integers(60, 250, 3))
    m = width // 22
    cv2.rectangle(img, (m, m), (width - m, height - m), frame, -1)
    art = _fbm(rng, int(height * 0.38), width - 6 * m, 2)
    c1, c2 = rng.integers(0, 256, 3), rng.integers(0, 256, 3)
    art_rgb = (c1[None, None, :] + (c2 - c1)[None, None, :] * art[..., None]).clip(0, 255).astype(np.uint8)
    for _ in range(int(rng.integers(1, 4))):
        cv2.circle(
            art_rgb,
            (int(rng.integers(0, art_rgb.shape[1])), int(rng.integers(0, art_rgb.shape[0]))),
            int(rng.integers(10, 60)),
            tuple(int(v) for v in rng.integers(0, 256, 3)),
            -1,
            cv2.LINE_AA,
        )
    y0 = int(height * 0.11)
    img[y0 : y0 + art_rgb.shape[0], 3 * m : 3 * m + art_rgb.shape[1]] = art_rgb
    letters = "".join(chr(int(c)) for c in rng.integers(65, 91, int(rng.integers(4, 10))))
    cv2.putText(
        img,
        letters.title(),
        (3 * m, int(height * 0.085)),
        cv2.FONT_HERSHEY_DUPLEX,
        0.7,
        (20, 20, 20),
        1,
        cv2.LINE_AA,
    )
    cv2.putText(
        img,
        str(int(rng.integers(3, 33)) * 10),
        (width - 9 * m, int(height * 0.085)),
        cv2.FONT_HERSHEY_DUPLEX,
        0.6,
        (20, 20, 20),
        1,
        cv2.LINE_AA,
    )
    for i in range(int(rng.integers(2, 6))):
        y = int(height * (0.58 + 0.065 * i))
        words = "".join(chr(int(c)) if c != 64 else " " for c in rng.integers(64, 91, 18))
        cv2.putText(
            img, words.lower(), (3 * m, y), cv2.FONT_HERSHEY_SIMPLEX, 0.42, (30, 30, 30), 1, cv2.LINE_AA
        )
    cv2.putText(
        img,
        f"{int(rng.integers(1, 200))}/{int(rng.integers(100, 250))}",
        (3 * m, height - 2 * m),
        cv2.FONT_HERSHEY_SIMPLEX,
        0.35,
        (30, 30, 30),
        1,
        cv2.LINE_AA,
    )
    return img


def _roundrect_alpha(
    h: int,
    w: int,
    ppm: float,
    box_mm: tuple[float, float, float, float],
    origin_mm: tuple[float, float],
    radius_mm: float,
) -> FloatArray:
    """Anti-aliased coverage of a rounded rectangle (u0, v0, u1, v1 mm) on a grid at `ppm` px/mm."""
    u0, v0, u1, v1 = box_mm
    us = (np.arange(w, dtype=np.float32) + 0.5) / ppm + origin_mm[0]
    vs = (np.arange(h, dtype=np.float32) + 0.5) / ppm + origin_mm[1]
    cu, cv = (u0 + u1) / 2, (v0 + v1) / 2
    qu = np.abs(us - cu) - ((u1 - u0) / 2 - radius_mm)
    qv = np.abs(vs - cv) - ((v1 - v0) / 2 - radius_mm)
    qu2, qv2 = np.maximum(qu, 0)[None, :], np.maximum(qv, 0)[:, None]
    sdf = np.sqrt(qu2 * qu2 + qv2 * qv2) + np.minimum(np.maximum(qu[None, :], qv[:, None]), 0) - radius_mm
    out: FloatArray = np.clip(0.5 - sdf * ppm, 0, 1).astype(np.float32)
    return out


def _warp_roi(
    src: np.ndarray, hom: np.ndarray, canvas: tuple[int, int], border: tuple[float, ...]
) -> tuple[slice, slice, np.ndarray] | None:
    """Warp `src` by `hom` into only the canvas rows/columns it covers (cheaper than the whole frame)."""
    sh, sw = src.shape[:2]
    quad = np.array([[-0.5, -0.5, 1], [sw - 0.5, -0.5, 1], [sw - 0.5, sh - 0.5, 1], [-0.5, sh - 0.5, 1]])
    proj = quad @ hom.T
    if (proj[:, 2] <= 0).any():
        return None
    xy = proj[:, :2] / proj[:, 2:]
    x0, y0 = (max(0, math.floor(v) - 2) for v in xy.min(0))
    x1 = min(canvas[0], math.ceil(xy[:, 0].max()) + 3)
    y1 = min(canvas[1], math.ceil(xy[:, 1].max()) + 3)
    if x1 <= x0 or y1 <= y0:
        return None
    shift = np.array([[1, 0, -x0], [0, 1, -y0], [0, 0, 1]], float)
    out = cv2.warpPerspective(
        src,
        shift @ hom,
        (x1 - x0, y1 - y0),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=border,
    )
    if out.ndim == 2:
        out = out[..., None]
    return slice(y0, y1), slice(x0, x1), out


def _px_per_mm(cam: _Camera, depth_mm: float = 0.0) -> float:
    """The card plane's scale at the card centre, in canvas px per mm."""
    pts = cam.to_canvas(np.array([[0, 0, depth_mm], [10, 0, depth_mm], [0, 10, depth_mm]], float))
    (ax, ay), (bx, by) = pts[1] - pts[0], pts[2] - pts[0]
    return float(math.sqrt(abs(ax * by - ay * bx)) / 10)


def _paste_flat(
    img: FloatArray, cam: _Camera, depth: float, face_lin: FloatArray, centre_mm: np.ndarray, angle: float
) -> None:
    """A card-sized image lying on the plane at `centre_mm`, turned by `angle`, composited (rounded)."""
    fh, fw = face_lin.shape[:2]
    ppm = fw / CARD_W_MM
    alpha = _roundrect_alpha(fh, fw, ppm, (0, 0, CARD_W_MM, CARD_H_MM), (0, 0), CARD_CORNER_MM)
    rgba = np.dstack([face_lin * alpha[..., None], alpha])
    c, s = math.cos(angle), math.sin(angle)
    local = np.array([[c / ppm, -s / ppm, 0], [s / ppm, c / ppm, 0], [0, 0, 1]]) @ np.array(
        [[1, 0, 0.5 - fw / 2], [0, 1, 0.5 - fh / 2], [0, 0, 1]]
    )
    local[:2, 2] += centre_mm
    hit = _warp_roi(rgba.astype(np.float32), cam.plane_h(depth) @ local, cam.canvas, (0, 0, 0, 0))
    if hit is not None:
        rows, cols, out = hit
        img[rows, cols] = img[rows, cols] * (1 - out[..., 3:]) + out[..., :3]


def _project_poly(cam: _Camera, depth: float, poly_mm: np.ndarray) -> np.ndarray:
    pts = np.column_stack([poly_mm, np.full(len(poly_mm), depth)])
    return np.round(cam.to_canvas(pts) * 4).astype(np.int32)  # 2 fractional bits for cv2.fillPoly


def _fill(img: FloatArray, poly: np.ndarray, colour: np.ndarray | float) -> None:
    """Fill a polygon (canvas px with 2 fractional bits), anti-aliased, drawing only its bounding box."""
    x, y, w, h = cv2.boundingRect(poly // 4)
    x0, y0 = max(0, x - 2), max(0, y - 2)
    x1, y1 = min(img.shape[1], x + w + 3), min(img.shape[0], y + h + 3)
    if x1 <= x0 or y1 <= y0:
        return
    mask = np.zeros((y1 - y0, x1 - x0), np.uint8)
    cv2.fillPoly(mask, [poly - np.array([x0 * 4, y0 * 4], np.int32)], 255, cv2.LINE_AA, shift=2)
    a = mask[..., None].astype(np.float32) / 255
    img[y0:y1, x0:x1] = img[y0:y1, x0:x1] * (1 - a) + a * colour


def _clutter(rng: np.random.Generator, img: FloatArray, cam: _Camera, depth: float, count: int) -> None:
    """Coins, dice, pens, sticky notes and deck boxes on the table around the card, each with a soft
    contact shadow."""
    for _ in range(count):
        kind = str(rng.choice(["coin", "die", "pen", "note", "box"]))
        ang = float(rng.uniform(0, 2 * math.pi))
        dist = float(rng.uniform(60, 200))
        centre = np.array([math.cos(ang), math.sin(ang)]) * dist
        turn = float(rng.uniform(0, math.pi))
        if kind == "coin":
            r = float(rng.uniform(9, 14))
            t = np.linspace(0, 2 * math.pi, 40, endpoint=False)
            shape = np.column_stack([np.cos(t), np.sin(t)]) * r
            colour = _lin_colour(rng.choice([(200, 160, 80), (190, 190, 195), (170, 110, 70)]))
        else:
            w_mm, h_mm = {"die": (16, 16), "pen": (9, 140), "note": (76, 76), "box": (72, 98)}[kind]
            shape = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * np.array([w_mm, h_mm]) / 2
            colour = _lin_colour(rng.integers(10, 250, 3))
            if kind == "note":
                colour = _lin_colour(rng.choice([(250, 235, 120), (250, 180, 200), (170, 230, 250)]))
        rot = np.array([[math.cos(turn), -math.sin(turn)], [math.sin(turn), math.cos(turn)]])
        poly_mm = shape @ rot.T + centre
        _fill(img, _project_poly(cam, depth, poly_mm + 2.0), 0.0 * colour + img.mean() * 0.35)
        _fill(img, _project_poly(cam, depth, poly_mm), colour)
        if kind == "die":
            for dx, dy in ((-4, -4), (4, 4), (0, 0)):
                t = np.linspace(0, 2 * math.pi, 12, endpoint=False)
                pip = np.column_stack([np.cos(t), np.sin(t)]) * 1.6 + np.array([dx, dy])
                _fill(img, _project_poly(cam, depth, pip @ rot.T + centre), 0.01)


def _background(
    rng: np.random.Generator, look: dict[str, Any], cam: _Camera, card: bool
) -> tuple[FloatArray, float]:
    """The table (or binder page) as seen by the camera, with neighbours and clutter: linear RGB on the
    canvas, and the surface's gloss."""
    cw, ch = cam.canvas
    depth = float(look["lift_mm"])
    kind = str(look["background"])
    if kind == "flat":  # a test scene: flat grey, 0.2 in linear light
        img: np.ndarray = np.full((ch, cw, 3), 0.2, np.float32)
        gloss = 0.0
    else:
        surface = "desk" if kind == "cards" else kind
        # The part of the plane the canvas sees, and a texture covering it at a resolution close to the
        # photo's near the card.
        corners = np.array([[0, 0], [cw - 1, 0], [cw - 1, ch - 1], [0, ch - 1]], float)
        _, uv = cam.rays_to_plane(corners, depth)
        uv = np.clip(uv, -2500, 2500)
        lo, hi = uv.min(0) - 20, uv.max(0) + 20
        extent = hi - lo
        ppm = float(min(_px_per_mm(cam, depth) * 0.6, 1100 / extent.max(), 6.0))
        tw, th = max(8, int(extent[0] * ppm)), max(8, int(extent[1] * ppm))
        tex, gloss = _texture(rng, surface, th, tw, ppm)
        to_plane = np.array([[1 / ppm, 0, lo[0] + 0.5 / ppm], [0, 1 / ppm, lo[1] + 0.5 / ppm], [0, 0, 1]])
        img = cv2.warpPerspective(
            tex,
            cam.plane_h(depth) @ to_plane,
            (cw, ch),
            flags=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_REFLECT,
        )
    if look["holder"] == "binder":
        gloss = _binder_page(rng, img, cam, depth, card)
    else:
        count = int(look["neighbours"]) + (int(rng.integers(5, 12)) if kind == "cards" else 0)
        for _ in range(count):
            ang = float(rng.uniform(0, 2 * math.pi))
            dist = float(rng.uniform(75, 170) if card else rng.uniform(0, 150))
            face = _linear(_fake_face(rng, back=rng.random() < 0.3))
            turn = float(rng.uniform(-0.5, 0.5) if rng.random() < 0.5 else rng.uniform(0, 2 * math.pi))
            _paste_flat(img, cam, depth, face, np.array([math.cos(ang), math.sin(ang)]) * dist, turn)
        _clutter(rng, img, cam, depth, int(look["clutter"]))
    return img, gloss


def _binder_page(rng: np.random.Generator, img: FloatArray, cam: _Camera, depth: float, card: bool) -> float:
    """A 3 x 3 pocket page around the card: the page, cards (or look-alikes) in the other pockets, the
    pocket film's haze and the welded seams. Returns the page's gloss (high: it is plastic)."""
    pitch = np.array([68.0, 95.0])
    cell = np.array([int(rng.integers(3)), int(rng.integers(3))])
    origin = -(cell + 0.5) * pitch  # the page's top-left, so that the card sits in `cell`
    page = np.array([[0, 0], [3, 0], [3, 3], [0, 3]]) * pitch + origin
    page_colour = _lin_colour((20, 20, 22) if rng.random() < 0.6 else (235, 235, 235))
    _fill(img, _project_poly(cam, depth, page + np.array([[-6, -6], [6, -6], [6, 6], [-6, 6]])), page_colour)
    for i in range(3):
        for j in range(3):
            if (i, j) == tuple(cell) and card:
                continue
            if rng.random() < 0.2:
                continue  # an empty pocket
            centre = origin + (np.array([i, j]) + 0.5) * pitch + rng.uniform(-1, 1, 2)
            face = _linear(_fake_face(rng, back=rng.random() < 0.15))
            _paste_flat(img, cam, depth, face, centre, float(rng.normal(0, 0.01)))
    haze = float(rng.uniform(0.02, 0.08))
    img *= 1 - haze
    img += haze
    seam_w = float(rng.uniform(2.5, 5))
    for k in range(4):
        x = origin[0] + k * pitch[0]
        y = origin[1] + k * pitch[1]
        col = np.array(
            [
                [x - seam_w / 2, origin[1]],
                [x + seam_w / 2, origin[1]],
                [x + seam_w / 2, origin[1] + 3 * pitch[1]],
                [x - seam_w / 2, origin[1] + 3 * pitch[1]],
            ]
        )
        row = np.array(
            [
                [origin[0], y - seam_w / 2],
                [origin[0] + 3 * pitch[0], y - seam_w / 2],
                [origin[0] + 3 * pitch[0], y + seam_w / 2],
                [origin[0], y + seam_w / 2],
            ]
        )
        _fill(img, _project_poly(cam, depth, col), 0.55)
        _fill(img, _project_poly(cam, depth, row), 0.55)
    return 0.8


# ---------------------------------------------------------------------------------------------------
# The card in its holder, drawn on a grid in the card plane's millimetres, then projected.


@dataclass
class _Layer:
    """What the card (and its holder) does to the light from the table behind it: `add` is light it
    reflects (premultiplied RGB), `trans` how much of the table shows through, `gloss` how shiny it is,
    `cover` where it is. All on a grid of `ppm` px per mm whose top-left pixel corner is `origin` mm."""

    add: FloatArray
    trans: FloatArray
    gloss: FloatArray
    cover: FloatArray
    ppm: float
    origin: tuple[float, float]


def _holder_layer(
    rng: np.random.Generator, face: np.ndarray | None, look: dict[str, Any], target_ppm: float
) -> _Layer:
    holder = str(look["holder"])
    ppm = float(face.shape[1] / CARD_W_MM) if face is not None else 6.0
    ppm = min(ppm, max(2.0, target_ppm * 1.25))
    half_w, half_h = CARD_W_MM / 2, CARD_H_MM / 2
    gap = float(rng.uniform(0.3, 1.2))
    shift = float(rng.uniform(-0.8, 0.8))
    boxes: dict[str, tuple[float, float, float, float]] = {"card": (-half_w, -half_h, half_w, half_h)}
    if holder in ("sleeve", "binder"):
        boxes["sleeve"] = (-half_w - 1.5 + shift, half_h + gap - 93, half_w + 1.5 + shift, half_h + gap)
    if holder == "toploader":
        wall = float(rng.uniform(2.5, 3.5))
        inner = (-36.0 + shift, half_h + gap - 97.0, 36.0 + shift, half_h + gap)
        boxes["inner"] = inner
        boxes["toploader"] = (inner[0] - wall, inner[1] - wall, inner[2] + wall, inner[3] + wall)
        if rng.random() < 0.4:
            boxes["sleeve"] = (-half_w - 1.5, half_h + gap - 93, half_w + 1.5, half_h + gap)
    all_boxes = np.array(list(boxes.values()))
    u0, v0 = all_boxes[:, 0].min() - 1, all_boxes[:, 1].min() - 1
    u1, v1 = all_boxes[:, 2].max() + 1, all_boxes[:, 3].max() + 1
    w, h = math.ceil((u1 - u0) * ppm), math.ceil((v1 - v0) * ppm)
    origin = (float(u0), float(v0))

    def cover(name: str, radius: float) -> FloatArray:
        return _roundrect_alpha(h, w, ppm, boxes[name], origin, radius)

    add = np.zeros((h, w, 3), np.float32)
    trans = np.ones((h, w, 3), np.float32)
    gloss = np.zeros((h, w), np.float32)
    covered = np.zeros((h, w), np.float32)
    if face is not None:
        cw_px, ch_px = round(CARD_W_MM * ppm), round(CARD_H_MM * ppm)
        lin = _linear(face)
        if lin.shape[:2] != (ch_px, cw_px):
            lin = cv2.resize(lin, (cw_px, ch_px), interpolation=cv2.INTER_AREA)
        if float(look["foil"]) > 0:
            _foil(rng, lin, float(look["foil"]), float(look.get("_foil_phase", 0.0)))
        x0 = round((-half_w - u0) * ppm)
        y0 = round((-half_h - v0) * ppm)
        a = cover("card", CARD_CORNER_MM)
        placed = np.zeros((h, w, 3), np.float32)
        placed[y0 : y0 + ch_px, x0 : x0 + cw_px] = lin[: h - y0, : w - x0]
        add = placed * a[..., None]
        trans = np.repeat((1 - a)[..., None], 3, axis=2)
        gloss = 0.3 * a + (0.3 * a if float(look["foil"]) > 0 else 0)
        covered = a
    film = _lin_colour(FILMS[int(look["film"]) % len(FILMS)])
    if "sleeve" in boxes:
        s = cover("sleeve", 1.0)
        haze = float(rng.uniform(0.01, 0.05))
        tint = 1 - s[..., None] * (1 - film)
        add = add * tint + s[..., None] * haze
        trans = trans * tint
        edge = s - _roundrect_alpha(h, w, ppm, _shrink(boxes["sleeve"], 0.8), origin, 0.5)
        add += edge[..., None] * 0.18
        gloss = np.maximum(gloss, s)
        covered = np.maximum(covered, s)
    if "toploader" in boxes:
        outer = cover("toploader", 2.0)
        cavity = cover("inner", 1.0)
        rim = np.clip(outer - cavity, 0, 1)
        tint = 1 - outer[..., None] * (1 - film) * 0.6
        haze = float(rng.uniform(0.03, 0.09))
        add = add * tint + outer[..., None] * haze
        trans = trans * tint * (1 - 0.45 * rim[..., None])
        ramp = np.linspace(0.05, 0.3, w, dtype=np.float32)[None, :] * float(rng.choice([-1, 1]))
        add += rim[..., None] * (0.18 + ramp[..., None] % 0.3)
        # A reflection of the room (a window, a shelf) in the thick front face: a slanted bright band.
        us, vs = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
        slope, width = float(rng.uniform(-1.5, 1.5)), float(rng.uniform(4, 20)) * ppm
        offset = float(rng.uniform(0.2, 0.8)) * w
        band = np.clip(1 - np.abs(us - offset - slope * (vs - h / 2)) / width, 0, 1) ** 2
        add += (outer * band)[..., None] * float(rng.uniform(0.05, 0.25))
        gloss = np.maximum(gloss, outer)
        covered = np.maximum(covered, outer)
    return _Layer(add, trans, gloss, covered, ppm, origin)


def _shrink(box: tuple[float, float, float, float], by: float) -> tuple[float, float, float, float]:
    return box[0] + by, box[1] + by, box[2] - by, box[3] - by


def _foil(rng: np.random.Generator, lin: FloatArray, strength: float, phase: float) -> None:
    """Holofoil over the art window: rainbow stripes whose colours shift with the viewing angle."""
    h, w = lin.shape[:2]
    y0, y1, x0, x1 = int(h * 0.11), int(h * 0.49), int(w * 0.08), int(w * 0.92)
    ys, xs = np.mgrid[y0:y1, x0:x1].astype(np.float32)
    period = float(rng.uniform(0.05, 0.2)) * w
    t = (xs + ys * float(rng.uniform(-1, 1))) / period + phase
    rainbow = 0.5 + 0.5 * np.cos(2 * np.pi * (t[..., None] + np.array([0, 1 / 3, 2 / 3], np.float32)))
    lin[y0:y1, x0:x1] = np.clip(lin[y0:y1, x0:x1] * (1 - strength) + rainbow * strength, 0, 1)


# ---------------------------------------------------------------------------------------------------
# Light: a lamp's diffuse and specular light on the plane, shadows of a hand or phone, fingers.


def _lamp(rng: np.random.Generator, look: dict[str, Any], cam: _Camera) -> tuple[np.ndarray, np.ndarray]:
    """Lamp sample positions (camera mm) placed so the mirror reflection of the lamp lands on a drawn
    spot of the card (or off it); and that spot (camera mm)."""
    target = str(look["glare_target"])
    if target == "off":
        ang = float(rng.uniform(0, 2 * math.pi))
        spot_uv = np.array([math.cos(ang), math.sin(ang)]) * float(rng.uniform(90, 200))
    else:
        x0, x1, y0, y1 = GLARE_REGIONS[target]
        spot_uv = np.array([(rng.uniform(x0, x1) - 0.5) * CARD_W_MM, (rng.uniform(y0, y1) - 0.5) * CARD_H_MM])
    spot = cam.trans + cam.rot[:, :2] @ spot_uv
    normal = -cam.rot[:, 2]
    view = -spot / np.linalg.norm(spot)
    mirror = 2 * (normal @ view) * normal - view
    centre = spot + mirror * float(look["light_mm"])
    # A tube or window: samples along a direction across the mirror ray.
    across = np.cross(mirror, normal)
    if np.linalg.norm(across) < 1e-6:
        across = cam.rot[:, 0]
    across = across / np.linalg.norm(across)
    turn = float(rng.uniform(0, math.pi))
    along = math.cos(turn) * across + math.sin(turn) * np.cross(mirror, across)
    size = float(look["light_size_mm"])
    lamps = np.array([centre + along * size * t for t in (-0.5, -0.25, 0.0, 0.25, 0.5)])
    return (lamps if size > 0 else centre[None, :]), spot


def _lighting(
    rng: np.random.Generator, look: dict[str, Any], cam: _Camera, lamps: np.ndarray
) -> tuple[FloatArray, FloatArray]:
    """Diffuse falloff (1 at the card centre) and the specular lobe (1 at the mirror spot), on the canvas.

    Computed on a grid 8x coarser than the canvas (both are smooth) from the 3-D point each pixel's ray
    hits on the card plane, the lamp and the view direction; the lobe is Blinn's (N.H)^shininess, with the
    normal tilted by a gentle random field (film and cards are never quite flat)."""
    cw, ch = cam.canvas
    gw, gh = max(4, cw // 8), max(4, ch // 8)
    xs = (np.arange(gw) + 0.5) * cw / gw - 0.5
    ys = (np.arange(gh) + 0.5) * ch / gh - 0.5
    px = np.stack(np.meshgrid(xs, ys), axis=-1)
    points, _ = cam.rays_to_plane(px, 0.0)
    normal = -cam.rot[:, 2]
    view = -points / np.linalg.norm(points, axis=-1, keepdims=True)
    wrinkle = float(look["wrinkle"])
    n = np.broadcast_to(normal, points.shape).copy()
    if wrinkle > 0:
        for axis in (0, 1):
            bump = (_smooth(rng, gh, gw, 5, 5) - 0.5) * 2 * wrinkle
            n += bump[..., None] * cam.rot[:, axis]
        n /= np.linalg.norm(n, axis=-1, keepdims=True)
    shininess = float(look["shininess"])
    diffuse = np.zeros(px.shape[:2])
    spec = np.zeros(px.shape[:2])
    for lamp in lamps:
        to_lamp = lamp - points
        dist = np.linalg.norm(to_lamp, axis=-1)
        ldir = to_lamp / dist[..., None]
        diffuse += np.maximum(ldir @ normal, 0) / (dist * dist)
        half = ldir + view
        half /= np.linalg.norm(half, axis=-1, keepdims=True)
        spec = np.maximum(spec, np.maximum(np.sum(n * half, axis=-1), 0) ** shininess)
    centre = cam.trans
    ref = 0.0
    for lamp in lamps:
        d = lamp - centre
        ref += max(float(d @ normal) / float(np.linalg.norm(d)), 0.05) / float(d @ d)
    diffuse = np.clip(diffuse / ref, 0, 2.5)
    size = (cw, ch)
    return (
        cv2.resize(diffuse.astype(np.float32), size, interpolation=cv2.INTER_LINEAR),
        cv2.resize(spec.astype(np.float32), size, interpolation=cv2.INTER_LINEAR),
    )


def _hand_shadow(
    rng: np.random.Generator, look: dict[str, Any], cam: _Camera, card_quad: np.ndarray
) -> tuple[FloatArray, np.ndarray]:
    """A soft shadow of a hand (palm and fingers) or a phone reaching over part of the card: a polygon
    in canvas pixels, blurred by the penumbra (drawn at 1/4 size: it is soft anyway). Returns the mask
    (0..1 on the canvas) and a point inside it near the card's centre."""
    cw, ch = cam.canvas
    q = 4
    small: np.ndarray = np.zeros((ch // q + 1, cw // q + 1), np.float32)
    scale = _px_per_mm(cam) / q
    centre = card_quad.mean(0) / q
    ang = float(rng.uniform(0, 2 * math.pi))
    direction = np.array([math.cos(ang), math.sin(ang)])
    side = np.array([-direction[1], direction[0]])
    # The shadow's leading edge crosses the card between 25% and 75% of the way in.
    lead = centre + direction * float(rng.uniform(-25, 25)) * scale
    polys: list[np.ndarray] = []
    if look["shadow_kind"] == "phone":
        w, length = 75 * scale, 160 * scale
        polys.append(
            np.array(
                [
                    lead - side * w / 2,
                    lead + side * w / 2,
                    lead + side * w / 2 + direction * length,
                    lead - side * w / 2 + direction * length,
                ]
            )
        )
    else:
        palm_c = lead + direction * 95 * scale
        t = np.linspace(0, 2 * math.pi, 30, endpoint=False)
        polys.append(
            palm_c + np.outer(np.cos(t), side) * 45 * scale + np.outer(np.sin(t), direction) * 55 * scale
        )
        for k in range(4):
            base = palm_c + side * (k - 1.5) * 20 * scale - direction * 40 * scale
            tip = lead + side * (k - 1.5) * 22 * scale + direction * float(rng.uniform(-5, 15)) * scale
            fw = 8 * scale
            polys.append(np.array([base - side * fw, base + side * fw, tip + side * fw, tip - side * fw]))
    for p in polys:
        cv2.fillPoly(small, [np.round(p).astype(np.int32)], 1.0)
    penumbra = float(rng.uniform(2, 12)) * scale
    small = cv2.GaussianBlur(small, (0, 0), max(0.5, penumbra))
    ys, xs = np.nonzero(small >= 0.95 * small.max()) if small.max() > 0 else (np.array([0]), np.array([0]))
    pick = int(np.argmin((xs - centre[0]) ** 2 + (ys - centre[1]) ** 2))
    mask = cv2.resize(small, (cw, ch), interpolation=cv2.INTER_LINEAR)
    return mask, np.array([xs[pick] * q + q / 2, ys[pick] * q + q / 2], float)


def _fingers(
    rng: np.random.Generator,
    img: FloatArray,
    cam: _Camera,
    card_quad: np.ndarray,
    count: int,
    ambient: float,
) -> list[np.ndarray]:
    """Fingers or thumbs holding the card, each over a corner or an edge from outside: a shaded capsule
    with a nail, softened (it is nearer than the focus), casting a soft shadow on the card. Returns
    their tips (canvas px)."""
    scale = _px_per_mm(cam)
    cw, ch = cam.canvas
    centre = card_quad.mean(0)
    spots = list(card_quad) + [(card_quad[i] + card_quad[(i + 1) % 4]) / 2 for i in range(4)]
    drawn: list[tuple[slice, slice, FloatArray, FloatArray, tuple[int, int]]] = []
    tips: list[np.ndarray] = []
    for _ in range(count):
        spot = spots[int(rng.integers(len(spots)))]
        out = (spot - centre) / np.linalg.norm(spot - centre)
        turn = float(rng.normal(0, 0.35))
        c, s = math.cos(turn), math.sin(turn)
        out = np.array([out[0] * c - out[1] * s, out[0] * s + out[1] * c])
        width = float(rng.uniform(17, 25)) * scale
        tip = spot - out * float(rng.uniform(4, 14)) * scale
        base = tip + out * 160 * scale  # on to the hand, out of the frame or nearly
        skin = _lin_colour(SKIN[int(rng.integers(len(SKIN)))]) * float(rng.uniform(0.85, 1.1))
        sigma = float(rng.uniform(0.8, 3.0))
        offset = (int(rng.uniform(2, 6) * scale), int(rng.uniform(2, 6) * scale))
        x0, y0 = (max(0, int(v - width)) for v in np.minimum(tip, base))
        x1 = min(cw, int(max(tip[0], base[0]) + width) + 1)
        y1 = min(ch, int(max(tip[1], base[1]) + width) + 1)
        if x1 <= x0 or y1 <= y0:
            continue
        ys, xs = np.mgrid[y0:y1, x0:x1].astype(np.float32)
        seg = base - tip
        t = np.clip(((xs - tip[0]) * seg[0] + (ys - tip[1]) * seg[1]) / float(seg @ seg), 0, 1)
        dx, dy = xs - (tip[0] + t * seg[0]), ys - (tip[1] + t * seg[1])
        d = np.sqrt(dx * dx + dy * dy) / (width / 2)
        alpha = cv2.GaussianBlur(np.clip((1 - d) * width / 3, 0, 1), (0, 0), sigma)
        shade = np.sqrt(np.clip(1 - d * d, 0, 1))
        along = t * float(np.linalg.norm(seg)) / scale
        nail = np.clip(1 - np.hypot(along - 7, d * width / 2 / scale * 1.3) / 6, 0, 1)[..., None]
        colour = skin[None, None, :] * (0.6 + 0.4 * shade)[..., None]
        colour = colour * (1 - 0.5 * nail) + 0.5 * nail * np.array([0.8, 0.6, 0.55], np.float32)
        colour = cv2.GaussianBlur(colour.astype(np.float32), (0, 0), sigma)
        drawn.append((slice(y0, y1), slice(x0, x1), alpha, colour, offset))
        tips.append(tip)
    # Shadows first (each finger's capsule, offset away from the lamp and softened), then the fingers.
    for rows, cols, alpha, _, (ox, oy) in drawn:
        sy0, sx0 = min(ch, rows.start + oy), min(cw, cols.start + ox)
        sy1, sx1 = min(ch, rows.stop + oy), min(cw, cols.stop + ox)
        if sy1 > sy0 and sx1 > sx0:
            soft = cv2.GaussianBlur(alpha, (0, 0), 3 * scale)[: sy1 - sy0, : sx1 - sx0]
            img[sy0:sy1, sx0:sx1] *= (1 - 0.6 * (1 - ambient) * soft)[..., None]
    light = ambient + (1 - ambient) * 0.8
    for rows, cols, alpha, colour, _ in drawn:
        region = img[rows, cols]
        region[:] = region * (1 - alpha[..., None]) + colour * light * alpha[..., None]
    return tips


# ---------------------------------------------------------------------------------------------------
# Camera pipeline: lens, sensor, phone processing, JPEG.


def _blur(img: FloatArray, defocus: float, motion: float, motion_deg: float) -> FloatArray:
    """Defocus (a disc) and camera shake (a line) as one kernel; a large one is applied at half size."""
    if defocus <= 0.3 and motion <= 0.8:
        return img
    factor = 2 if max(defocus * 2, motion) > 10 else 1
    r, length = defocus / factor, motion / factor
    size = int(2 * math.ceil(r + length / 2) + 3)
    c = size // 2
    disc = np.zeros((size, size), np.float32)
    cv2.circle(disc, (c * 8, c * 8), max(1, round(max(r, 0.5) * 8)), 1.0, -1, cv2.LINE_AA, shift=3)
    line = np.zeros((size, size), np.float32)
    if length > 0.8:
        dx, dy = (
            math.cos(math.radians(motion_deg)) * length / 2,
            math.sin(math.radians(motion_deg)) * length / 2,
        )
        p0, p1 = (int((c - dx) * 8), int((c - dy) * 8)), (int((c + dx) * 8), int((c + dy) * 8))
        cv2.line(line, p0, p1, 1.0, 1, cv2.LINE_AA, shift=3)
    else:
        line[c, c] = 1
    kernel: np.ndarray = cv2.filter2D(disc, -1, line / line.sum(), borderType=cv2.BORDER_CONSTANT)
    kernel = kernel / kernel.sum()
    if factor == 1:
        out: FloatArray = cv2.filter2D(img, -1, kernel, borderType=cv2.BORDER_REFLECT)
        return out
    h, w = img.shape[:2]
    small = cv2.resize(img, (w // 2, h // 2), interpolation=cv2.INTER_AREA)
    small = cv2.filter2D(small, -1, kernel, borderType=cv2.BORDER_REFLECT)
    out = cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)
    return out


# Gaussian noise as uint8 random indices into a table of 256 normal quantiles: 3x faster than drawing
# normals, with the same sd.
def _normal_table() -> np.ndarray:
    p = (np.arange(256) + 0.5) / 256
    # Acklam-free inverse normal CDF by bisection on erf (256 values, once).
    lo, hi = np.full(256, -6.0), np.full(256, 6.0)
    for _ in range(60):
        mid = (lo + hi) / 2
        cdf = 0.5 * (1 + np.vectorize(math.erf)(mid / math.sqrt(2)))
        lo, hi = np.where(cdf < p, mid, lo), np.where(cdf < p, hi, mid)
    table: np.ndarray = ((lo + hi) / 2).astype(np.float32)
    return table / table.std()


NORMAL_TABLE = _normal_table()


def _sensor(rng: np.random.Generator, img: FloatArray, iso_gain: float) -> FloatArray:
    """Shot noise (variance grows with the signal) and read noise, both amplified by the ISO gain, in
    linear light where the sensor works; then the well clips."""
    if iso_gain <= 0:
        return np.clip(img, 0, 1)
    full_well = 8000.0  # electrons at base ISO for a signal of 1
    read_e = 3.0
    np.clip(img, 0, 1, out=img)
    sd = img * np.float32(iso_gain / full_well)
    sd += np.float32((read_e * iso_gain / full_well) ** 2)
    np.sqrt(sd, out=sd)
    sd *= NORMAL_TABLE[rng.integers(0, 256, img.shape, dtype=np.uint8)]
    img += sd
    np.clip(img, 0, 1, out=img)
    return img


def _phone(img_u8: np.ndarray, denoise: float, sharpen: float, rng: np.random.Generator) -> np.ndarray:
    """The phone's processing after demosaicing: chroma blur and an edge-preserving luma filter (denoise),
    then an unsharp mask on luma (sharpening, with its halos)."""
    if denoise <= 0 and sharpen <= 0:
        return img_u8
    ycc = cv2.cvtColor(img_u8, cv2.COLOR_RGB2YCrCb)
    y = ycc[..., 0]
    if denoise > 0:
        for ch in (1, 2):
            ycc[..., ch] = cv2.GaussianBlur(ycc[..., ch], (0, 0), 0.5 + 2.5 * denoise)
        smoothed = cv2.bilateralFilter(y, 5, 6 + 30 * denoise, 1.5 + 1.5 * denoise)
        y = cv2.addWeighted(y, 1 - denoise, smoothed, denoise, 0)
    if sharpen > 0:
        sigma = float(rng.uniform(0.8, 2.0))
        soft = cv2.GaussianBlur(y, (0, 0), sigma)
        y = cv2.addWeighted(y, 1 + sharpen, soft, -sharpen, 0)
    ycc[..., 0] = y
    out: np.ndarray = cv2.cvtColor(ycc, cv2.COLOR_YCrCb2RGB)
    return out


def _jpeg(img_u8: np.ndarray, quality: int) -> tuple[bytes, np.ndarray]:
    buf = io.BytesIO()
    Image.fromarray(img_u8).save(buf, format="JPEG", quality=int(quality), subsampling=2)
    data = buf.getvalue()
    decoded = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    return data, decoded


# ---------------------------------------------------------------------------------------------------
# The photo.


def _render(
    face: np.ndarray | None, seed: int, kind: Kind, look: dict[str, Any], card: bool
) -> tuple[bytes, np.ndarray, np.ndarray | None, dict[str, Any]]:
    cam, quad = _pose(look)
    cw, ch = cam.canvas
    lamps, spot = _lamp(_stream(seed, kind, "lamp"), look, cam)
    normal = -cam.rot[:, 2]
    half = (lamps.mean(0) - spot) / np.linalg.norm(lamps.mean(0) - spot) - spot / np.linalg.norm(spot)
    look["_foil_phase"] = float(np.arccos(np.clip(normal @ (half / np.linalg.norm(half)), -1, 1)) * 6)

    albedo, bg_gloss = _background(_stream(seed, kind, "background"), look, cam, card)
    # The card's (or an empty holder's) layer, projected onto the canvas.
    show_layer = card or look["holder"] in ("sleeve", "toploader")
    gloss = np.full((ch, cw), bg_gloss, np.float32)
    lift_shadow: np.ndarray = np.zeros((ch, cw), np.float32)
    if show_layer:
        target_ppm = _px_per_mm(cam)
        layer = _holder_layer(_stream(seed, kind, "holder"), face if card else None, look, target_ppm)
        to_plane = np.array(
            [
                [1 / layer.ppm, 0, layer.origin[0] + 0.5 / layer.ppm],
                [0, 1 / layer.ppm, layer.origin[1] + 0.5 / layer.ppm],
                [0, 0, 1],
            ]
        )
        hom = cam.plane_h(0.0) @ to_plane
        front = _warp_roi(np.dstack([layer.add, layer.cover]), hom, (cw, ch), (0, 0, 0, 0))
        back = _warp_roi(np.dstack([layer.trans, layer.gloss]), hom, (cw, ch), (1, 1, 1, 0))
        if front is not None and back is not None:
            rows, cols, f = front
            _, _, b = back
            if float(look["lift_mm"]) > 0:
                # The lifted card's shadow on the table: its outline seen from the lamp, dropped onto the
                # table plane, softened.
                lamp = lamps.mean(0)
                local_lamp = (lamp - cam.trans) @ cam.rot
                depth = float(look["lift_mm"])
                k = depth / max(depth - local_lamp[2], 1e-3) if local_lamp[2] < 0 else 0.0
                drop = CARD_CORNERS_MM.copy()
                drop[:, :2] = drop[:, :2] + k * (drop[:, :2] - local_lamp[:2])
                drop[:, 2] = depth
                sh = np.round(cam.to_canvas(drop) * 4).astype(np.int32)
                small: np.ndarray = np.zeros((ch // 4 + 1, cw // 4 + 1), np.float32)
                cv2.fillPoly(small, [sh // 4], 0.7, cv2.LINE_AA, shift=2)
                small = cv2.GaussianBlur(small, (0, 0), (1 + 0.3 * depth) / 4)
                lift_shadow = cv2.resize(small, (cw, ch), interpolation=cv2.INTER_LINEAR)
            region = albedo[rows, cols]
            albedo[rows, cols] = region * b[..., :3] + f[..., :3]
            g = gloss[rows, cols]
            gloss[rows, cols] = g * (1 - f[..., 3]) + b[..., 3]
    # Light: ambient plus the lamp's diffuse light, with shadows; the lamp's specular reflection on top.
    diffuse, spec = _lighting(_stream(seed, kind, "lighting"), look, cam, lamps)
    if float(look["ambient"]) >= 1:
        diffuse[:] = 1.0
    shadow = lift_shadow
    shadow_at = None
    if float(look["shadow"]) > 0:
        mask, shadow_at = _hand_shadow(_stream(seed, kind, "shadow"), look, cam, quad)
        shadow = np.maximum(shadow, mask * float(look["shadow"]))
    ambient = float(look["ambient"])
    direct = (1 - shadow) if shadow.any() else None
    light = diffuse if direct is None else diffuse * direct
    light *= 1 - ambient
    light += ambient
    scene = albedo
    scene *= light[..., None]
    glare = float(look["glare"])
    if glare > 0:
        lobe = spec * gloss
        lobe *= glare
        if direct is not None:
            lobe *= direct
        scene += lobe[..., None]
    tips: list[np.ndarray] = []
    if card and int(look["fingers"]) > 0:
        tips = _fingers(_stream(seed, kind, "fingers"), scene, cam, quad, int(look["fingers"]), ambient)

    # Lens: distortion (the canvas is bigger than the photo by `pad`, so barrel distortion has scene to
    # pull in), then blur, vignetting and the exposure error.
    if cam.pad or cam.k1 or cam.k2:
        mx, my = cam.undistort_maps()
        scene = cv2.remap(scene, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
    scene = _blur(scene, float(look["defocus_px"]), float(look["motion_px"]), float(look["motion_deg"]))
    h, w = scene.shape[:2]
    gain = 2.0 ** float(look["exposure_ev"])
    vig = float(look["vignette"])
    if vig > 0:
        gx = (np.arange(w // 8 + 1, dtype=np.float32) * 8 - (w - 1) / 2) / cam.f
        gy = (np.arange(h // 8 + 1, dtype=np.float32) * 8 - (h - 1) / 2) / cam.f
        r2 = gx[None, :] ** 2 + gy[:, None] ** 2
        falloff = cv2.resize(
            (1 / (1 + vig * r2) ** 2).astype(np.float32), (w, h), interpolation=cv2.INTER_LINEAR
        )
        scene *= (falloff * gain)[..., None]
    elif gain != 1:
        scene *= gain
    wb = np.asarray(look["wb_gains"], np.float32)
    if not np.allclose(wb, 1):
        scene *= wb
    scene = _sensor(_stream(seed, kind, "sensor"), scene, float(look["iso_gain"]))
    table = _encode_table(float(look["tone"]))
    rgb = table[(scene * 4095 + 0.5).astype(np.uint16)]
    rgb = _phone(rgb, float(look["denoise"]), float(look["sharpen"]), _stream(seed, kind, "phone"))
    data, decoded = _jpeg(rgb, int(look["jpeg_quality"]))

    def out(p: np.ndarray) -> list[float]:
        return [round(float(v), 1) for v in cam.distort(p[None, :])[0]]

    corners = cam.distort(quad).astype(np.float32) if card else None
    look.pop("_foil_phase", None)
    effects = _jsonable(look)
    effects["kind"] = kind
    effects["glare_at"] = (
        out(cam.to_canvas(((spot - cam.trans) @ cam.rot)[None, :])[0]) if glare > 0 else None
    )
    effects["shadow_at"] = out(shadow_at) if shadow_at is not None else None
    effects["finger_at"] = [out(t) for t in tips]
    return data, decoded, corners, effects


def _jsonable(look: Mapping[str, Any]) -> dict[str, Any]:
    def conv(v: Any) -> Any:
        if isinstance(v, float | np.floating):
            return round(float(v), 4)
        if isinstance(v, np.integer):
            return int(v)
        if isinstance(v, tuple | list | np.ndarray):
            return [conv(x) for x in v]
        return v

    return {k: conv(v) for k, v in look.items()}


def make_heldout_photo(
    face: np.ndarray,
    seed: int,
    kind: Kind = "hard",
    card_id: str | None = None,
    effects: Mapping[str, Any] | None = None,
) -> HeldoutPhoto:
    """A phone photo of `face` (RGB uint8, a card face of any size, 63:88 expected) for judging.

    The same (face, seed, kind, effects) always gives the same bytes. `effects` overrides drawn settings
    by name (keys of `NEUTRAL_EFFECTS`), for tests that show one effect alone; a benchmark leaves it None.
    """
    face = np.ascontiguousarray(face)
    if face.ndim != 3 or face.shape[2] != 3 or face.dtype != np.uint8:
        raise ValueError("face must be an RGB uint8 array (h, w, 3)")
    look = _apply_overrides(_draw_look(seed, kind, card=True), effects)
    data, image, corners, drawn = _render(face, seed, kind, look, card=True)
    return HeldoutPhoto(data, image, corners, card_id, drawn)


def make_heldout_nocard_photo(
    seed: int, kind: Kind = "hard", effects: Mapping[str, Any] | None = None
) -> HeldoutPhoto:
    """A phone photo with no catalog card in it: the same tables, clutter, light and camera, with
    look-alikes (card-shaped faces, card backs, binder pages, an empty sleeve or toploader) in place of a
    card, so a scanner that names anything here has matched something that is not a card."""
    look = _apply_overrides(_draw_look(seed, kind, card=False), effects)
    data, image, _, drawn = _render(None, seed, kind, look, card=False)
    return HeldoutPhoto(data, image, None, None, drawn)


# ---------------------------------------------------------------------------------------------------
# Command line: sample photos and a contact sheet for README.

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CARDCAT_SHARED_DIR", REPO.parent / "shared"))
SAMPLES_PNG = REPO / "docs" / "img" / "heldout_samples.png"


def _load_cardrender(shared: Path) -> ModuleType | None:
    path = shared / "tools" / "cardrender.py"
    if not path.exists() or not (shared / "catalog").exists():
        return None
    spec = importlib.util.spec_from_file_location("cardrender", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sample_faces(count: int, seed: int, shared: Path = SHARED) -> list[tuple[str, np.ndarray]]:
    """(card id, face) for `count` cards: rendered by ../shared/tools/cardrender.py from the shared
    catalog when it is there, else drawn here for cards of the demo catalog (name, number, art)."""
    sys.path.insert(0, str(REPO))
    from catalog_api.ingest.feed import card_name, feed_path, read_jsonl

    rng = np.random.default_rng(seed)
    renderer = _load_cardrender(shared)
    if renderer is not None:
        catalog = shared / "catalog"
        expansions = {e["id"]: e for e in read_jsonl(feed_path(catalog, "expansions"))}
        order = {
            s: i for i, s in enumerate(sorted({e.get("series_id") for e in expansions.values()}, key=str))
        }
        cards = list(read_jsonl(feed_path(catalog, "cards")))
        faces = []
        for i in rng.choice(len(cards), size=min(count, len(cards)), replace=False):
            card = cards[int(i)]
            expansion = expansions.get(card["expansion_id"])
            image, _ = renderer.render(
                {**card, "name": card_name(card)}, expansion, order.get((expansion or {}).get("series_id"), 0)
            )
            faces.append((str(card["id"]), np.asarray(image.convert("RGB"))))
        return faces
    import tempfile

    from catalog_api.ingest.demo_catalog import write_demo_catalog

    with tempfile.TemporaryDirectory() as tmp:
        cards = list(read_jsonl(feed_path(write_demo_catalog(Path(tmp)), "cards")))
    faces = []
    for i in rng.choice(len(cards), size=min(count, len(cards)), replace=False):
        card = cards[int(i)]
        face_rng = np.random.default_rng(zlib.crc32(str(card["id"]).encode()))
        face = _fake_face(face_rng, height=838).copy()
        face[: int(838 * 0.1), 30:] = face[5, 5]
        cv2.putText(
            face, card_name(card)[:18], (36, 62), cv2.FONT_HERSHEY_DUPLEX, 1.3, (15, 15, 15), 2, cv2.LINE_AA
        )
        cv2.putText(
            face,
            str(card.get("number", "")),
            (36, 810),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.9,
            (15, 15, 15),
            2,
            cv2.LINE_AA,
        )
        faces.append((str(card["id"]), face))
    return faces


def contact_sheet(
    photos: list[HeldoutPhoto], columns: int, thumb_w: int, path: Path, limit_bytes: int
) -> int:
    """A grid of thumbnails, true corners in green and the face's top-left in red, saved as a palette
    PNG, shrunk until it is at most `limit_bytes`. Returns its size."""
    thumb_w_now = thumb_w
    while True:
        thumbs = []
        for photo in photos:
            img = photo.image
            s = thumb_w_now / max(img.shape[:2])
            t = cv2.resize(
                img, (round(img.shape[1] * s), round(img.shape[0] * s)), interpolation=cv2.INTER_AREA
            )
            cell = np.full((thumb_w_now, thumb_w_now, 3), 255, np.uint8)
            y0, x0 = (thumb_w_now - t.shape[0]) // 2, (thumb_w_now - t.shape[1]) // 2
            cell[y0 : y0 + t.shape[0], x0 : x0 + t.shape[1]] = t
            if photo.corners is not None:
                pts = np.round((photo.corners * s + np.array([x0, y0])) * 4).astype(np.int32)
                cv2.polylines(cell, [pts], True, (0, 220, 0), 1, cv2.LINE_AA, shift=2)
                cv2.circle(cell, tuple(int(v) for v in pts[0]), 12, (230, 0, 0), -1, cv2.LINE_AA, shift=2)
            thumbs.append(cell)
        while len(thumbs) % columns:
            thumbs.append(np.full_like(thumbs[0], 255))
        rows = [np.hstack(thumbs[i : i + columns]) for i in range(0, len(thumbs), columns)]
        sheet = Image.fromarray(np.vstack(rows)).quantize(colors=256, method=Image.Quantize.MEDIANCUT)
        buf = io.BytesIO()
        sheet.save(buf, format="PNG", optimize=True)
        if buf.tell() <= limit_bytes or thumb_w_now < 120:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(buf.getvalue())
            return buf.tell()
        thumb_w_now = int(thumb_w_now * 0.85)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the sample JPEGs")
    parser.add_argument("--cards", type=int, default=6, help="cards to photograph (standard + hard each)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--nocard", type=int, default=2, help="no-card photos (hard)")
    parser.add_argument("--sheet", type=Path, default=SAMPLES_PNG, help="contact sheet PNG ('' for none)")
    parser.add_argument("--sheet-limit-kb", type=int, default=600)
    args = parser.parse_args(argv)
    cv2.setNumThreads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    photos: list[HeldoutPhoto] = []
    timings: list[float] = []

    def timed(make: Callable[[], HeldoutPhoto]) -> HeldoutPhoto:
        started = time.perf_counter()
        photo = make()
        timings.append(time.perf_counter() - started)
        return photo

    index: list[dict[str, Any]] = []
    for i, (card_id, face) in enumerate(sample_faces(args.cards, args.seed)):
        for kind in ("standard", "hard"):
            seed = args.seed * 1000 + i
            photo = timed(partial(make_heldout_photo, face, seed, kind, card_id))
            name = f"{card_id}-{kind}-{seed}.jpg"
            (args.out / name).write_bytes(photo.jpeg)
            index.append(
                {
                    "file": name,
                    "card_id": card_id,
                    "corners": photo.corners.tolist() if photo.corners is not None else None,
                    "effects": photo.effects,
                }
            )
            photos.append(photo)
    for j in range(args.nocard):
        seed = args.seed * 1000 + 500 + j
        photo = timed(partial(make_heldout_nocard_photo, seed, "hard"))
        name = f"nocard-hard-{seed}.jpg"
        (args.out / name).write_bytes(photo.jpeg)
        index.append({"file": name, "card_id": None, "corners": None, "effects": photo.effects})
        photos.append(photo)
    (args.out / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    print(
        f"{len(photos)} photos in {args.out}: median {1000 * float(np.median(timings)):.0f} ms, "
        f"max {1000 * max(timings):.0f} ms per photo (one thread)"
    )
    if str(args.sheet):
        size = contact_sheet(photos, 4, 320, args.sheet, args.sheet_limit_kb * 1024)
        print(f"contact sheet {args.sheet} ({size // 1024} KB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
