"""Benchmark the card detector on held-out synthetic photos (benchmark seeds >= 10_000_000, held-out cards).

    python -m training.detector.evaluate --weights models/weights/detector.pt --count 300 --seed-base 10000000

Reports, for standard, hard (#13's bucket), hard-v1 and no-card photos (plain, and #13's hard scenes):
how often a quad comes back, mean / p95 corner error in % of the card height (the better of the two
180-degree orderings, which the caller tries anyway), the share within 5% (usable for OCR), false
detections on no-card photos, and milliseconds per photo (`--kinds` picks which). Writes JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
import yaml

from models.detector import CardDetector, Pixels
from models.face_check import FaceCheck
from models.geometry import card_height, read_face
from training.synth import (
    BENCH_SEED_BASE,
    FOIL_SALT,
    VAL_SEED_BASE,
    Photo,
    held_look,
    holofoil,
    make_empty_photo,
    make_nocard_photo,
    make_photo,
)

DEFAULT_MANIFEST = Path("~/.cache/cardcat/renders/catalog/manifest.jsonl")
GOOD_PCT = 5.0


def corner_error_pct(pred: np.ndarray, truth: np.ndarray) -> float:
    """Mean corner distance in % of the card height, for the better of the two 180-degree orderings."""
    height = card_height(truth)
    errs = [np.linalg.norm(np.roll(pred, -r, axis=0) - truth, axis=1).mean() for r in (0, 2)]
    return float(100 * min(errs) / height)


# Each kind's seeds start this many millions above --seed-base. hard-v1 takes the seeds `hard` had before
# #13 made a harder bucket of that name: the same photos, so its figures compare with every earlier report.
KIND_OFFSETS = {
    "standard": 0, "hard": 1, "hard-v1": 1, "nocard": 2, "nocard-hard": 3, "harsh": 4, "empty": 5, "held": 6,
    "foil": 7,
}  # fmt: skip


def make_photos(faces: list[Path], kind: str, count: int, seed_base: int) -> list[Photo]:
    """`count` photos of one kind (`KIND_OFFSETS`' keys); card photos cycle through `faces`."""
    if kind == "nocard":
        return [make_nocard_photo(seed) for seed in range(seed_base, seed_base + count)]
    if kind == "nocard-hard":  # #13's no-card photos: 40% of them hard scenes with look-alike cards
        return [make_nocard_photo(seed, hard_bucket="hard") for seed in range(seed_base, seed_base + count)]
    if kind == "empty":  # #43: card backs, empty sleeves, toploaders and binder pages under the harsh lamp
        return [make_empty_photo(seed) for seed in range(seed_base, seed_base + count)]
    out = []
    for seed in range(seed_base, seed_base + count):
        path = faces[seed % len(faces)]
        if kind == "foil":  # #43: standard photos of cards printed on foil
            face = holofoil(read_face(path), np.random.default_rng([seed, FOIL_SALT]))
            out.append(make_photo(face, seed, "standard", path.parent.name))
            continue
        if kind == "held":  # #43: harsh photos of a card in a toploader or a binder pocket, alternately
            look = held_look(seed)
            out.append(make_photo(read_face(path), seed, "harsh", path.parent.name, look=look))
            continue
        out.append(make_photo(read_face(path), seed, kind, path.parent.name))  # type: ignore[arg-type]
    return out


def score(
    detector: CardDetector, photos: list[Photo], batch: int = 8, pixels: str = "numpy"
) -> dict[str, Any]:
    """Detection rate, corner error (or false detections when the photos hold no card) and ms per photo.
    `pixels` "torch": the photos go in as tensors on the detector's device, so its views are cut there
    (`models.tensor_ops`, what a GPU replica does) instead of by OpenCV."""
    errors: list[float] = []
    found = 0
    spent = 0.0
    for start in range(0, len(photos), batch):
        chunk = photos[start : start + batch]
        t = time.perf_counter()
        images: list[Pixels] = [p.image for p in chunk]
        if pixels == "torch":
            images = [torch.from_numpy(p.image).permute(2, 0, 1).to(detector.device) for p in chunk]
        quads = detector.locate_batch(images)
        spent += time.perf_counter() - t
        for photo, quad in zip(chunk, quads, strict=True):
            found += quad is not None
            if quad is not None and photo.corners is not None:
                errors.append(corner_error_pct(quad, photo.corners))
    count = max(len(photos), 1)
    out: dict[str, Any] = {"photos": len(photos), "ms_per_photo": round(1000 * spent / count, 1)}
    if all(p.corners is None for p in photos):
        out["false_detections"] = round(found / count, 4)
        return out
    err = np.array(errors)
    good = err < GOOD_PCT
    out.update(
        found=round(found / count, 4),
        good=round(float(good.sum()) / count, 4),
        corner_err_pct_mean=round(float(err.mean()), 3) if errors else None,
        corner_err_pct_median=round(float(np.median(err)), 3) if errors else None,
        corner_err_pct_p95=round(float(np.percentile(err, 95)), 3) if errors else None,
        corner_err_pct_mean_good=round(float(err[good].mean()), 3) if good.any() else None,
    )
    return out


def settings(items: list[str]) -> dict[str, Any]:
    """`KEY=VALUE` overrides of a `DetectorConfig`, each value read as YAML (numbers, booleans)."""
    return {k: yaml.safe_load(v) for k, _, v in (item.partition("=") for item in items)}


def main(argv: list[str] | None = None) -> int:
    from training.detector.data import face_paths

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", type=Path, default=None, help="default: models/weights/detector.pt")
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed-base", type=int, default=BENCH_SEED_BASE)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="the detector's torch device")
    parser.add_argument(
        "--pixels", choices=("numpy", "torch"), default="numpy", help="cut views with OpenCV or on the device"
    )
    parser.add_argument(
        "--kinds", default="standard,hard,nocard", help=f"comma-separated, of {', '.join(KIND_OFFSETS)}"
    )
    parser.add_argument(
        "--validation",
        action="store_true",
        help=f"validation photos (seeds {VAL_SEED_BASE:,} + 1,000,000 a kind, never trained on) to choose"
        " weights or settings on, instead of the benchmark's",
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON file (default: print only)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override an inference setting"
    )
    parser.add_argument(
        "--second",
        type=Path,
        default=None,
        help="a second opinion's weights, asked about the photos --weights finds no card in (the scanner's"
        " `second_detector_weights`; default: none)",
    )
    parser.add_argument(
        "--set-second", action="append", default=[], metavar="KEY=VALUE", help="override one of its settings"
    )
    parser.add_argument(
        "--check",
        type=Path,
        default=None,
        help="a face check's ONNX graph, asked about every find (the scanner's `face_check_weights`;"
        " default: none)",
    )
    parser.add_argument("--check-bound", type=float, default=None, help="instead of the check's own bound")
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    if unknown := set(kinds) - set(KIND_OFFSETS):
        parser.error(f"unknown kinds {sorted(unknown)}; choose from {', '.join(KIND_OFFSETS)}")
    if args.validation:
        args.seed_base = VAL_SEED_BASE
    elif args.seed_base < BENCH_SEED_BASE:
        parser.error(f"benchmark seeds start at {BENCH_SEED_BASE}: lower ones are training data")
    torch.set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    faces = face_paths(args.manifest.expanduser(), holdout=True)
    second = CardDetector(args.second, args.device) if args.second else None
    second_overrides = settings(args.set_second)
    if second is not None:
        second.cfg = dataclasses.replace(second.cfg, **second_overrides)
    check = FaceCheck(args.check) if args.check else None
    if check is not None and args.check_bound is not None:
        check.bound = args.check_bound
    detector = CardDetector(args.weights, args.device, second=second, check=check)
    overrides = settings(args.set)
    detector.cfg = dataclasses.replace(detector.cfg, **overrides)
    report: dict[str, Any] = {
        "weights": str(args.weights or "models/weights/detector.pt"),
        "photos": "validation" if args.validation else "benchmark",
        "seed_base": args.seed_base,
        "held_out_faces": len(faces),
        "threads": args.threads,
        "batch": args.batch,
        "overrides": overrides,
        "second": str(args.second) if args.second else None,
        "second_overrides": second_overrides,
        "check": str(args.check) if args.check else None,
        "check_bound": check.bound if check is not None else None,
        "device": args.device,
        "pixels": args.pixels,
    }
    for kind in kinds:
        photos = make_photos(faces, kind, args.count, args.seed_base + KIND_OFFSETS[kind] * 1_000_000)
        detector.refused = 0
        report[kind] = score(detector, photos, args.batch, args.pixels)
        if check is not None:
            report[kind]["refused_by_check"] = round(detector.refused / max(1, len(photos)), 4)
        print(kind, json.dumps(report[kind]), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
