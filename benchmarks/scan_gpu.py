"""The scanner's models on one device, in-process: scans/s by batch size and worker processes.

`benchmarks/scan_load.py` measures the product through its real ingress; this measures what one GPU (or
this CPU) can do for the three models once Ray and HTTP are out of the way, with the very code the
replicas run (`serve_app.stages`, the models, the fusion): decode (nvJPEG on a GPU) and locate and
rectify, embed both ways up and search the full index (one exact matrix product on a GPU), read the print
with the race's footers, fuse. Each worker process loads its own models and loops over batches of
photos for a fixed time; stages run one after another in a worker, so several workers are what keep the
device busy (as several replicas would).

A GPU box here has torch but no Ray (docTR, faiss and RapidFuzz travel as wheels: docs/benchmarks.md),
and none of `../shared`, so the photos and the index are made beforehand on a machine that has both and
carried over:

    .venv/bin/python benchmarks/scan_gpu.py prepare DIR [--photos 48]   # full-catalog index + 2 MP photos
    python3 benchmarks/scan_gpu.py run DIR [--device cuda] [--batch 1,8,32,64] [--workers 1,4,8] [--warmup 5]

Each row times one wall-clock window, the same for every worker, opening `--warmup` seconds (default 5)
after the row starts; until then the workers scan untimed: a network's first call at each input shape
can cost far more than the rest (on a GPU, the compiled reader's JIT compiled a kernel for each new
batch size), and the stages meet many batch sizes. `run` prints a table and writes JSON (`--out`). Per
row: scans/s over all workers (the scans inside the window, a batch across its edge counted for its
share), each batch's wall time (p50), the stages' wall ms per scan, host CPU ms per scan (user+system of
the workers, the CUDA driver's threads included), top-1 of the photos, device memory per worker.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = Path(__file__).resolve().parents[1]
SEED_BASE = 16_000_000
STAGES = ("decode+locate", "search", "read", "fuse")


# ------------------------------------------------------------------------------------------- prepare
def prepare(
    out: Path, count: int, size: str, only: list[str] | None = None, deployment: bool = False
) -> None:
    """`out/index`: the index `cardcat index build` makes of the catalog (every expansion, or `only`;
    SQLite deployment); `out/photos/*.jpg` + `out/photos.json`: phone photos of random indexed cards, as
    scan_load makes them. With `deployment`, the deployment too, for `cardcat serve` over it
    (`benchmarks/scan_gpu_stack.py`): its database as `out/cardcat.db` and its data dir as
    `out/deployment`, less the card images (scans never read them) and the index (`out/index`)."""
    from benchmarks.scan_load import make_photos
    from cardcat.stack import SHARED_CATALOG, Service, create_database, require_shared, write_subset_feed
    from catalog_api.ingest.feed import feed_path, read_jsonl
    from training.renders import DEFAULT_CACHE, read_manifest, render_catalog

    require_shared()
    expansions = tuple(only or (e["id"] for e in read_jsonl(feed_path(SHARED_CATALOG, "expansions"))))
    faces = DEFAULT_CACHE / "catalog"
    manifest = read_manifest(render_catalog(SHARED_CATALOG, faces, expansions))
    cards = read_jsonl(feed_path(SHARED_CATALOG, "cards"))
    card_ids = sorted(c["id"] for c in cards if c["id"] in manifest and c["expansion_id"] in expansions)
    with tempfile.TemporaryDirectory(prefix="cardcat-scan-gpu-") as tmp:
        service = Service(create_database("sqlite", Path(tmp)), Path(tmp) / "data")
        service.cli("db", "upgrade")
        feed = write_subset_feed(Path(tmp) / "feed", expansions)
        service.cli("catalog", "sync", "--from", str(feed), "--images", str(faces), "--quiet")
        service.cli("index", "build", "--quiet")
        shutil.rmtree(out / "index", ignore_errors=True)
        shutil.copytree(Path(tmp) / "data" / "index", out / "index")
        if deployment:
            shutil.rmtree(out / "deployment", ignore_errors=True)
            top = str(Path(tmp) / "data")
            shutil.copytree(
                top, out / "deployment", ignore=lambda d, _: ["images", "index"] if d == top else []
            )
            (out / "cardcat.db").unlink(missing_ok=True)
            source = sqlite3.connect(service.db.url.removeprefix("sqlite:///"))
            target = sqlite3.connect(out / "cardcat.db")
            try:
                source.backup(target)
            finally:
                source.close()
                target.close()
    photos = make_photos(card_ids, size, count, SEED_BASE)
    (out / "photos").mkdir(parents=True, exist_ok=True)
    for i, photo in enumerate(photos):
        (out / "photos" / f"{i:04d}.jpg").write_bytes(photo.body)
    labels = [
        {"file": f"{i:04d}.jpg", "card_id": p.card_id, "megapixels": p.megapixels}
        for i, p in enumerate(photos)
    ]
    (out / "photos.json").write_text(json.dumps(labels, indent=1))
    print(f"wrote {out}: index of {len(card_ids)} cards, {len(photos)} photos of ~{size}")


# ----------------------------------------------------------------------------------------------- run
@dataclasses.dataclass
class Spent:
    """One worker's share of one row."""

    scans: int = 0  # in batches that overlapped the timed window
    scans_in_window: float = 0.0  # their share inside it: the rate's numerator
    right: int = 0
    seconds: float = 0.0
    cpu_s: float = 0.0
    batch_ms: list[float] = dataclasses.field(default_factory=list)
    stages_s: dict[str, float] = dataclasses.field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    device_mib: float = 0.0


