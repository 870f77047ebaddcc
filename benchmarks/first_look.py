"""The scan cascade's gate (#47), judged on validation photos: what the cheap first look would answer,
against what the full pipeline answers for the same photo.

Builds the full catalog's index with the real CLI (as `benchmarks/fusion_sweep.py` does), then sends each
validation photo (training.synth, seeds 20,000,000+: the split thresholds are chosen on, apart from the
accuracy benchmark's photos and cards) through the Detector's own steps in-process, as JPEG bytes,
twice: with the cascade's first look (`CardDetector.first_look_batch`: the whole-photo view alone)
and with the full pipeline. Each face is
searched and fused as `serve_app.pipeline` does. Per bucket it prints how often the first look found an
card (`found`), how often its answer was `certain` (the cascade keeps only those: the quick path's
share), how many of those differ from the full pipeline's answer or are wrong, and what the first look
and the full pipeline cost in this process (one thread, milliseconds a photo, rectification included).

    .venv/bin/python benchmarks/first_look.py [--standard 300 --hard 300 --nocard 100]
        [--out benchmarks/results/first_look_validation.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `cardcat.stack` when run as a script

from benchmarks import host
from benchmarks.fusion_sweep import SEED_BASE, build_index
from benchmarks.scan_accuracy import job_photo, jpeg, photo_jobs
from cardcat.stack import REPO, SHARED_CATALOG
from catalog_api.ingest.feed import feed_path, read_jsonl
from serve_app.fusion import (
    Hits,
    PrintTable,
    Read,
    better_turn,
    decide,
    first_look_answer,
    footer_candidates,
    picture_answer,
)
from training.renders import DEFAULT_CACHE, read_manifest, render_catalog


def _hits(models: dict[str, Any], face: Any) -> tuple[bool, Hits]:
    """The face's index hits the better way up, and whether that is turned 180° (`ScanPipeline._search`)."""
    from serve_app.stages import search_faces

    upright, upside_down = search_faces(models["embedder"], models["index"], [face.thumbnail], 32)[0]
    return better_turn(False, True, upright, upside_down)


def decide_face(models: dict[str, Any], face: Any, table: PrintTable) -> tuple[list[str], str]:
    """A located face's matches and tier, by the steps `ScanPipeline.scan` takes."""
    from models.geometry import half_turn

    turned, hits = _hits(models, face)
    decision = picture_answer(dict(hits), table)
    if decision is None:
        footers = [footer_candidates(hits, table)]
        pixels = half_turn(face.pixels) if turned else face.pixels
        read = models["reader"].read_batch([pixels], footers)[0]
        decision = decide(dict(hits), Read(**dataclasses.asdict(read)), table)
    return [card_id for card_id, _ in decision.matches], decision.tier


def quick_answer(models: dict[str, Any], face: Any, table: PrintTable) -> tuple[list[str], str]:
    """A first look's answer as `ScanPipeline.quick_answer` gives it (`fusion.first_look_answer`); else
    `review` (the scanner then runs the full pipeline)."""
    decision = first_look_answer(dict(_hits(models, face)[1]), table)
    if decision is None:
        return [], "review"
    return [card_id for card_id, _ in decision.matches], decision.tier


def observe(models: dict[str, Any], table: PrintTable, job: dict[str, Any]) -> None:
    """One photo both ways, as the Detector replica runs them: `quick` (the first look's answer, or None
    where it fit no card) and `full` (the full pipeline's), with each way's milliseconds."""
    from serve_app.stages import Face, locate_photos

    data = jpeg(job_photo(job).image)
    size = models["embedder"].input_size
    for way, look in (("quick", True), ("full", False)):
        timings: list[dict[str, float]] = [{}]
        face = locate_photos(models["detector"], [data], False, timings, [size], [look])[0]
        job[f"{way}_ms"] = 1000 * timings[0].get("look" if look else "locate", 0.0)
        if look and not (isinstance(face, Face) and face.first_look):
            job["quick"] = None  # no card in the whole-photo view: the photo went on to the full pipeline
            continue
        if not isinstance(face, Face):
            job[way] = ([], "review")
        elif look:  # as `ScanPipeline.quick_answer`: only what the picture alone answers, never read
            job[way] = quick_answer(models, face, table)
        else:
            job[way] = decide_face(models, face, table)


