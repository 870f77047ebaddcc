"""Where a scan's CPU goes, stage by stage, in one process on one thread (no Ray, no HTTP).

For phone photos at three sizes (`training/synth.py`, JPEG quality 90), times what the scanner's replicas
do for one photo: decoding (full resolution, for comparison, and at working scale as the Detector does),
locating, rectifying, embedding the face both ways up, reading the print (with five candidate footers
scored, a typical race), each as CPU milliseconds per photo. `benchmarks/scan_load.py` gives the other
half: what each server process spends per scan under load, Ray and HTTP included.

    .venv/bin/python benchmarks/scan_stages.py [--photos 12] [--batch 1] [--runtime onnx|torch]

`--runtime` picks where the three networks run: `onnx` (ONNX Runtime, what a CPU replica serves by
default) or `torch`.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import host
from benchmarks.scan_load import SIZES
from cardcat.stack import REPO, SHARED_CATALOG
from training.renders import DEFAULT_CACHE, read_manifest, render_catalog

SEED_BASE = 15_000_000
STAGES = ("decode full", "decode working", "locate", "rectify", "embed x2", "read")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--photos", type=int, default=12, help="photos per size")
    parser.add_argument("--batch", type=int, default=1, help="photos per network call")
    parser.add_argument(
        "--runtime",
        choices=("onnx", "torch"),
        default="onnx",
        help="the networks' runtime (CPU default: onnx)",
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scan_stages.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cv2.setNumThreads(1)  # as the replicas run (serve_app.app._limit_threads)

    from models.detector import CardDetector
    from models.embedder import CardEmbedder
    from models.geometry import half_turn, rectify
    from models.ocr import PrintReader
    from serve_app.decoding import decode_image, decode_photo
    from training.synth import make_photo

    manifest = read_manifest(render_catalog(SHARED_CATALOG, DEFAULT_CACHE / "catalog", ["sv01"]))
    card_ids = sorted(manifest)
    from models.sessions import Backend

    backend = Backend(kind=args.runtime)
    detector, embedder = CardDetector(backend=backend), CardEmbedder(backend=backend)
    reader = PrintReader(runtime=args.runtime)
    footers = [f"SVI {n:03d}/198" for n in range(1, 6)]
    results: dict[str, Any] = {}
    for size, scale in SIZES.items():
        bodies: list[bytes] = []
        for i in range(args.photos):
            face = np.asarray(Image.open(DEFAULT_CACHE / "catalog" / card_ids[i * 7] / "high.jpg"))
            buffer = io.BytesIO()
            image = make_photo(face, SEED_BASE + i, "standard", scale=scale).image
            Image.fromarray(image).save(buffer, format="JPEG", quality=90)
            bodies.append(buffer.getvalue())
        spent = dict.fromkeys(STAGES, 0.0)
        for start in range(0, len(bodies), args.batch):
            chunk = bodies[start : start + args.batch]
            t = time.process_time()
            for data in chunk:
                np.asarray(decode_image(data))
            spent["decode full"] += time.process_time() - t
            t = time.process_time()
            images = [decode_photo(data) for data in chunk]
            spent["decode working"] += time.process_time() - t
            t = time.process_time()
            quads = detector.locate_batch(images)
            spent["locate"] += time.process_time() - t
            t = time.process_time()
            faces = [
                rectify(image, quad) for image, quad in zip(images, quads, strict=True) if quad is not None
            ]
            spent["rectify"] += time.process_time() - t
            t = time.process_time()
            embedder.embed_batch([view for face in faces for view in (face, half_turn(face))])
            spent["embed x2"] += time.process_time() - t
            t = time.process_time()
            reader.read_batch(faces, [footers] * len(faces))
            spent["read"] += time.process_time() - t
        per_photo = {stage: round(1000 * seconds / len(bodies), 1) for stage, seconds in spent.items()}
        megapixels = np.mean(
            [Image.open(io.BytesIO(b)).size[0] * Image.open(io.BytesIO(b)).size[1] for b in bodies]
        )
        results[size] = {"megapixels": round(float(megapixels) / 1e6, 2), "cpu_ms_per_photo": per_photo}
    machine = host.describe()
    print(f"\nCPU ms per photo, one thread, batch {args.batch}, {args.runtime}; {host.summary(machine)}")
    print(f"{'photos':>6} {'MP':>5} " + " ".join(f"{stage:>14}" for stage in STAGES))
    for size, r in results.items():
        cells = " ".join(f"{r['cpu_ms_per_photo'][stage]:>14.1f}" for stage in STAGES)
        print(f"{size:>6} {r['megapixels']:>5.1f} {cells}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "host": machine,
        "batch": args.batch,
        "photos": args.photos,
        "runtime": args.runtime,
        "sizes": results,
    }
    args.out.write_text(json.dumps(body, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
