"""Draw docs/img/hard-samples.png: 16 photos of `training.synth`'s hard bucket (#13) and, below, four of
`hard-v1` (the hard bucket before it), downscaled into a grid; the true corners are drawn thin, TL red.

    .venv/bin/python docs/img/make_hard_samples.py [--out docs/img/hard-samples.png]

Faces come from the render cache (../shared's renderer, via `training.renders`); seeds are benchmark seeds
(the hard photos `benchmarks/scan_accuracy.py` sends start at 11_000_000), so the grid shows what it measures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from cardcat.stack import SHARED_CATALOG  # noqa: E402
from models.geometry import read_face  # noqa: E402
from training.renders import DEFAULT_CACHE, read_manifest, render_catalog  # noqa: E402
from training.synth import BENCH_SEED_BASE, Difficulty, make_photo  # noqa: E402

CELL = 240  # px per photo, square, letterboxed
COLUMNS = 4
SEED = BENCH_SEED_BASE + 1_000_000
EXPANSIONS = ["base1", "ex7", "dp3", "bw5", "xy7", "sm9", "swsh10tg", "sv01"]


def cell(face: np.ndarray, seed: int, bucket: Difficulty) -> np.ndarray:
    photo = make_photo(face, seed, bucket)
    image = photo.image.copy()
    if photo.corners is not None:
        width = max(1, round(max(image.shape[:2]) / CELL))
        pts = np.round(photo.corners).astype(np.int32)
        cv2.polylines(image, [pts], True, (0, 255, 0), width, cv2.LINE_AA)
        cv2.circle(image, (int(pts[0][0]), int(pts[0][1])), 4 * width, (255, 0, 0), -1)
    h, w = image.shape[:2]
    s = CELL / max(h, w)
    small = cv2.resize(image, (round(w * s), round(h * s)), interpolation=cv2.INTER_AREA)
    out = np.full((CELL, CELL, 3), 32, np.uint8)
    y, x = (CELL - small.shape[0]) // 2, (CELL - small.shape[1]) // 2
    out[y : y + small.shape[0], x : x + small.shape[1]] = small
    return out


def label(text: str) -> np.ndarray:
    strip = np.full((28, CELL * COLUMNS, 3), 245, np.uint8)
    cv2.putText(strip, text, (8, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (20, 20, 20), 1, cv2.LINE_AA)
    return strip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img" / "hard-samples.png")
    args = parser.parse_args()
    manifest = read_manifest(render_catalog(SHARED_CATALOG, DEFAULT_CACHE / "catalog", EXPANSIONS))
    ids = sorted(c for c in manifest if c.split("-")[0] in EXPANSIONS)
    picks = [ids[(i * 7919) % len(ids)] for i in range(20)]
    faces = [read_face(DEFAULT_CACHE / "catalog" / manifest[c]["high"]) for c in picks]
    tiles = [cell(faces[i], SEED + i, "hard") for i in range(16)]
    old = [cell(faces[16 + i], SEED + i, "hard-v1") for i in range(COLUMNS)]
    rows = [np.hstack(tiles[r * COLUMNS : (r + 1) * COLUMNS]) for r in range(4)]
    new_label = label("hard (#13): training.synth make_photo(face, seed, 'hard')")
    old_label = label("hard-v1 (the hard bucket before #13), for comparison")
    grid = np.vstack([new_label, *rows, old_label, np.hstack(old)])
    # A 256-colour palette keeps the PNG small (< 1.5 MB) at no visible cost at this size.
    Image.fromarray(grid).quantize(256, method=Image.Quantize.MEDIANCUT).save(args.out, optimize=True)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
