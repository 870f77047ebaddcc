"""How legible phone photos leave the print, against how well a reader reads it: the table that chooses
`data.photo_legible` (`training.ocr.data.legibility`).

For training cards (never the held-out tenth) and photo seeds 40,000,000+ (neither training's nor the
benchmarks'), each card's footer and name are cut from the scanner's view of a synthetic phone photo
(`training.synth.photo_view`, standard, hard and hard-v1 in turn) and from the rendered face at the same
place; per legibility bin, how many footers the reader reads exactly from the photo's crop.

    .venv/bin/python -m training.ocr.legibility [--cards 240] [--weights models/weights/ocr.pt]
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np

from models.geometry import read_face
from models.ocr import FOOTER, NAME, WEIGHTS, PrintReader, region_quad, warp
from training.ocr.data import catalog_texts, is_eval_card, legibility
from training.renders import DEFAULT_CACHE, SHARED, read_manifest
from training.synth import Difficulty, photo_view

SEED_BASE = 40_000_000
KINDS: tuple[Difficulty, ...] = ("standard", "hard", "hard-v1")
BINS = (-1.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cards", type=int, default=240)
    parser.add_argument("--weights", type=Path, default=WEIGHTS)
    parser.add_argument("--out", type=Path, default=None, help="write every crop's figures as JSON")
    args = parser.parse_args(argv)
    texts = catalog_texts(SHARED / "catalog")
    faces = DEFAULT_CACHE / "catalog"
    ids = [i for i in sorted(read_manifest(faces / "manifest.jsonl")) if i in texts and not is_eval_card(i)]
    reader = PrintReader(args.weights)
    rows = []
    for n, card_id in enumerate(np.random.default_rng(5).choice(ids, args.cards, replace=False)):
        text, face = texts[str(card_id)], read_face(faces / str(card_id) / "high.jpg")
        kind = KINDS[n % len(KINDS)]
        view = photo_view(face, SEED_BASE + n, kind, 1.0, 0.0)
        for region in (FOOTER, NAME):
            quad = region_quad(region)
            crop = warp(view, quad, region.size)
            row: dict[str, Any] = {"card": str(card_id), "kind": kind, "region": region.name}
            row["legibility"] = legibility(crop, warp(face, quad, region.size))
            if region is FOOTER:
                ((read, _),), _ = reader.read_lines([crop])
                row["exact"] = read.replace(" ", "") == text.footer_line.replace(" ", "")
            rows.append(row)
    footers = [r for r in rows if r["region"] == "footer"]
    print(f"{'legibility':>11} {'footers':>7} {'read exactly':>12}  " + " ".join(f"{k:>8}" for k in KINDS))
    for lo, hi in itertools.pairwise(BINS):
        group = [r for r in footers if lo <= r["legibility"] < hi]
        if group:
            kinds = " ".join(f"{sum(r['kind'] == k for r in group):>8}" for k in KINDS)
            exact = 100 * float(np.mean([r["exact"] for r in group]))
            print(f"{lo:>5.1f}-{min(hi, 1.0):<5.1f} {len(group):>7} {exact:>11.0f}%  {kinds}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