def summarise(jobs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per bucket: cards the first look found, the quick path's share (its certain answers), and how
    those differ from the full pipeline's."""
    buckets: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for job in jobs:
        buckets[job["kind"] if job["kind"] == "nocard" else f"{job['kind']}.{job['artwork']}"].append(job)
        buckets["all"].append(job)
    out = {}
    for name, group in sorted(buckets.items()):
        looked = [j for j in group if j["quick"] is not None]
        quick = [j for j in looked if j["quick"][1] == "certain"]
        out[name] = {
            "photos": len(group),
            "first_look_found": len(looked),
            "quick": len(quick),
            "quick_share": round(len(quick) / max(1, len(group)), 4),
            "quick_differs_from_full": sum(1 for j in quick if j["quick"][0] != j["full"][0]),
            "quick_wrong": sum(1 for j in quick if j["quick"][0] != [j.get("card_id")]),
            "full_wrong_where_quick_answered": sum(1 for j in quick if j["full"][0] != [j.get("card_id")]),
            "first_look_ms_p50": round(float(np.median([j["quick_ms"] for j in group])), 2),
            "full_pipeline_ms_p50": round(float(np.median([j["full_ms"] for j in group])), 2),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--standard", type=int, default=300)
    parser.add_argument("--hard", type=int, default=300)
    parser.add_argument("--nocard", type=int, default=100)
    parser.add_argument(
        "--out", type=Path, default=REPO / "benchmarks" / "results" / "first_look_validation.json"
    )
    parser.add_argument("--index", type=Path, help="a directory to keep the built index in, and reuse")
    args = parser.parse_args()
    import cv2
    import torch

    from models.detector import CardDetector
    from models.embedder import CardEmbedder
    from models.index import CardIndex
    from models.ocr import PrintReader

    torch.set_num_threads(1)  # as a replica runs (serve_app.app._limit_threads)
    cv2.setNumThreads(1)
    manifest = read_manifest(render_catalog(SHARED_CATALOG, DEFAULT_CACHE / "catalog", progress=False))
    card_ids = sorted(c["id"] for c in read_jsonl(feed_path(SHARED_CATALOG, "cards")) if c["id"] in manifest)
    counts = {"standard": args.standard, "hard": args.hard, "nocard": args.nocard}
    jobs = photo_jobs("synth", "hard", counts, card_ids, manifest, base=SEED_BASE)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cardcat-look-") as tmp:
        root = args.index or Path(tmp)
        built = root / "data" / "index"
        index_dir = built if (built / "meta.json").exists() else build_index(root)
        table = PrintTable.from_records(json.loads((index_dir / "cards.json").read_text()))
        models = {
            "detector": CardDetector(),
            "embedder": CardEmbedder(),
            "reader": PrintReader(),
            "index": CardIndex.load(index_dir),
        }
        for job in tqdm(jobs, desc="photos", unit=" photos"):
            observe(models, table, job)
    summary = summarise(jobs)
    print(f"observed {len(jobs)} photos in {time.perf_counter() - started:.0f} s")
    print("bucket | photos | found | quick (certain) | differs from full | wrong | first look ms | full ms")
    for name, row in summary.items():
        share = f"{row['quick']} ({100 * row['quick_share']:.1f}%)"
        print(
            f"{name} | {row['photos']} | {row['first_look_found']} | {share}"
            f" | {row['quick_differs_from_full']} | {row['quick_wrong']} | {row['first_look_ms_p50']}"
            f" | {row['full_pipeline_ms_p50']}"
        )
    report = {
        "command": " ".join(["benchmarks/first_look.py", *sys.argv[1:]]),
        "host": host.describe(),
        "summary": summary,
        "differs": [
            {k: j.get(k) for k in ("kind", "seed", "card_id", "quick", "full")}
            for j in jobs
            if j["quick"] is not None and j["quick"][1] == "certain" and j["quick"][0] != j["full"][0]
        ],
    }
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