def scan_batch(models: dict[str, Any], bodies: list[bytes], spent: Spent) -> list[str | None]:
    """Each photo's top card (None: unidentified or refused), the replicas' stages run back to back."""
    from models.geometry import half_turn
    from serve_app.fusion import Hits, Read, better_turn, decide, footer_candidates, picture_answer
    from serve_app.stages import Face, locate_photos, search_faces

    detector, embedder, reader, bundle, thresholds = (
        models[k] for k in ("detector", "embedder", "reader", "bundle", "thresholds")
    )
    clock = time.perf_counter()
    sizes = [embedder.input_size] * len(bodies)
    found = locate_photos(detector, bodies, models["on_device"], thumbnails=sizes)
    located = [(i, face) for i, face in enumerate(found) if isinstance(face, Face)]
    faces = [(i, face.pixels) for i, face in located]
    now = time.perf_counter()
    spent.stages_s["decode+locate"] += now - clock
    clock = now
    thumbnails = [face.thumbnail for _, face in located if face.thumbnail is not None]
    hits = search_faces(embedder, bundle.index, thumbnails, models["top_k"])
    now = time.perf_counter()
    spent.stages_s["search"] += now - clock
    clock = now
    turned = [better_turn(False, True, up, down) for up, down in hits]
    answers: list[str | None] = [None] * len(bodies)
    # As `ScanPipeline.scan`: a face is read only where the print could change the answer.
    to_read: list[tuple[int, np.ndarray, bool, Hits]] = []
    for (i, face), (turn, h) in zip(faces, turned, strict=True):
        decision = picture_answer(dict(h), bundle.table, thresholds)
        if decision is None:
            to_read.append((i, face, turn, h))
        else:
            answers[i] = decision.matches[0][0]
    now = time.perf_counter()
    spent.stages_s["fuse"] += now - clock
    clock = now
    footers = [footer_candidates(h, bundle.table, thresholds.race_window) for _, _, _, h in to_read]
    views = [half_turn(face) if turn else face for _, face, turn, _ in to_read]
    reads = reader.read_batch(views, footers) if views else []
    now = time.perf_counter()
    spent.stages_s["read"] += now - clock
    clock = now
    for (i, _, _, h), read in zip(to_read, reads, strict=True):
        decision = decide(dict(h), Read(**dataclasses.asdict(read)), bundle.table, thresholds)
        answers[i] = decision.matches[0][0] if decision.matches else None
    spent.stages_s["fuse"] += time.perf_counter() - clock
    return answers


def load_models(directory: Path, device: str, pixels: str, reader: str = "compiled") -> dict[str, Any]:
    """`pixels`: "device" decodes and rectifies on a GPU (what a GPU replica does), "host" with Pillow
    and OpenCV (what a CPU replica does; on a GPU, for comparison). `reader`: "compiled" (the shipped
    TorchScript network, what a replica loads) or "eager" (docTR's model built from the weights)."""
    from models.detector import CardDetector
    from models.embedder import CardEmbedder
    from models.ocr import COMPILED, PrintReader
    from serve_app.config import ScanConfig
    from serve_app.index_bundle import load_bundle

    bundle = load_bundle(directory / "index")
    if bundle is None:
        raise SystemExit(f"no index in {directory / 'index'}: run `prepare` first")
    on_device = device.startswith("cuda") and pixels == "device"
    if device.startswith("cuda"):
        bundle.index.search_on(device)
    print_reader = PrintReader(device=device, compiled=COMPILED if reader == "compiled" else None)
    networks = (CardDetector(device=device), CardEmbedder(device=device), print_reader)
    for network in networks:
        network.warm()
    config = ScanConfig(index_dir=str(directory / "index"))  # the app's defaults: thresholds, top_k
    return {
        **dict(zip(("detector", "embedder", "reader"), networks, strict=True)),
        "bundle": bundle,
        "thresholds": config.fusion_thresholds(),
        "top_k": config.top_k,
        "on_device": on_device,
    }


