"""The scanner's floor: what the server spends per scan when the networks cost nothing.

#12 asks for <= 40 ms of server CPU per scan on a 2-core machine while detection, OCR and embedding
stay separate Ray Serve deployments with `@serve.batch`. This measures the part of a scan's CPU that
no model work can remove under that layout. The server is the one `benchmarks/scan_load.py` loads: the
real `cardcat serve --scan` ingress (HTTP, key check, rate limit, the catalog lookup of the matches)
composing each scan with `ScanPipeline` over DeploymentHandles, on a Ray instance started as
`cardcat serve` starts it (`serve_app.local.start_ray`), the app `serve_app.app.build_app` builds (the
same options, batching, thread limits, the real `ScanService`), with each model deployment's work
replaced by a stand-in that answers at once:

- Detector: the real deployment with `locate_photos` answering a blank 600x838 face and thumbnail for
  every photo, undecoded: the photo's bytes still come in, the face still goes to the object store
  (`ray.put`) and the thumbnail back inline;
- Reader: the real deployment with a reading model that returns a blank read with a score for every
  footer line it was given: it still fetches the face from the object store;
- Embedder: batches like the real one and answers every face with the index's first 32 cards both
  ways up (the first five within the race window: five footer lines to score, a typical reprint race).

Scans are posted in a closed loop, real 2 MP phone photos (`scan_load.py`'s). Server CPU is every
process of Ray's instance and of the ingress over the timed window, by process, as `scan_load.py`
counts it; with idle, what Ray spends per second with nothing to do.

    .venv/bin/python benchmarks/scan_floor.py [--concurrency 1,16] [--scans 400] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import secrets
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from ray import serve
from ray.serve.metrics import Counter

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import host
from benchmarks.ray_side import publish_and_hold, ray_side
from benchmarks.scan_load import (
    BENCH_RATE_LIMIT,
    SIZES,
    by_role,
    cpu_seconds,
    make_photos,
    memory_kib,
    process_tree,
)
from cardcat.stack import SHARED_CATALOG, Service, create_database, write_subset_feed
from catalog_api.ingest.feed import feed_path, read_jsonl
from models.geometry import FACE_SIZE
from serve_app.app import (
    BATCH_WAIT_S,
    DETECTOR_CALLS_METRIC,
    FACES_HELD,
    Detector,
    Embedder,
    Reader,
    _set_batching,
    compose_app,
)
from serve_app.config import ScanConfig
from serve_app.fusion import Hits, PrintTable, Read
from serve_app.local import APP_NAME, SERVE_PACE, start_ray
from serve_app.priority import InteractiveFirst
from serve_app.stages import Face
from training.renders import DEFAULT_CACHE, read_manifest, render_catalog

SEED_BASE = 14_000_000  # scan_load.py's photos
STAMP = "floor"
THUMBNAIL = (96, 134)  # the shipped embedder's input (width, height): models/weights/embedder.json


@serve.deployment(max_ongoing_requests=32)
class BareDetector(Detector.func_or_class):  # type: ignore[name-defined]
    """The Detector deployment with no decoding and no network: every photo is a blank face."""

    def __init__(self, *_model: Any, batch_wait_ms: float = 0.0, **_options: Any) -> None:
        """Takes what `build_app` binds `Detector` with (its signature is not copied here) and keeps
        only the batching."""
        self.on_device = False
        self.handed_out: deque[Any] = deque(maxlen=FACES_HELD)
        _set_batching(self.locate_batch, {"batch_wait_ms": batch_wait_ms})
        self.gate = InteractiveFirst(1, 8, 0.5)
        self.calls = Counter(DETECTOR_CALLS_METRIC, tag_keys=("priority",))
        self.face = np.zeros((FACE_SIZE[1], FACE_SIZE[0], 3), np.uint8)

    def locate_photos(
        self,
        photos: list[bytes],
        timings: list[dict[str, float]] | None = None,
        thumbnails: list[tuple[int, int]] | None = None,
        looks: list[bool] | None = None,
        coarse: list[Any] | None = None,
    ) -> list[Face]:
        """Every photo found by the full pipeline (a first look would change nothing here)."""
        sizes = thumbnails or [THUMBNAIL for _ in photos]
        return [Face(self.face, np.zeros((h, w, 3), np.uint8)) for w, h in sizes]


class BlankReading:
    """Stands in for `models.ocr.PrintReader`: nothing read, every footer line scored."""

    def read_batch(self, faces: list[np.ndarray], footers: list[list[str]]) -> list[Read]:
        return [Read(footer_scores={line: -1.0 for line in lines}) for lines in footers]


@serve.deployment(max_ongoing_requests=32)
class BareReader(Reader.func_or_class):  # type: ignore[name-defined]
    """The Reader deployment with `BlankReading` for its network."""

    def __init__(self, *_model: Any, batch_wait_ms: float = 0.0, **_options: Any) -> None:
        """Takes what `build_app` binds `Reader` with (its signature is not copied here) and keeps only
        the batching."""
        self.model = BlankReading()
        _set_batching(self.read, {"batch_wait_ms": batch_wait_ms})


@serve.deployment(max_ongoing_requests=32)
class BareEmbedder:
    """The Embedder's interface and batching over the index's print table, with no network and no
    search: every face gets the same hits."""

    def __init__(self, *model: Any, **options: Any) -> None:
        """Takes what `build_app` binds `Embedder` with, read by `Embedder`'s own signature (not copied
        here): the index's print table, `top_k` and the batching."""
        embedder_class: Any = Embedder.func_or_class  # type: ignore[attr-defined]  # a Ray deployment
        bound = inspect.signature(embedder_class.__init__).bind(self, *model, **options)
        bound.apply_defaults()
        index_dir, top_k = bound.arguments["index_dir"], bound.arguments["top_k"]
        batch_wait_ms = bound.arguments["batch_wait_ms"]
        self.table = PrintTable.from_records(json.loads((Path(index_dir) / "cards.json").read_text()))
        cards = sorted(self.table.cards)[:top_k]
        self.hits: Hits = [
            (card, 0.93 - 0.01 * i if i < 5 else 0.80 - 0.001 * i) for i, card in enumerate(cards)
        ]
        _set_batching(self.search, {"batch_wait_ms": batch_wait_ms})

    def reconfigure(self, config: dict[str, Any]) -> None:
        _set_batching(self.search, config)

    def print_table(self) -> tuple[str, PrintTable]:
        return STAMP, self.table

    def input_size(self) -> tuple[int, int]:
        return THUMBNAIL

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=BATCH_WAIT_S)
    async def search(self, faces: list[np.ndarray]) -> list[tuple[Hits, Hits, str]]:
        def run() -> list[tuple[Hits, Hits, str]]:
            return [(self.hits, self.hits, STAMP) for _ in faces]

        return await asyncio.to_thread(run)


