"""Scanner latency and throughput through the real HTTP endpoint.

Starts a scanner deployment (PostgreSQL, rendered faces, FAISS index, `cardcat serve --scan`), makes
held-out standard photos up front (so making them does not compete for the CPU), then measures p50/p95
latency at concurrency 1 and throughput at concurrency 4. On a GPU machine run the same command: the
deployments place themselves on the GPU, and the table shows what batching buys.

    .venv/bin/python benchmarks/scan_latency.py [--photos 100] [--expansion ID ...]
        [--concurrency 1,4] [--database postgresql|sqlite]

On a GPU box with no PostgreSQL, `--database sqlite --concurrency 1,4,16,32` measures what batching buys.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `tests.harness` when run as a script

from catalog_api.feed import feed_path, read_jsonl
from tests.harness import REPO, SHARED_CATALOG, launch_scanner
from training.renders import DEFAULT_CACHE, read_manifest, render_catalog

# One key sends every photo: the 300/60 s budget would answer most of them 429.
BENCH_RATE_LIMIT = 100_000_000
SEED_BASE = 13_000_000


def photos(card_ids: list[str], count: int) -> list[bytes]:
    from training.synth import make_photo

    rng = np.random.default_rng(SEED_BASE)
    made = []
    for i, card_id in enumerate(rng.choice(card_ids, size=count, replace=len(card_ids) < count)):
        face = np.asarray(Image.open(DEFAULT_CACHE / "catalog" / str(card_id) / "high.jpg").convert("RGB"))
        buffer = io.BytesIO()
        Image.fromarray(make_photo(face, SEED_BASE + i, "standard").image).save(
            buffer, format="JPEG", quality=90
        )
        made.append(buffer.getvalue())
    return made


async def run(base_url: str, key: str, bodies: list[bytes], concurrency: int) -> dict[str, Any]:
    latencies: list[float] = []
    queue = list(bodies)

    async def worker(client: httpx.AsyncClient) -> None:
        while queue:
            body = queue.pop()
            started = time.perf_counter()
            response = await client.post("/v1/scan", files={"image": ("p.jpg", body, "image/jpeg")})
            response.raise_for_status()
            latencies.append((time.perf_counter() - started) * 1000)

    async with httpx.AsyncClient(
        base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=120
    ) as c:
        for body in bodies[:3]:  # warm-up
            await c.post("/v1/scan", files={"image": ("p.jpg", body, "image/jpeg")})
        started = time.perf_counter()
        await asyncio.gather(*(worker(c) for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return {
        "concurrency": concurrency,
        "scans": len(latencies),
        "scans_per_s": len(latencies) / elapsed,
        "p50_ms": float(np.percentile(latencies, 50)),
        "p95_ms": float(np.percentile(latencies, 95)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--photos", type=int, default=100)
    parser.add_argument("--expansion", action="append")
    parser.add_argument("--concurrency", default="1,4", help="comma-separated levels; the first is p50's")
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scan_latency.json")
    args = parser.parse_args()
    expansions = args.expansion or [e["id"] for e in read_jsonl(feed_path(SHARED_CATALOG, "expansions"))]
    manifest = read_manifest(render_catalog(SHARED_CATALOG, DEFAULT_CACHE / "catalog", expansions))
    wanted = set(expansions)
    records = read_jsonl(feed_path(SHARED_CATALOG, "cards"))
    card_ids = sorted(c["id"] for c in records if c["expansion_id"] in wanted and c["id"] in manifest)
    bodies = photos(card_ids, args.photos)
    with tempfile.TemporaryDirectory(prefix="cardcat-scan-latency-") as tmp:
        service = launch_scanner(
            Path(tmp), tuple(expansions), args.database, CARDCAT_RATE_LIMIT=str(BENCH_RATE_LIMIT)
        )
        try:
            levels = [int(c) for c in args.concurrency.split(",")]
            results = [asyncio.run(run(service.base_url, service.key, bodies, c)) for c in levels]
        finally:
            service.stop()
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU x{os.cpu_count()}"
    print(f"\n{'concurrency':>11} {'scans':>6} {'scans/s':>8} {'p50 ms':>8} {'p95 ms':>8}   on {device}")
    for r in results:
        rate, p50_ms, p95_ms = r["scans_per_s"], r["p50_ms"], r["p95_ms"]
        print(f"{r['concurrency']:>11} {r['scans']:>6} {rate:>8.2f} {p50_ms:>8.0f} {p95_ms:>8.0f}")
    p50 = results[0]["p50_ms"]
    level = results[0]["concurrency"]
    print(f"target p50 <= 250 ms at concurrency {level}: {p50:.0f} ms {'MET' if p50 <= 250 else 'NOT MET'}")
    meta = {
        "device": device,
        "cards_indexed": len(card_ids),
        "database": args.database,
        "python": platform.python_version(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
