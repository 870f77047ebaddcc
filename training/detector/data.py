"""Training batches for the card detector, drawn on the fly from cached faces with `training.synth`.

Each photo gives one whole-photo view (the first pass) and `zooms` zoomed views around its card quad with
simulated first-pass error (the second pass), so the expensive photo is used several times. Batch `b`
always holds photo seeds `seed_base + b * photos .. + photos - 1`: a resumed run sees the same data.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import cv2
import numpy as np
import torch
from torch.utils.data import IterableDataset

from models.geometry import read_face
from models.quads import BAND_DEPTH, PAD_VALUE, letterbox, zoom_view
from training.pages import GRIDS, POCKET_BACK_P, PagePhoto, make_page_photo, make_spread_photo
from training.renders import read_manifest
from training.synth import (
    FOIL_SALT,
    HOLDERS,
    TRAIN_SEED_LIMIT,
    Difficulty,
    harsh_look,
    holofoil,
    make_empty_photo,
    make_nocard_photo,
    make_photo,
)

SUPERSAMPLE = 4


def is_holdout(card_id: str) -> bool:
    """Cards never trained on: every tenth by hash, and base1 (what the tests render)."""
    return card_id.startswith("base1-") or zlib.crc32(card_id.encode()) % 10 == 0


def face_paths(manifest: Path, holdout: bool = False) -> list[Path]:
    """High-res face files from a render manifest, split train / held out by card id."""
    root = manifest.parent
    return [
        root / info["high"]
        for cid, info in sorted(read_manifest(manifest).items())
        if is_holdout(cid) == holdout and (root / info["high"]).exists()
    ]


def _poly(quad: np.ndarray, size: int, ss: int = SUPERSAMPLE) -> np.ndarray:
    """Area coverage of a polygon (edge convention) per pixel: sub-pixel targets for sharp edges."""
    big = np.zeros((size * ss, size * ss), np.uint8)
    pts = (quad + 0.5) * ss - 0.5
    cv2.fillPoly(big, [np.round(pts * 16).astype(np.int32)], 255, cv2.LINE_8, shift=4)
    return cv2.resize(big, (size, size), interpolation=cv2.INTER_AREA).astype(np.float32) / 255


def targets(quad: np.ndarray | None, size: int) -> np.ndarray:
    """(3, size, size): card mask, top band, bottom band for corners TL,TR,BR,BL in view px."""
    out = np.zeros((3, size, size), np.float32)
    if quad is None:
        return out
    tl, tr, br, bl = quad
    out[0] = _poly(quad, size)
    out[1] = _poly(np.array([tl, tr, tr + BAND_DEPTH * (br - tr), tl + BAND_DEPTH * (bl - tl)]), size)
    out[2] = _poly(np.array([bl + BAND_DEPTH * (tl - bl), br + BAND_DEPTH * (tr - br), br, bl]), size)
    return out


def _apply(m: np.ndarray, pts: np.ndarray) -> np.ndarray:
    return (
        cv2.perspectiveTransform(pts.reshape(-1, 1, 2).astype(np.float64), m)
        .reshape(-1, 2)
        .astype(np.float32)
    )


def perturb(rng: np.random.Generator, quad: np.ndarray, cfg: dict[str, Any]) -> np.ndarray:
    """A first-pass guess at `quad`: corner jitter, a shift, sometimes rolled by 180 or 90 degrees.

    With probability `zoom_big` the guess is a poor first look instead: shifted by up to `zoom_far` of the
    card height and scaled by 0.55-1.35 (the art window, or the card merged with what lies beside it).
    """
    height = 0.5 * (np.linalg.norm(quad[3] - quad[0]) + np.linalg.norm(quad[2] - quad[1]))
    sigma = rng.uniform(0.003, cfg["zoom_jitter"]) * height
    out = quad + rng.normal(0, sigma, (4, 2)) + rng.normal(0, sigma, 2)
    if rng.random() < cfg.get("zoom_big", 0.0):
        centre = out.mean(0)
        a = rng.uniform(0, 2 * math.pi)
        shift = rng.uniform(0.05, cfg.get("zoom_far", 0.3)) * height * np.array([math.cos(a), math.sin(a)])
        stretch = rng.uniform(0.55, 1.35, 2) if rng.random() < 0.3 else np.full(2, rng.uniform(0.55, 1.35))
        axes = np.stack([out[1] - out[0], out[3] - out[0]])  # card x and y directions
        axes /= np.linalg.norm(axes, axis=1, keepdims=True)
        rel = out - centre
        rel = (rel @ axes.T * stretch) @ axes if abs(np.linalg.det(axes)) > 0.2 else rel * stretch.mean()
        out = centre + rel + shift
    r = rng.random()
    roll = 1 if r < cfg["zoom_roll90"] else (2 if r < cfg["zoom_roll90"] + 0.5 else 0)
    return np.roll(out, -roll, axis=0).astype(np.float32)


def random_quad(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A card-shaped quad somewhere in a photo: where the zoomed pass looks in no-card photos."""
    h, w = shape[:2]
    ch = rng.uniform(0.2, 0.8) * min(h, w)
    cw = ch / 1.397
    cx, cy = rng.uniform(cw / 2, w - cw / 2), rng.uniform(ch / 2, h - ch / 2)
    a = rng.uniform(0, 2 * math.pi)
    rot = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    base = np.array([[-cw, -ch], [cw, -ch], [cw, ch], [-cw, ch]]) / 2
    return (base @ rot.T + [cx, cy] + rng.normal(0, 0.03 * ch, (4, 2))).astype(np.float32)