def serve_stand_ins(index_dir: str, address_file: str) -> int:
    """The Ray side, in a process of its own (so its process tree is Ray's): start Ray, deploy the app
    with the stand-ins, write the cluster's address to `address_file`, and hold it until stdin closes."""
    import ray

    started = time.perf_counter()
    start_ray()
    serve.start(proxy_location="Disabled", logging_config={"log_level": "WARNING"})
    config = ScanConfig(index_dir=index_dir, device="cpu")
    stand_ins = {"detector": BareDetector, "embedder": BareEmbedder, "reader": BareReader}
    serve.run(compose_app(config.as_dict(), classes=stand_ins), name=APP_NAME, blocking=False)
    pace = {name: os.environ[name] for name in SERVE_PACE}
    up = {"address": ray.get_runtime_context().gcs_address, "start_s": time.perf_counter() - started, **pace}
    publish_and_hold(address_file, up)
    return 0


def server_pids(roots: list[int]) -> list[int]:
    return [pid for root in roots for pid in process_tree(root)]


def server_cpu(roots: list[int]) -> dict[int, float]:
    return cpu_seconds(server_pids(roots))


async def closed_loop(
    client: httpx.AsyncClient, photos: list[bytes], concurrency: int, scans: int, roots: list[int]
) -> dict[str, Any]:
    """`scans` scans, `concurrency` at a time: latencies, statuses, and the server's CPU by process."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    issued = 0

    async def worker() -> None:
        nonlocal issued
        while issued < scans:
            photo = photos[issued % len(photos)]
            issued += 1
            started = time.perf_counter()
            response = await client.post("/v1/scan", files={"image": ("photo.jpg", photo, "image/jpeg")})
            latencies.append(1000 * (time.perf_counter() - started))
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

    before = server_cpu(roots)
    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds = time.perf_counter() - started
    pids = server_pids(roots)
    roles = by_role(before, cpu_seconds(pids))
    rss, pss = memory_kib(pids)
    return {
        "concurrency": concurrency,
        "scans": scans,
        "scans_per_s": scans / seconds,
        "p50_ms": float(np.percentile(latencies, 50)),
        "p95_ms": float(np.percentile(latencies, 95)),
        "errors": {str(s): n for s, n in statuses.items() if s != 200},
        "server_cpu_ms_per_scan": 1000 * sum(roles.values()) / scans,
        "cpu_ms_per_scan_by_process": {
            name: round(1000 * t / scans, 1) for name, t in sorted(roles.items(), key=lambda kv: -kv[1])
        },
        "server_rss_gib": rss / 2**20,
        "server_pss_gib": pss / 2**20,
    }


async def measure(
    base_url: str, key: str, photos: list[bytes], roots: list[int], args: Any
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as client:
        for photo in photos[:16]:  # every process's first calls, off the clock
            (
                await client.post("/v1/scan", files={"image": ("photo.jpg", photo, "image/jpeg")})
            ).raise_for_status()
        before = server_cpu(roots)
        await asyncio.sleep(args.idle_seconds)
        idle = by_role(before, server_cpu(roots))
        idle_per_s = {name: round(1000 * t / args.idle_seconds, 1) for name, t in idle.items()}
        print(f"idle: {sum(idle_per_s.values()):.0f} ms of CPU a second {idle_per_s}", flush=True)
        rows = []
        for concurrency in args.concurrency:
            runs = [
                await closed_loop(client, photos, concurrency, args.scans, roots) for _ in range(args.repeat)
            ]
            runs.sort(key=lambda r: r["server_cpu_ms_per_scan"])
            row = runs[len(runs) // 2] | {
                "runs_cpu_ms_per_scan": [round(r["server_cpu_ms_per_scan"], 1) for r in runs]
            }
            rows.append(row)
            print(
                f"c{concurrency:<3} {row['scans_per_s']:6.1f} scans/s  p50 {row['p50_ms']:6.1f} ms  errors "
                f"{row['errors'] or 0}  CPU {row['server_cpu_ms_per_scan']:5.1f} ms/scan (runs "
                f"{row['runs_cpu_ms_per_scan']})\n     {row['cpu_ms_per_scan_by_process']}",
                flush=True,
            )
    return {
        "idle_cpu_ms_per_s": {"total": round(sum(idle_per_s.values()), 1), "by_process": idle_per_s},
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", default="1,16")
    parser.add_argument("--scans", type=int, default=400, help="scans per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per concurrency (the median is kept)")
    parser.add_argument("--size", default="2mp", choices=sorted(SIZES))
    parser.add_argument("--photos", type=int, default=16)
    parser.add_argument("--expansion", default="base1", help="the catalog the server holds")
    parser.add_argument("--database", default="postgresql", choices=("postgresql", "sqlite"))
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "scan_floor.json"))
    parser.add_argument(
        "--serve-stand-ins", nargs=2, metavar=("INDEX_DIR", "ADDRESS_FILE"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.serve_stand_ins:
        return serve_stand_ins(*args.serve_stand_ins)
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    if not SHARED_CATALOG.exists():
        print(f"needs the shared catalog at {SHARED_CATALOG} for its cards and photos", file=sys.stderr)
        return 2

    faces = render_catalog(SHARED_CATALOG, DEFAULT_CACHE / "catalog", [args.expansion])
    manifest = read_manifest(faces)
    records = read_jsonl(feed_path(SHARED_CATALOG, "cards"))
    cards = sorted(c["id"] for c in records if c["expansion_id"] == args.expansion and c["id"] in manifest)
    photos = [p.body for p in make_photos(cards, args.size, args.photos, SEED_BASE)]
    # Ray's token, shared by its processes and the ingress, as on a real cluster.
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    with tempfile.TemporaryDirectory(prefix="cardcat-scan-floor-") as tmp:
        service = Service(create_database(args.database, Path(tmp)), Path(tmp) / "data", {})
        service.cli("db", "upgrade")
        feed = write_subset_feed(Path(tmp) / "feed", (args.expansion,))
        service.cli(
            "catalog", "sync", "--from", str(feed), "--images", str(DEFAULT_CACHE / "catalog"), "--quiet"
        )
        service.cli("index", "build", "--quiet")
        key = service.new_key()
        address_file = Path(tmp) / "ray-address"
        command = [sys.executable, __file__, "--serve-stand-ins", str(Path(tmp) / "data" / "index")]
        with ray_side(
            [*command, str(address_file)], address_file, {**os.environ, **auth}, 180, "the stand-in app"
        ) as (child, ray_up):
            try:
                print(f"Ray and the stand-in app up in {ray_up['start_s']:.1f} s ({ray_up})", flush=True)
                service.extra_env.update(
                    auth,
                    CARDCAT_SCAN_APP=APP_NAME,
                    CARDCAT_RAY_ADDRESS=ray_up["address"],
                    CARDCAT_RATE_LIMIT=str(BENCH_RATE_LIMIT),
                )
                base_url = service.start("--scan", timeout=120)
                roots = [child.pid, service.processes[0].pid]
                result = asyncio.run(measure(base_url, key, photos, roots, args)) | {"ray": ray_up}
                # Calls the ingress had to try again (a replica's error, e.g. a face the Reader could
                # not fetch: docs/scanner-performance.md, "The floor"); the answers above count only
                # statuses.
                logs = Path(tmp).glob("server-*.log")
                result["scanner_calls_failed"] = sum(
                    log.read_text().count("scanner call failed") for log in logs
                )
                print(f"scanner calls the ingress tried again: {result['scanner_calls_failed']}")
            finally:
                service.stop()
    result["meta"] = {
        "command": " ".join(sys.argv),
        "photos": f"{args.photos} {args.size} phone photos (scan_load.py's), mean "
        f"{np.mean([len(p) for p in photos]) / 1e3:.0f} KB",
        "cards_in_catalog": len(cards),
        "database": args.database,
        "host": host.describe(),  # after the server stopped: the yardstick times a quiet machine
        "date": time.strftime("%Y-%m-%d"),
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
