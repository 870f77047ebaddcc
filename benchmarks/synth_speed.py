"""How long `training/synth.py` takes to make one photo, per bucket and photo size, on one thread.

Photos are made from rendered catalog faces (sv01, from the render cache) at the scanner's sizes
(`benchmarks/scan_load.SIZES`: ~12 MP, ~2 MP, ~0.5 MP) and at scale 1 (~1.2 MP, the benchmarks' photos)
and 0.5 (training). Prints wall milliseconds per photo (median and max) and writes JSON.

    .venv/bin/python benchmarks/synth_speed.py [--photos 6]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.scan_load import SIZES
from cardcat.stack import REPO, SHARED_CATALOG
from training.renders import DEFAULT_CACHE, read_manifest, render_catalog

SEED_BASE = 16_000_000
BUCKETS = ("standard", "hard-v1", "hard")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--photos", type=int, default=6, help="photos per bucket and size")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "synth_speed.json")
    args = parser.parse_args()
    cv2.setNumThreads(1)

    from models.geometry import read_face
    from training.synth import make_photo

    manifest = read_manifest(render_catalog(SHARED_CATALOG, DEFAULT_CACHE / "catalog", ["sv01"]))
    card_ids = sorted(manifest)
    faces = [read_face(DEFAULT_CACHE / "catalog" / card_ids[i * 7] / "high.jpg") for i in range(args.photos)]
    scales = {**SIZES, "1.2mp (scale 1)": 1.0, "0.3mp (scale 0.5, training)": 0.5}
    results: dict[str, Any] = {}
    print(f"{'size':<28} {'bucket':<9} {'mean MP':>8} {'median ms':>10} {'max ms':>8}")
    for size, scale in scales.items():
        for bucket in BUCKETS:
            spent: list[float] = []
            pixels: list[float] = []
            for i, face in enumerate(faces):
                started = time.perf_counter()
                photo = make_photo(face, SEED_BASE + i, bucket, scale=scale)  # type: ignore[arg-type]
                spent.append(1000 * (time.perf_counter() - started))
                pixels.append(photo.image.shape[0] * photo.image.shape[1] / 1e6)
            row = {
                "scale": scale,
                "mean_mp": float(np.mean(pixels)),
                "median_ms": float(np.median(spent)),
                "max_ms": max(spent),
            }
            results.setdefault(size, {})[bucket] = row
            timing = f"{row['median_ms']:>10.0f} {row['max_ms']:>8.0f}"
            print(f"{size:<28} {bucket:<9} {row['mean_mp']:>8.2f} {timing}")
    meta = {"photos": args.photos, "threads": 1, "python": platform.python_version(), "cv2": cv2.__version__}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