def random_crop(
    rng: np.random.Generator, shape: tuple[int, ...], corners: np.ndarray | None
) -> tuple[int, int, int, int] | None:
    """A box of 45-90% of the photo that holds the whole card (any box when there is none)."""
    h, w = shape[:2]
    f = rng.uniform(0.45, 0.9)
    cw, ch = int(w * f), int(h * f)
    lo, hi = (np.zeros(2), np.array([w - cw, h - ch], float))
    if corners is not None:
        lo = np.maximum(lo, np.ceil(corners.max(0) + 2) - [cw, ch])
        hi = np.minimum(hi, np.floor(corners.min(0) - 2))
    if (lo > hi).any():
        return None
    x0, y0 = (lo + rng.random(2) * (hi - lo)).astype(int)
    return int(x0), int(y0), int(x0) + cw, int(y0) + ch


def photo_samples(seed: int, faces: list[Path], cfg: dict[str, Any]) -> list[tuple[np.ndarray, np.ndarray]]:
    """One photo -> [(view uint8 SxSx3, targets 3xSxS)]: the whole photo first, then the zoomed views."""
    assert seed < TRAIN_SEED_LIMIT, "benchmark seeds (>= 10_000_000) must never be trained on"
    rng = np.random.default_rng([seed, 7])
    size = cfg["input_size"]
    # #48: a page detector's photos are mostly binder pages and table spreads; drawn only when asked for,
    # so every older config's photos stay what they were.
    if cfg.get("p_page", 0.0) > 0 and rng.random() < cfg["p_page"]:
        return page_samples(rng, page_photo(rng, seed, faces, cfg), cfg)
    lo, hi = cfg.get("photo_scale", (1.0, 1.0))
    scale = float(rng.uniform(lo, hi)) if hi < 1 or lo < 1 else 1.0
    if rng.random() < cfg["p_nocard"]:
        # #43: a share of them card backs and empty holders under the harsh lamp, drawn only when asked for
        if cfg.get("p_empty", 0.0) > 0 and rng.random() < cfg["p_empty"]:
            photo = make_empty_photo(seed, scale=scale)
        else:
            photo = make_nocard_photo(seed, scale=scale, hard_bucket="hard")  # #13's hard scenes
    else:
        path = faces[int(rng.integers(len(faces)))]
        difficulty: Difficulty = "hard" if rng.random() < cfg["p_hard"] else "standard"
        # A share of the hard photos from the bucket before #13's: trained on #13's alone, the detector
        # lost some of hard-v1's photos (docs/hard-photos.md). Drawn only when asked for, so older
        # configs' photos stay what they were.
        # #43: a share of them from the harsh bucket (a lamp's reflection anywhere, smaller, darker), also
        # drawn only when asked for.
        if difficulty == "hard" and cfg.get("p_harsh", 0.0) > 0 and rng.random() < cfg["p_harsh"]:
            difficulty = "harsh"
        elif difficulty == "hard" and cfg.get("p_hard_v1", 0.0) > 0 and rng.random() < cfg["p_hard_v1"]:
            difficulty = "hard-v1"
        touching = int(rng.integers(1, 3)) if rng.random() < cfg.get("p_touching", 0.0) else 0
        # #43: a share of the harsh photos with the card in a toploader or a binder pocket, drawn only when
        # asked for (older configs' photos stay what they were)
        look = None
        if difficulty == "harsh" and cfg.get("p_holder", 0.0) > 0 and rng.random() < cfg["p_holder"]:
            look = replace(harsh_look(seed), holder=str(rng.choice(HOLDERS)))
        face = read_face(path)
        # #43: a share of the cards printed on foil, drawn only when asked for
        if cfg.get("p_foil", 0.0) > 0 and rng.random() < cfg["p_foil"]:
            face = holofoil(face, np.random.default_rng([seed, FOIL_SALT]))
        card_id = path.parent.name
        photo = make_photo(face, seed, difficulty, card_id, scale=scale, touching=touching, look=look)
    # #43: with `mark_backs`, a card back is a card to find, marked without a face's bands (as the page
    # detector learns it), so the band evidence (`DetectorConfig.min_bands`) refuses it after the detector
    quad, face_up = photo.corners, True
    if quad is None and photo.back is not None and cfg.get("mark_backs", False):
        quad, face_up = photo.back, False
    view, m = letterbox(photo.image, size)
    out = [(view, _marked(quad, m, size, face_up))]
    if rng.random() < cfg["p_crop"]:  # the same scene framed tighter: more first-pass data per photo
        crop = random_crop(rng, photo.image.shape, quad)
        if crop is not None:
            x0, y0, x1, y1 = crop
            view, m = letterbox(photo.image[y0:y1, x0:x1], size)
            out.append((view, _marked(None if quad is None else quad - [x0, y0], m, size, face_up)))
    for _ in range(cfg["zooms"]):
        guess = random_quad(rng, photo.image.shape) if quad is None else perturb(rng, quad, cfg)
        zview, zm = zoom_view(photo.image, guess, size, cfg["zoom_fill"])
        out.append((zview, _marked(quad, zm, size, face_up)))
    return out


