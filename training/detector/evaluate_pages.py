"""How well a detector finds every card of a page (#48): binder pages and table spreads from
`training.pages`, held-out cards, validation seeds unless told otherwise.

    python -m training.detector.evaluate_pages --weights models/weights/page_detector.pt --count 40

For each layout (pages of 2x2, 3x3 and 3x4 pockets; spreads of 2-16 cards) and difficulty: the share of
cards (faces and backs) found with every corner within 5% of the card's height (either 180-degree order:
the scanner tries both), cards reported where there is none (per page, and the share of pages with any),
card backs found and said to lie face down, faces said to (lost to the scan), and seconds a page for
`PageDetector.locate_all`. Thresholds and weights are chosen on these validation
seeds (990,000 + 6 or 7 million); `benchmarks/scan_page.py` reports on benchmark seeds through the server.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np

from models.geometry import card_height, read_face
from models.page_detector import PageDetector, PageFind
from serve_app.page_layout import arrange
from training.detector.data import face_paths
from training.detector.evaluate import DEFAULT_MANIFEST, settings
from training.pages import GRIDS, POCKET_BACK_P, PagePhoto, make_page_photo, make_spread_photo
from training.synth import BENCH_SEED_BASE, VAL_SEED_BASE

# Seeds of each layout start this many millions above the seed base (training.detector.evaluate's kinds
# take 0-5).
LAYOUT_OFFSETS = {"page": 6, "spread": 7}
FOUND_PCT = 5.0  # a card counts as found when every corner is within this % of its height


def page_photos(
    faces: list[Path], layout: str, difficulty: str, count: int, seed_base: int, scale: float, back_p: float
) -> list[PagePhoto]:
    """`count` photos of one layout; a page's grid cycles through `training.pages.GRIDS`."""
    base = seed_base + LAYOUT_OFFSETS[layout] * 1_000_000 + (500_000 if difficulty == "hard" else 0)
    level: Literal["standard", "hard"] = "hard" if difficulty == "hard" else "standard"
    photos = []
    for k in range(count):
        seed = base + k
        rng = np.random.default_rng(seed)
        chosen = rng.choice(len(faces), size=16, replace=False)
        cards = [(faces[int(i)].parent.name, read_face(faces[int(i)])) for i in chosen]
        if layout == "page":
            photos.append(make_page_photo(cards, seed, GRIDS[k % len(GRIDS)], level, scale, back_p))
        else:
            photos.append(make_spread_photo(cards, seed, None, level, scale))
    return photos


def corner_gap_pct(found: np.ndarray, truth: np.ndarray) -> float:
    """The largest corner distance in % of the card's height, for the better of the two 180° orders."""
    height = card_height(truth)
    gaps = [np.linalg.norm(np.roll(found, -r, axis=0) - truth, axis=1).max() for r in (0, 2)]
    return float(100 * min(gaps) / height)


def on_a_card(quad: np.ndarray, cards: list[np.ndarray]) -> bool:
    """Whether a find that matched no card within FOUND_PCT still lies on one (every corner within 4 x
    FOUND_PCT): a card found with its corners missed, not a card where there is none (#48's false card).
    `benchmarks/scan_page.py` counts the server's places the same way."""
    return any(corner_gap_pct(quad, card) <= 4 * FOUND_PCT for card in cards)


def match_cards(
    truths: list[tuple[np.ndarray, bool]], found: list[PageFind], bands: dict[str, list[float]] | None = None
) -> dict[str, int]:
    """Each true card (quad, face up) takes the closest unused find within FOUND_PCT: cards found, finds
    that are no card, and how the finds' face-up flags agree with the truth's; `bands` collects the band
    evidence of found faces and backs (what `page_face_bands` is chosen from)."""
    used: set[int] = set()
    out = {"cards": len(truths), "hits": 0, "backs": 0, "backs_named": 0, "faces_said_back": 0}
    for truth, face_up in truths:
        gaps = [(corner_gap_pct(f.quad, truth), j) for j, f in enumerate(found) if j not in used]
        best = min(gaps, default=(np.inf, -1))
        out["backs"] += not face_up
        if best[0] <= FOUND_PCT:
            out["hits"] += 1
            used.add(best[1])
            said_up = found[best[1]].face_up
            if bands is not None:
                bands["face" if face_up else "back"].append(found[best[1]].bands)
            out["backs_named"] += not face_up and not said_up
            out["faces_said_back"] += face_up and not said_up
    # A find that lies on a card but missed its corners is not a card where there is none.
    on_card = {j for j, f in enumerate(found) if j not in used and on_a_card(f.quad, [t for t, _ in truths])}
    out["false"] = len(found) - len(used) - len(on_card)
    return out