def worker(
    rank: int, args: dict[str, Any], rows: list[tuple[int, int]], start: Any, done: Any, results: Any
) -> None:
    """Loads the models once, then for each (workers, batch) row: waits for every worker, and if its rank
    takes part, scans batches for `seconds` and reports its `Spent`. A worker that fails breaks both
    barriers, so the run stops at once instead of waiting out their timeouts."""
    try:
        scan_rows(rank, args, rows, start, done, results)
    except BaseException:
        start.abort()
        done.abort()
        raise


def scan_rows(
    rank: int, args: dict[str, Any], rows: list[tuple[int, int]], start: Any, done: Any, results: Any
) -> None:
    import cv2
    import torch

    torch.set_num_threads(args["threads"])
    cv2.setNumThreads(args["threads"])
    directory = Path(args["dir"])
    labels = json.loads((directory / "photos.json").read_text())
    bodies = [(directory / "photos" / label["file"]).read_bytes() for label in labels]
    truth = [label["card_id"] for label in labels]
    models = load_models(directory, args["device"], args["pixels"], args["reader"])
    on_cuda = args["device"].startswith("cuda")
    for workers, batch in rows:
        start.wait()
        # Every worker leaves the barrier within milliseconds, so `time.time()` from here is a clock they
        # share: the timed window is one wall-clock span for all of them, and their scans in it add up
        # to the node's rate. (Each timing its own span from the end of its own warm-up, as this did until
        # 2026-11-27, let the spans drift apart by up to a batch; with more workers than cores the edges,
        # where fewer workers competed, inflated the sum: 24 workers on 16 cores "ran" more CPU-seconds
        # a second than the machine has.)
        opens = time.time() + args["warmup"]
        closes = opens + args["seconds"]
        if rank < workers:
            spent, n = Spent(), rank * 7  # workers start at different photos
            warm = [bodies[j % len(bodies)] for j in range(batch)]
            scan_batch(models, warm, Spent())  # this batch size's first-call costs, untimed
            if on_cuda:
                torch.cuda.reset_peak_memory_stats()
            while (began := time.time()) < closes or not spent.scans:  # one batch timed at least
                picked = [(n + j) % len(bodies) for j in range(batch)]
                n += batch
                cpu, this = os.times(), Spent()
                answers = scan_batch(models, [bodies[j] for j in picked], this)
                ended, after = time.time(), os.times()
                if ended <= opens:  # warming up: the stages' other batch sizes, untimed
                    continue
                # A batch across an edge of the window counts for its share inside it; its CPU, stage
                # times and answers count whole (per scan they are the same either way).
                inside = max(0.0, min(ended, closes) - max(began, opens))
                spent.scans_in_window += batch * inside / (ended - began)
                spent.batch_ms.append(1000 * (ended - began))
                spent.scans += batch
                spent.right += sum(answer == truth[j] for answer, j in zip(answers, picked, strict=True))
                spent.cpu_s += (after.user - cpu.user) + (after.system - cpu.system)
                for stage, seconds in this.stages_s.items():
                    spent.stages_s[stage] += seconds
            spent.seconds = args["seconds"]
            if on_cuda:
                spent.device_mib = torch.cuda.max_memory_allocated() / 2**20
            results.put((rank, dataclasses.asdict(spent)))
        done.wait()


def summarise(workers: int, batch: int, shares: list[dict[str, Any]]) -> dict[str, Any]:
    scans = sum(s["scans"] for s in shares)
    seconds = shares[0]["seconds"]  # one window, the same for every worker
    batch_ms = [ms for s in shares for ms in s["batch_ms"]]
    return {
        "workers": workers,
        "batch": batch,
        "scans": scans,
        "scans_per_s": sum(s["scans_in_window"] for s in shares) / seconds,
        "batch_p50_ms": float(np.percentile(batch_ms, 50)),
        "batch_p95_ms": float(np.percentile(batch_ms, 95)),
        "stage_ms_per_scan": {
            stage: round(1000 * sum(s["stages_s"][stage] for s in shares) / scans, 2) for stage in STAGES
        },
        "cpu_ms_per_scan": 1000 * sum(s["cpu_s"] for s in shares) / scans,
        "top1": sum(s["right"] for s in shares) / scans,
        "device_mib_per_worker": max(s["device_mib"] for s in shares),
    }