def _marked(quad: np.ndarray | None, m: np.ndarray, size: int, face_up: bool) -> np.ndarray:
    """`object_targets` of `quad` (photo px) seen through the view transform `m`; none without a quad."""
    return targets(None, size) if quad is None else object_targets(_apply(m, quad), size, face_up)


def page_photo(rng: np.random.Generator, seed: int, faces: list[Path], cfg: dict[str, Any]) -> PagePhoto:
    """A binder page (any of `training.pages.GRIDS`, `page_back_p` of its pockets face down) or, with
    `p_spread`, a table spread, standard or (with `p_page_hard`) hard, at a scale drawn from `page_scale`
    of 12 MP."""
    chosen = rng.choice(len(faces), size=12, replace=len(faces) < 12)
    cards = [(faces[int(i)].parent.name, read_face(faces[int(i)])) for i in chosen]
    scale = float(rng.uniform(*cfg.get("page_scale", (0.3, 0.45))))
    hard: Literal["standard", "hard"] = "hard" if rng.random() < cfg.get("p_page_hard", 0.5) else "standard"
    if rng.random() < cfg.get("p_spread", 0.4):
        return make_spread_photo(cards, seed, None, hard, scale)
    grid = GRIDS[int(rng.integers(len(GRIDS)))]
    return make_page_photo(cards, seed, grid, hard, scale, cfg.get("page_back_p", POCKET_BACK_P))


