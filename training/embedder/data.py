"""Training pairs for the embedder: a catalog face and a synthetic "rectified phone photo" of it.

Everything happens in canonical face space because that is what the scanner hands the embedder: the
detector has already found the card and warped it to 600x838, so what is left is its residue (corner
error up to ~2.5% of the height, a little perspective), the camera (blur, noise, JPEG), the room (light,
colour casts, glare) and the card's sleeve or the thumb holding it. All amounts are relative to the
image size, so the same `degrade` serves training (on low.jpg) and evaluation (on high.jpg).

Alongside these cheap degraded faces, a share of pairs (`photo_p`) come from the real thing: a whole
synthetic phone photo (`training.synth.make_photo`, standard or hard: #13's glare bands over the text,
heavy blur, small in frame, tinted sleeves, fingers, low light) rectified from its true corners moved by up
to `corner_error` of the card's height, the detector's residue. That is the scanner's own view of a photo,
so it teaches what the degraded faces miss.

Seeds: training views use seeds below 1_000_000, evaluation views 10_000_000 and up, so no evaluated
photo was ever seen in training.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from models.embedder import INPUT_H, INPUT_W, prepare
from models.embedder_net import to_tensor
from models.geometry import read_face
from training.renders import read_manifest
from training.synth import FOIL_SALT, HOLDERS, Difficulty, harsh_look, holofoil, photo_view

TRAIN_SEED_LIMIT = 1_000_000
EVAL_SEED_BASE = 10_000_000
SKIN = np.array(
    [(224, 172, 150), (198, 134, 106), (241, 194, 170), (141, 85, 60), (255, 205, 180)], np.float32
)


def is_held_out(card_id: str, percent: float = 5.0) -> bool:
    """A stable ~5% of cards never trained on (by hash of the id, so every machine agrees)."""
    bucket = int.from_bytes(hashlib.sha256(card_id.encode()).digest()[:4], "little") % 10_000
    return bucket < percent * 100


@dataclass(frozen=True)
class Card:
    id: str
    artwork_key: str
    high: Path
    low: Path


def load_cards(render_dir: Path) -> list[Card]:
    """Every rendered card in the manifest whose files exist, in id order (deterministic)."""
    manifest = read_manifest(render_dir / "manifest.jsonl")
    cards = [
        Card(cid, info["artwork_key"], render_dir / info["high"], render_dir / info["low"])
        for cid, info in sorted(manifest.items())
    ]
    return [c for c in cards if c.low.exists() and c.high.exists()]


def split_cards(cards: list[Card], percent: float = 5.0) -> tuple[list[Card], list[Card]]:
    """(train, held out). Held out by hash of the id; training also drops every card that shares a held-out
    card's artwork, so the held-out artworks are really unseen (a reprint would otherwise leak them)."""
    held = [c for c in cards if is_held_out(c.id, percent)]
    held_art = {c.artwork_key for c in held}
    return [c for c in cards if c.artwork_key not in held_art], held


# --- degradations ------------------------------------------------------------------------------------


def _geometry(img: np.ndarray, rng: np.random.Generator, max_jitter: float) -> np.ndarray:
    """Corner error of the rectifier (independent per corner) plus a little keystone perspective."""
    h, w = img.shape[:2]
    src = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32)
    jitter = rng.uniform(-1, 1, (4, 2)) * rng.uniform(0.2, 1.0) * max_jitter * h
    keystone = rng.uniform(-0.015, 0.015) * w
    persp = np.array([[keystone, 0], [-keystone, 0], [0, 0], [0, 0]], np.float32)
    if rng.random() < 0.5:  # tilt about the other axis
        persp = np.array([[0, keystone], [0, 0], [0, 0], [0, -keystone]], np.float32)
    dst = (src + jitter + persp).astype(np.float32)
    matrix = cv2.getPerspectiveTransform(src, dst)
    table = tuple(float(v) for v in rng.uniform(20, 230, 3))
    return cv2.warpPerspective(
        img, matrix, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=table
    )


