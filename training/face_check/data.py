"""Cuts for the face check (`models.face_check`): card faces against backs and empty holders.

Faces: `training.synth` photos of training cards of every kind the detector meets (standard, #13's hard,
hard-v1, harsh, held in a toploader or pocket, foil), cut at their true corners moved by up to
`JITTER` of the card's height each (the detector's corners are within ~5% on the photos it gets right).
Not faces: `training.synth.make_empty_photo`'s card backs, empty sleeves, toploaders and binder pages,
cut where the detectors the scanner runs (the shipped one and its second opinion, with the band bound
off, so they fire more often than served) put a card, at every whole-photo candidate of theirs, and at a
back's true corners, jittered alike. So the negatives are what the scanner itself would hand on.

Every cut is turned 180 degrees half the time: the detector leaves the top open. Seeds are training seeds
(< `training.synth.TRAIN_SEED_LIMIT`); `python -m training.face_check.train` builds them in worker
processes and keeps them as one .npz under `runs/`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import cv2
import numpy as np
import torch

from models.detector import SECOND_WEIGHTS, CardDetector
from models.face_check import INPUT_SIZE, cut
from models.geometry import card_height
from models.quads import Pyramid
from training.detector.evaluate import make_photos
from training.synth import make_empty_photo

CARD_KINDS = ("standard", "hard", "hard-v1", "harsh", "held", "foil")
JITTER = 0.03  # of the card's height, per corner coordinate


def jittered(quad: np.ndarray, rng: np.random.Generator, amount: float = JITTER) -> np.ndarray:
    """The quad with each corner moved by up to `amount` of its height, and turned 180° half the time."""
    moved = quad + rng.uniform(-amount, amount, quad.shape) * card_height(quad)
    return np.roll(moved, 2 * int(rng.integers(0, 2)), axis=0).astype(np.float32)


def face_cuts(faces: list[Path], kind: str, seeds: range) -> list[np.ndarray]:
    """One cut a photo of `kind` (`CARD_KINDS`), at its true corners, jittered."""
    out: list[np.ndarray] = []
    for seed in seeds:  # one photo at a time: a few hundred full-size photos would not fit in memory
        (photo,) = make_photos(faces, kind, 1, seed)
        assert photo.corners is not None
        out.append(cut(photo.image, jittered(photo.corners, np.random.default_rng([seed, 7]))))
    return out


def unbanded(weights: Path | None) -> CardDetector:
    """A served detector with its band bound off: it then finds backs and holders as often as it can."""
    detector = CardDetector(weights)
    detector.cfg = dataclasses.replace(detector.cfg, min_bands=0.0)
    return detector


def back_cuts(seeds: range) -> list[np.ndarray]:
    """Cuts of empty scenes: each detector's find and whole-photo candidates, and a back's true corners."""
    detectors = [unbanded(None), unbanded(SECOND_WEIGHTS)]
    out: list[np.ndarray] = []
    for seed in seeds:
        rng = np.random.default_rng([seed, 11])
        photo = make_empty_photo(seed)
        pyramid = Pyramid(photo.image)
        quads: list[np.ndarray] = [] if photo.back is None else [jittered(photo.back, rng)]
        for detector in detectors:
            # The whole-photo view once: its candidates are cuts, and `locate_batch` starts from them.
            candidates = detector.first_look_batch([photo.image])[0].candidates
            quads += [q for q in detector.locate_batch([photo.image], coarse=[candidates]) if q is not None]
            quads += candidates
        out += [cut(pyramid, np.roll(q, 2 * int(rng.integers(0, 2)), axis=0)) for q in quads]
    return out


def chunks(
    seed_base: int, per_kind: int, empty: int, spacing: int = 10_000, size: int = 25
) -> list[tuple[str, range]]:
    """The work of one cut set as (kind, seeds) pieces for worker processes: `per_kind` photos of each
    card kind (`CARD_KINDS`) and `empty` empty scenes ("empty"), each kind at its own seeds from
    `seed_base`, `spacing` apart."""
    out = []
    for k, kind in enumerate((*CARD_KINDS, "empty")):
        count = empty if kind == "empty" else per_kind
        first = seed_base + k * spacing
        out += [(kind, range(s, min(s + size, first + count))) for s in range(first, first + count, size)]
    return out


def cut_chunk(faces: list[Path], kind: str, seeds: range) -> tuple[np.ndarray, np.ndarray]:
    """One piece of `chunks`: (cuts (N, H, W, 3) uint8, labels (N,), 1 = a face)."""
    cv2.setNumThreads(1)
    torch.set_num_threads(1)  # one photo at a time in each of several worker processes
    made = back_cuts(seeds) if kind == "empty" else face_cuts(faces, kind, seeds)
    label = 0 if kind == "empty" else 1
    if not made:
        return np.zeros((0, INPUT_SIZE[1], INPUT_SIZE[0], 3), np.uint8), np.zeros(0, np.uint8)
    return np.stack(made), np.full(len(made), label, np.uint8)