HEADER = (
    f"{'workers':>7} {'batch':>5} {'scans/s':>8} {'batch p50':>9} {'p95':>6} "
    + " ".join(f"{stage:>13}" for stage in STAGES)
    + f" {'CPU ms/scan':>11} {'top-1':>6} {'dev MiB':>7}"
)


def print_row(r: dict[str, Any]) -> None:
    stages = " ".join(f"{r['stage_ms_per_scan'][stage]:>13.2f}" for stage in STAGES)
    print(
        f"{r['workers']:>7} {r['batch']:>5} {r['scans_per_s']:>8.1f} {r['batch_p50_ms']:>9.1f} "
        f"{r['batch_p95_ms']:>6.1f} {stages} {r['cpu_ms_per_scan']:>11.1f} {100 * r['top1']:>5.1f}% "
        f"{r['device_mib_per_worker']:>7.0f}",
        flush=True,
    )


def run(args: argparse.Namespace) -> None:
    import torch

    batches = [int(b) for b in args.batch.split(",")]
    worker_counts = [int(w) for w in args.workers.split(",")]
    rows = [(w, b) for w in worker_counts for b in batches]
    spawn = mp.get_context("spawn")  # CUDA cannot be initialised in a forked child
    most = max(worker_counts)
    start, done, results = spawn.Barrier(most + 1), spawn.Barrier(most + 1), spawn.Queue()
    config = {
        "dir": str(args.dir),
        "device": args.device,
        "pixels": args.pixels,
        "seconds": args.seconds,
        "warmup": args.warmup,
        "threads": args.threads,
        "reader": args.reader,
    }
    procs = [spawn.Process(target=worker, args=(r, config, rows, start, done, results)) for r in range(most)]
    for p in procs:
        p.start()
    device = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else f"CPU x{os.cpu_count()}"
    print(f"{most} workers on {device}, {args.seconds:.0f} s a row, photos decoded on the {args.pixels}")
    print(HEADER)
    out = []
    try:
        for workers, batch in rows:
            start.wait(timeout=600)
            shares = [results.get(timeout=10 * args.seconds + args.warmup + 120)[1] for _ in range(workers)]
            done.wait(timeout=600)
            out.append(summarise(workers, batch, shares))
            print_row(out[-1])
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
    labels = json.loads((args.dir / "photos.json").read_text())
    meta = {
        "device": device,
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "photos": len(labels),
        "photo_megapixels": round(float(np.mean([label["megapixels"] for label in labels])), 2),
        "cards_indexed": len(json.loads((args.dir / "index" / "meta.json").read_text())["card_ids"]),
        "seconds_per_row": args.seconds,
        "warmup_seconds_per_row": args.warmup,
        "reader": args.reader,
        "threads_per_worker": args.threads,
        "pixels": args.pixels if args.device.startswith("cuda") else "host",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": out}, indent=2))
    best = max(out, key=lambda r: r["scans_per_s"])
    print(f"best: {best['scans_per_s']:.0f} scans/s ({best['workers']} workers x batch {best['batch']})")
    print(f"wrote {args.out}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="make the index and photos (needs ../shared and the project's venv)")
    p.add_argument("dir", type=Path)
    p.add_argument("--photos", type=int, default=48)
    p.add_argument("--size", default="2mp", help="12mp, 2mp or 0.5mp (benchmarks/scan_load.py's sizes)")
    p.add_argument("--expansion", action="append", help="index only these (default: every card)")
    r = sub.add_parser("run", help="time the models on a device")
    r.add_argument("dir", type=Path)
    r.add_argument("--device", default="cuda" if _has_cuda() else "cpu")
    r.add_argument("--batch", default="1,8,32,64")
    r.add_argument("--workers", default="1,4,8")
    r.add_argument("--seconds", type=float, default=6.0, help="timed seconds per row")
    r.add_argument(
        "--warmup",
        type=float,
        default=5.0,
        help="seconds from a row's start to its timed window, scanning untimed (the first batch, with its "
        "first-call costs, included): the stages meet batch sizes other than the row's (faces found, lines "
        "re-read), and a network's first call at each shape can cost far more",
    )
    r.add_argument("--threads", type=int, default=1, help="torch/OpenCV threads per worker")
    r.add_argument("--reader", choices=("compiled", "eager"), default="compiled", help="the reader's network")
    r.add_argument("--pixels", choices=("device", "host"), default="device", help="where a GPU run decodes")
    r.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scan_gpu.json")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.dir, args.photos, args.size, args.expansion)
    else:
        run(args)
    return 0


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    raise SystemExit(main())