def pockets(photo: PagePhoto, found: list[PageFind]) -> tuple[int, int]:
    """(cards found in their own pocket, cards found that have one): the pocket grid `POST /v1/scan/page`
    would name (`serve_app.page_layout.arrange` on every find), each true card (not a back) taking its
    closest find within FOUND_PCT, as `benchmarks/scan_page.py`'s "pockets right" counts. A knob can move
    a few corners enough to renumber a page's pockets while every card stays found."""
    slots = arrange([f.quad for f in found]).slots if found else None
    right = judged = 0
    for card in photo.cards:
        if card.kind != "card" or card.slot is None:
            continue
        gap, j = min(
            ((corner_gap_pct(f.quad, card.corners), j) for j, f in enumerate(found)), default=(np.inf, -1)
        )
        if gap > FOUND_PCT:
            continue
        judged += 1
        right += slots is not None and slots.get(j) == card.slot
    return right, judged


def score(detector: PageDetector, photos: list[PagePhoto]) -> dict[str, Any]:
    totals: dict[str, int] = {}
    bands: dict[str, list[float]] = {"face": [], "back": []}
    pages_false = 0
    seconds = []
    views_before = detector.views_run
    for photo in photos:
        truths = [(c.corners, c.kind == "card") for c in photo.cards if c.kind != "empty"]
        started = time.perf_counter()
        found = detector.locate_all(photo.image)
        seconds.append(time.perf_counter() - started)
        got = match_cards(truths, found, bands)
        got["pockets_right"], got["pockets_judged"] = pockets(photo, found)
        totals = {k: totals.get(k, 0) + v for k, v in got.items()}
        pages_false += got["false"] > 0
    n = max(len(photos), 1)
    return {
        "photos": len(photos),
        "cards": totals.get("cards", 0),
        "found_pct": round(100 * totals.get("hits", 0) / max(totals.get("cards", 0), 1), 2),
        "false_cards_per_page": round(totals.get("false", 0) / n, 3),
        "pages_with_false_pct": round(100 * pages_false / n, 2),
        "pockets_right_pct": (
            round(100 * totals["pockets_right"] / totals["pockets_judged"], 2)
            if totals.get("pockets_judged")
            else None
        ),
        "backs": totals.get("backs", 0),
        "backs_named": totals.get("backs_named", 0),
        "faces_said_back": totals.get("faces_said_back", 0),
        "s_per_page_median": round(float(np.median(seconds)), 3) if seconds else None,
        "views_per_page": round((detector.views_run - views_before) / n, 2),
        "band_quantiles": {
            kind: [round(float(q), 3) for q in np.quantile(v, [0, 0.01, 0.05, 0.5, 0.95, 0.99, 1])]
            for kind, v in bands.items()
            if v
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", type=Path, action="append", default=None)
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--count", type=int, default=40, help="photos per layout and difficulty")
    parser.add_argument("--scale", type=float, default=0.5, help="of 12 MP (the scanner works at ~4 MP)")
    parser.add_argument("--back-p", type=float, default=POCKET_BACK_P, help="pockets holding a card back")
    parser.add_argument("--benchmark", action="store_true", help="benchmark seeds (report only)")
    parser.add_argument("--difficulties", default="standard,hard")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="inference knobs")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    knobs = settings(args.set)
    faces = face_paths(args.manifest.expanduser(), holdout=True)
    if not faces:
        parser.error(f"no held-out faces under {args.manifest}")
    base = BENCH_SEED_BASE if args.benchmark else VAL_SEED_BASE
    sets = {
        f"{layout}-{difficulty}": page_photos(
            faces, layout, difficulty, args.count, base, args.scale, args.back_p
        )
        for layout in LAYOUT_OFFSETS
        for difficulty in args.difficulties.split(",")
    }
    report: dict[str, Any] = {
        "seed_base": base,
        "count": args.count,
        "scale": args.scale,
        "back_p": args.back_p,
        "knobs": knobs,
        "results": {},
    }
    for weights in args.weights or [Path("models/weights/page_detector.pt")]:
        detector = PageDetector(weights)
        detector.load()
        detector.cfg = dataclasses.replace(detector.cfg, **knobs)
        results = {name: score(detector, photos) for name, photos in sets.items()}
        report["results"][str(weights)] = results
        for name, res in results.items():
            print(f"{weights}  {name:16s} {json.dumps(res)}")
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