def _field(shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates on a 1/4-scale grid: light fields are smooth, so they are drawn small, upscaled."""
    h, w = shape
    yy, xx = np.mgrid[0 : max(2, h // 4), 0 : max(2, w // 4)].astype(np.float32)
    return yy * h / yy.shape[0], xx * w / xx.shape[1]


def _up(field: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    return cv2.resize(field, (shape[1], shape[0]), interpolation=cv2.INTER_LINEAR)[..., None]


def _finger(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A thumb entering from one edge, out of focus: partial occlusion the embedding must shrug off."""
    h, w = img.shape[:2]
    along, depth = rng.uniform(0.15, 0.85), rng.uniform(0.04, 0.12)
    ax, ay = w * rng.uniform(0.07, 0.13), h * rng.uniform(0.08, 0.14)
    centres = [
        (along * w, -ay * 0.6 + depth * h),
        (w + ax * 0.6 - depth * w, along * h),
        (along * w, h + ay * 0.6 - depth * h),
        (-ax * 0.6 + depth * w, along * h),
    ]
    cx, cy = centres[rng.integers(4)]
    small = np.zeros((max(2, h // 4), max(2, w // 4)), np.float32)
    cv2.ellipse(
        small,
        (int(cx / 4), int(cy / 4)),
        (max(1, int(ax / 4)), max(1, int(ay / 4))),
        float(rng.uniform(-30, 30)),
        0,
        360,
        1.0,
        -1,
    )
    mask = _up(cv2.GaussianBlur(small, (0, 0), 0.8), (h, w))
    skin = SKIN[rng.integers(len(SKIN))] * rng.uniform(0.7, 1.1)
    shade = np.linspace(1.0, 0.75, h, dtype=np.float32)[:, None, None]
    return img * (1 - mask) + mask * skin * shade


def _light(
    shape: tuple[int, int], rng: np.random.Generator, strength: float
) -> tuple[np.ndarray, np.ndarray]:
    """(multiplicative, additive) light over the card: uneven illumination, glare blobs, sleeve sheen."""
    h, w = shape
    yy, xx = _field(shape)
    mul = np.ones_like(yy)
    add = np.zeros_like(yy)
    if rng.random() < 0.9:
        angle = rng.uniform(0, 2 * np.pi)
        mul += ((xx / w - 0.5) * np.cos(angle) + (yy / h - 0.5) * np.sin(angle)) * rng.uniform(0, 0.5)
    if rng.random() < 0.45 * strength:  # specular blobs from a lamp or window; can clip to white
        for _ in range(rng.integers(1, 4)):
            cx, cy = rng.uniform(0, w), rng.uniform(0, h)
            sx, sy = w * rng.uniform(0.03, 0.15), h * rng.uniform(0.02, 0.1)
            add += np.exp(-(((xx - cx) / sx) ** 2 + ((yy - cy) / sy) ** 2) / 2) * rng.uniform(80, 260)
    if rng.random() < 0.4 * strength:  # a sleeve's soft diagonal sheen band
        angle = rng.uniform(0, np.pi)
        proj = (xx * np.cos(angle) + yy * np.sin(angle)) / max(h, w)
        add += np.exp(-(((proj - rng.uniform(-0.2, 1.2)) / rng.uniform(0.03, 0.15)) ** 2)) * rng.uniform(
            20, 90
        )
    return _up(mul, shape), _up(add, shape)


def _colour(rng: np.random.Generator, strength: float) -> np.ndarray:
    """Sleeve tint, saturation, contrast, exposure and white balance: all affine in RGB, so they fold
    into one 3x4 matrix that `cv2.transform` applies in a single pass."""
    m = np.hstack([np.eye(3), np.zeros((3, 1))])
    if rng.random() < 0.4 * strength:  # sleeve tint: a faint wash of its colour
        alpha = rng.uniform(0.03, 0.15)
        m = np.hstack([np.eye(3) * (1 - alpha), alpha * rng.uniform(150, 255, (3, 1))])
    sat = rng.uniform(0.6, 1.25)
    m = (np.full((3, 3), (1 - sat) / 3) + np.eye(3) * sat) @ m
    contrast = rng.uniform(0.7, 1.2)
    m = m * contrast
    m[:, 3] += 128 * (1 - contrast)
    gain = rng.uniform(0.85, 1.15, 3) * rng.uniform(0.6, 1.3)
    return (m * gain[:, None]).astype(np.float32)


def _camera(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Defocus or motion blur, sensor noise, then the phone's JPEG (uint8 in, uint8 out)."""
    h = img.shape[0]
    if rng.random() < 0.7:
        img = cv2.GaussianBlur(img, (0, 0), max(0.3, rng.uniform(0, 0.006) * h))
    if rng.random() < 0.2:
        length = max(3, int(rng.uniform(0.004, 0.012) * h)) | 1
        kernel: np.ndarray = np.zeros((length, length), np.float32)
        kernel[length // 2, :] = 1 / length
        rot = cv2.getRotationMatrix2D((length / 2 - 0.5, length / 2 - 0.5), float(rng.uniform(0, 180)), 1.0)
        kernel = cv2.warpAffine(kernel, rot, (length, length))
        img = cv2.filter2D(img, -1, kernel / max(kernel.sum(), 1e-6))
    sigma = float(rng.uniform(0, 9))
    # cv2.randn is ~10x faster than numpy's normal; seeded from rng, so views stay deterministic
    cv2.setRNGSeed(int(rng.integers(2**31)))
    luma: Any = np.empty(img.shape[:2], np.float32)
    chroma: Any = np.empty(img.shape, np.float32)
    cv2.randn(luma, 0.0, sigma)  # type: ignore[call-overload]
    cv2.randn(chroma, (0.0, 0.0, 0.0), (sigma * 0.4,) * 3)  # type: ignore[call-overload]
    img = cv2.add(img, chroma + luma[..., None], dtype=cv2.CV_8U)
    if rng.random() < 0.85:
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, int(rng.integers(30, 93))])
        decoded = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED) if ok else None
        img = img if decoded is None else decoded
    return img


def degrade(face: np.ndarray, seed: int, strength: float = 1.0) -> np.ndarray:
    """A synthetic rectified photo of `face` (RGB uint8, any size): deterministic for a seed.
    `strength` < 1 gives the milder view used when both sides of a pair are degraded."""
    rng = np.random.default_rng(seed)
    img: np.ndarray = _geometry(face, rng, 0.025 * max(strength, 0.2)).astype(np.float32)
    shape = (img.shape[0], img.shape[1])
    if rng.random() < 0.25 * strength:
        img = _finger(img, rng)
    mul, add = _light(shape, rng, strength)
    img = cv2.transform(img, _colour(rng, strength)) * mul + add
    gamma = rng.uniform(0.7, 1.4)
    lut = np.clip(255 * (np.arange(256) / 255) ** gamma, 0, 255).astype(np.uint8)
    img = cv2.LUT(np.clip(img, 0, 255).astype(np.uint8), lut)
    return _camera(img, rng)


# --- pairs and batches -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PhotoMix:
    """How many pairs use a whole synthetic photo instead of a degraded face, and what kind of photo."""

    photo_p: float = 0.0
    hard_p: float = 0.5
    scale: float = 0.5
    corner_error: float = 0.02
    # Share of the hard photos drawn from hard-v1, the bucket before #13's: trained on #13's alone, the
    # detector forgot some of hard-v1's photos (docs/hard-photos.md). 0 keeps older runs' pairs.
    hard_v1_p: float = 0.0
    # Share of the hard photos drawn from #43's harsh bucket (a lamp's reflection washing out art, text or
    # edges, smaller and darker). 0 keeps older runs' pairs.
    harsh_p: float = 0.0
    # #43: share of the photos' cards printed on foil, and of the harsh photos with the card in a toploader or
    # a binder pocket (`training.synth.holofoil`, `HardLook.holder`). 0 keeps older runs' pairs.
    foil_p: float = 0.0
    holder_p: float = 0.0


class PairDataset(Dataset[tuple[np.ndarray, np.ndarray, int]]):
    """Item (card index, seed) -> (anchor, photo, artwork id): the anchor is the clean face, except for
    `both_p` of pairs where it is a milder photo too (photo-vs-photo keeps the space consistent). The
    photo is a degraded face, or for `mix.photo_p` of pairs a rectified synthetic phone photo."""

    def __init__(
        self,
        cards: list[Card],
        size: tuple[int, int] = (INPUT_W, INPUT_H),
        both_p: float = 0.2,
        mix: PhotoMix = PhotoMix(),
    ):
        self.cards = cards
        self.size = size
        self.both_p = both_p
        self.mix = mix
        keys = sorted({c.artwork_key for c in cards})
        index = {k: i for i, k in enumerate(keys)}
        self.art_ids = np.array([index[c.artwork_key] for c in cards], np.int64)

    def __len__(self) -> int:
        return len(self.cards)

    def __getitem__(self, item: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, int]:
        idx, seed = item
        card = self.cards[idx]
        face = read_face(card.low)
        # Photo seeds are even, anchor seeds odd: both stay below TRAIN_SEED_LIMIT and never coincide.
        # The first three as drawn before hard_v1_p, the fourth before harsh_p (a longer draw keeps them).
        draw = np.random.default_rng([seed, 1]).random(5)
        anchor = degrade(face, 2 * seed + 1, 0.5) if draw[0] < self.both_p else face
        if draw[1] < self.mix.photo_p:
            hard = bool(draw[2] < self.mix.hard_p)
            bucket: Difficulty = "hard-v1" if draw[3] < self.mix.hard_v1_p else "hard"
            if draw[4] < self.mix.harsh_p:
                bucket = "harsh"
            kind = bucket if hard else "standard"
            high, look = read_face(card.high), None
            extra = np.random.default_rng([seed, 2]).random(2)  # its own draw: older pairs stay as they were
            if extra[0] < self.mix.foil_p:
                high = holofoil(high, np.random.default_rng([seed, FOIL_SALT]))
            if kind == "harsh" and extra[1] < self.mix.holder_p:
                look = replace(harsh_look(2 * seed), holder=HOLDERS[seed % len(HOLDERS)])
            photo = photo_view(high, 2 * seed, kind, self.mix.scale, self.mix.corner_error, look)
        else:
            photo = degrade(face, 2 * seed)
        return prepare(anchor, self.size), prepare(photo, self.size), int(self.art_ids[idx])


def collate(
    items: list[tuple[np.ndarray, np.ndarray, int]],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    anchors, photos, arts = zip(*items, strict=True)
    return to_tensor(list(anchors)), to_tensor(list(photos)), torch.tensor(arts)


class HardBatchSampler:
    """Endless batches of (card index, seed). Part of each batch is pairs of cards with the same name but
    different artwork, the negatives a random batch from 17k artworks almost never contains. Batch `step`
    depends only on (seed, step), so a resumed run continues with exactly the batches it would have seen."""

    def __init__(
        self, dataset: PairDataset, batch_size: int, hard_fraction: float, seed: int, start_step: int = 0
    ):
        self.n = len(dataset)
        self.batch_size = batch_size
        self.hard_fraction = hard_fraction
        self.seed = seed
        self.step = start_step
        by_name: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for i, card in enumerate(dataset.cards):
            by_name[card.artwork_key.split("|", 1)[0]][card.artwork_key].append(i)
        self.groups = [list(arts.values()) for arts in by_name.values() if len(arts) >= 2]

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        while True:
            rng = np.random.default_rng([self.seed, self.step])
            chosen: list[int] = []
            want_hard = int(self.batch_size * self.hard_fraction) // 2
            for g in rng.choice(len(self.groups), size=min(want_hard, len(self.groups)), replace=False):
                arts = self.groups[g]
                for a in rng.choice(len(arts), size=2, replace=False):
                    chosen.append(int(rng.choice(arts[a])))
            seen = set(chosen)
            while len(chosen) < self.batch_size:
                i = int(rng.integers(self.n))
                if i not in seen:
                    seen.add(i)
                    chosen.append(i)
            base = (self.step * self.batch_size) % (TRAIN_SEED_LIMIT // 2 - self.batch_size)
            yield [(i, base + j) for j, i in enumerate(chosen)]
            self.step += 1


def describe(cards: list[Card]) -> dict[str, Any]:
    """What a run trained on, for the manifest."""
    return {"cards": len(cards), "artworks": len({c.artwork_key for c in cards})}