def object_targets(quad: np.ndarray, size: int, face_up: bool) -> np.ndarray:
    """`targets` of a card lying face up, or of a card back: the card's mask alone, no name or number
    band (a back has neither), which is how the page detector tells the scanner it saw a back."""
    out = targets(quad, size)
    if not face_up:
        out[1:] = 0
    return out


def union_targets(objects: list[tuple[np.ndarray, bool]], size: int) -> np.ndarray:
    """`object_targets` of every (quad, face up) in one view: each map the most any card gives it."""
    out = np.zeros((3, size, size), np.float32)
    for quad, face_up in objects:
        np.maximum(out, object_targets(quad, size, face_up), out=out)
    return out


def page_samples(
    rng: np.random.Generator, photo: PagePhoto, cfg: dict[str, Any]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """A page's views: `page_crops` windows of the photo letterboxed to a side drawn from `page_view` (the
    page detector's whole-photo view is that large, so a card there is as many pixels as in training),
    every card object marked (faces and backs: a back is a card to find, marked without the name and
    number bands a face has, which is how the scanner tells it is a back); then
    `zooms` zoomed views, each around one card with only that card marked, as the zoomed pass expects
    (`CardDetector._accept` judges the card the view was drawn for, with its neighbours at the edges)."""
    size = cfg["input_size"]
    objects = [(card.corners, card.kind == "card") for card in photo.cards if card.kind != "empty"]
    lo, hi = cfg.get("page_view", (448, 896))
    side = int(rng.integers(lo, hi + 1))
    canvas, m = letterbox(photo.image, side)
    in_view = [(_apply(m, quad), face_up) for quad, face_up in objects]
    h, w = canvas.shape[:2]
    out = []
    for _ in range(cfg.get("page_crops", 2)):
        x0, y0 = int(rng.integers(0, max(1, w - size + 1))), int(rng.integers(0, max(1, h - size + 1)))
        view = np.full((size, size, 3), PAD_VALUE, np.uint8)
        crop = canvas[y0 : y0 + size, x0 : x0 + size]
        view[: crop.shape[0], : crop.shape[1]] = crop
        out.append((view, union_targets([(q - [x0, y0], up) for q, up in in_view], size)))
    for _ in range(cfg["zooms"]):
        if not objects:
            guess = random_quad(rng, photo.image.shape)
            zview, _ = zoom_view(photo.image, guess, size, cfg["zoom_fill"])
            out.append((zview, targets(None, size)))
            continue
        quad, face_up = objects[int(rng.integers(len(objects)))]
        zview, zm = zoom_view(photo.image, perturb(rng, quad, cfg), size, cfg["zoom_fill"])
        out.append((zview, object_targets(_apply(zm, quad), size, face_up)))
    return out


def collate(samples: list[tuple[np.ndarray, np.ndarray]]) -> tuple[torch.Tensor, torch.Tensor]:
    views = torch.from_numpy(np.stack([v for v, _ in samples]))
    return views, torch.from_numpy(np.stack([t for _, t in samples]))


class PhotoBatches(IterableDataset):
    """Endless batches from batch index `start` on; with n DataLoader workers, worker k makes every n-th."""

    def __init__(self, faces: list[Path], cfg: dict[str, Any], start: int = 0) -> None:
        self.faces, self.cfg, self.start = faces, cfg, start

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        torch.set_num_threads(1)
        cv2.setNumThreads(1)
        photos = self.cfg["photos_per_batch"]
        worker = torch.utils.data.get_worker_info()
        stride = 1 if worker is None else worker.num_workers
        b = self.start + (0 if worker is None else worker.id)
        while True:  # the DataLoader takes workers round-robin, so batches still arrive in order
            base = self.cfg["seed_base"] + b * photos
            samples = [s for i in range(photos) for s in photo_samples(base + i, self.faces, self.cfg)]
            yield collate(samples)
            b += stride


def fixed_batch(seeds: range, faces: list[Path], cfg: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """A validation batch (seeds from the validation range) for a loss that is comparable across steps."""
    return collate([s for seed in seeds for s in photo_samples(seed, faces, cfg)])
