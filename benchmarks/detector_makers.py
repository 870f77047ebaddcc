"""The card detector alone on `scan_accuracy.py`'s photos from both makers: found, corners right, false cards.

`scan_accuracy.py` counts a detector miss (no quad, or corners more than 5% of the card's height off)
among a scan's other failures, through the whole service. This benchmark runs only the detector, in
one process, on exactly those photos (same makers, seeds and cards), so two sets of weights can be
compared on them in minutes instead of a service run each: a retrained detector (#43 item 4) is judged
here first, then through `/v1/scan`. The held-out maker's photos judge only: no weights or setting are
chosen on them (`benchmarks/heldout_photos.py`).

    .venv/bin/python benchmarks/detector_makers.py --weights models/weights/detector.pt \\
        --weights runs/detector/unet224-v10-cpu/last.pt --hard 400 --standard 200 --nocard 100 \\
        --cache /tmp/detector-photos --out benchmarks/results/detector_makers.json

`--second W` also judges each `--weights` with W's second opinion behind it (the scanner's
`CARDCAT_SCAN_SECOND_DETECTOR`).

Photos are drawn once into `--cache` (the held-out maker takes ~1 s a photo) and reused.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script

from benchmarks.scan_accuracy import DETECTOR_MISS_PCT, job_photo, photo_jobs
from cardcat.stack import REPO, SHARED_CATALOG
from catalog_api.ingest.feed import feed_path, read_jsonl
from models.detector import CardDetector
from training.detector.evaluate import corner_error_pct
from training.renders import DEFAULT_CACHE, read_manifest

STRONG_GLARE = 0.8  # the held-out maker's glare, in exposures, from which #43 counted it "strong"


def _cached_photo(job: dict[str, Any], cache: Path) -> Path:
    """Draw the job's photo into the cache once: the pixels the scanner sees, the truth and the effects."""
    path = cache / f"{job['maker']}-{job['kind']}-{job['seed']}.npz"
    if not path.exists():
        photo = job_photo(job)
        effects = json.dumps(getattr(photo, "effects", {}) or {}, default=str)
        corners = np.zeros((0, 2), np.float32) if photo.corners is None else photo.corners
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, image=photo.image, corners=corners, effects=np.array(effects))
        tmp.replace(path)
    return path


def judge(detector: CardDetector, jobs: list[dict[str, Any]], paths: list[Path]) -> list[dict[str, Any]]:
    """Each photo's outcome: found or not, the corner error in % of the card's height, its glare."""
    out = []
    for job, path in zip(jobs, paths, strict=True):
        with np.load(path) as data:
            image, corners = data["image"], data["corners"]
            effects = json.loads(str(data["effects"]))
        quad = detector.locate_batch([image])[0]
        row: dict[str, Any] = {"kind": job["kind"], "artwork": job.get("artwork"), "found": quad is not None}
        if quad is not None and len(corners):
            row["err_pct"] = corner_error_pct(quad, corners)
        row["strong_glare"] = float(effects.get("glare", 0.0) or 0.0) >= STRONG_GLARE
        out.append(row)
    return out


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind (and hard photos by artwork and glare): found, corners within 5%, or false cards."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row["kind"]].append(row)
        if row["kind"] == "hard":
            groups[f"hard.{row['artwork']}"].append(row)
            groups["hard.strong_glare" if row["strong_glare"] else "hard.other"].append(row)
    summary: dict[str, Any] = {}
    for name, group in sorted(groups.items()):
        n = len(group)
        if name == "nocard":
            summary[name] = {"n": n, "false_cards": sum(r["found"] for r in group) / n}
            continue
        good = sum(1 for r in group if r.get("err_pct", 1e9) < DETECTOR_MISS_PCT)
        summary[name] = {"n": n, "found": sum(r["found"] for r in group) / n, "good": good / n}
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", type=Path, action="append", help="repeat to compare (default: shipped)")
    parser.add_argument(
        "--second",
        type=Path,
        default=None,
        help="also each --weights with this second opinion behind it (`CardDetector.second`)",
    )
    parser.add_argument("--maker", action="append", choices=["synth", "heldout"], help="default: both")
    parser.add_argument("--standard", type=int, default=200)
    parser.add_argument("--hard", type=int, default=400)
    parser.add_argument("--nocard", type=int, default=100)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/cardcat-detector-photos"))
    parser.add_argument("--workers", type=int, default=2, help="processes drawing photos")
    parser.add_argument("--threads", type=int, default=2, help="torch threads for the detector")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "detector_makers.json")
    args = parser.parse_args()
    weights = args.weights or [REPO / "models" / "weights" / "detector.pt"]
    makers = args.maker or ["synth", "heldout"]
    torch.set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    manifest = read_manifest(DEFAULT_CACHE / "catalog" / "manifest.jsonl")
    card_ids = sorted(c["id"] for c in read_jsonl(feed_path(SHARED_CATALOG, "cards")) if c["id"] in manifest)
    counts = {"standard": args.standard, "hard": args.hard, "nocard": args.nocard}
    args.cache.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"counts": counts, "miss_pct": DETECTOR_MISS_PCT, "results": {}}
    for maker in makers:
        jobs = photo_jobs(maker, "hard", counts, card_ids, manifest)
        started = time.perf_counter()
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            paths = list(pool.map(_cached_photo, jobs, [args.cache] * len(jobs), chunksize=4))
        print(f"{maker}: {len(jobs)} photos ready in {time.perf_counter() - started:.0f} s", flush=True)
        for weight in weights:
            pairs: list[tuple[str, CardDetector | None]] = [(str(weight), None)]
            if args.second is not None:
                pairs.append((f"{weight} + {args.second}", CardDetector(args.second, "cpu")))
            for name, second in pairs:
                summary = summarise(judge(CardDetector(weight, "cpu", second=second), jobs, paths))
                report["results"].setdefault(name, {})[maker] = summary
    print(f"\n{'weights':<48} {'maker':<8} {'photos':<18} {'n':>4} {'found':>7} {'good':>7}")
    for weight, by_maker in report["results"].items():
        for maker, summary in by_maker.items():
            for name, figures in summary.items():
                found = figures.get("found", figures.get("false_cards", 0.0))
                good = f"{figures['good']:7.1%}" if "good" in figures else f"{'':>7}"
                print(f"{weight[-48:]:<48} {maker:<8} {name:<18} {figures['n']:>4} {found:7.1%} {good}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
