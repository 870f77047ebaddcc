"""Price sync speed, and read latency of what it feeds (`include=change` pages, the leaderboard).

For each backend (PostgreSQL, SQLite): a fresh database, the full catalog from ../shared/catalog, then
`cardcat prices sync` over the 120-day full-catalog marketplace feed written by
../shared/tools/marketfeed.py (cached under ~/.cache/cardcat/market), timed end to end through the real
CLI, then a second run of the same folder (idempotent: every file skipped). On PostgreSQL a server is
started with the response cache off (every request reaches the database) and p50/p99 latency measured
at concurrency 1 over distinct requests: `GET /v1/cards?include=change` pages (whole-catalog walk and
per-expansion pages) and `GET /v1/movers` (every window x direction, with and without an expansion).

    .venv/bin/python benchmarks/price_sync.py [--days 120] [--backends postgresql sqlite] [--requests 400]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `cardcat.stack` when run as a script

from cardcat.stack import SHARED, SHARED_CATALOG, Service, create_database, require_shared
from catalog_api.ingest.feed import feed_path, read_jsonl

CACHE = Path.home() / ".cache" / "cardcat" / "market"
START = "2026-08-01"
RESULTS = Path(__file__).resolve().parent / "results"


def market_feed(days: int) -> Path:
    """The full-catalog feed for `days` days from START (generated once, then reused)."""
    folder = CACHE / f"full-{days}"
    if len(list((folder / "marketplace").glob("*.ndjson.gz"))) != days:
        print(f"writing the {days}-day marketplace feed to {folder} (once)", flush=True)
        tool = SHARED / "tools" / "marketfeed.py"
        args = ["--catalog", str(SHARED_CATALOG), "--out", str(folder), "--start", START, "--days", str(days)]
        subprocess.run([sys.executable, str(tool), *args], check=True)
    return folder


def timed_sync(service: Service, feed: Path) -> dict[str, Any]:
    started = time.perf_counter()
    result = service.cli("prices", "sync", "--from", str(feed), "--quiet")
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    report["wall_seconds"] = round(time.perf_counter() - started, 2)
    return report


def latencies(client: httpx.Client, requests: list[tuple[str, dict[str, Any]]]) -> dict[str, float]:
    samples: list[float] = []
    for path, params in requests:
        started = time.perf_counter()
        response = client.get(path, params=params)
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.text
    samples.sort()
    return {
        "requests": len(samples),
        "p50_ms": round(statistics.median(samples), 2),
        "p99_ms": round(samples[min(len(samples) - 1, int(len(samples) * 0.99))], 2),
    }


def change_requests(
    client: httpx.Client, expansions: list[str], count: int
) -> list[tuple[str, dict[str, Any]]]:
    """Distinct `include=change` pages: a walk of the whole catalog (50 rows a page), then one page per
    expansion at varied sizes."""
    requests: list[tuple[str, dict[str, Any]]] = []
    cursor = None
    while len(requests) < count // 2:
        params: dict[str, Any] = {"include": "change", **({"cursor": cursor} if cursor else {})}
        requests.append(("/v1/cards", params))
        cursor = client.get("/v1/cards", params=params).json()["data"]["next_cursor"]
        if cursor is None:
            break
    rng = random.Random(5)
    while len(requests) < count:
        params = {
            "include": "change",
            "expansion_id": rng.choice(expansions),
            "limit": rng.choice([20, 50, 100]),
        }
        requests.append(("/v1/cards", params))
    return requests


def leaderboard_requests(expansions: list[str], count: int) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(9)
    requests: list[tuple[str, dict[str, Any]]] = []
    for index in range(count):
        params: dict[str, Any] = {
            "window": rng.choice(["1d", "7d", "30d"]),
            "direction": rng.choice(["gainers", "losers"]),
            "limit": rng.choice([10, 25, 50, 100]),
        }
        if index % 2:
            params["expansion_id"] = rng.choice(expansions)
        requests.append(("/v1/movers", params))
    return requests


def run_backend(backend: str, feed: Path, requests: int, tmp: Path) -> dict[str, Any]:
    service = Service(create_database(backend, tmp), tmp / "data", {"CARDCAT_RESPONSE_CACHE_MB": "0"})
    try:
        service.cli("db", "upgrade")
        service.cli("catalog", "sync", "--from", str(SHARED_CATALOG), "--quiet")
        print(f"[{backend}] syncing {feed} ...", flush=True)
        first = timed_sync(service, feed)
        print(f"[{backend}] first run {first['wall_seconds']} s, {first['rows_per_s']} rows/s", flush=True)
        second = timed_sync(service, feed)
        result: dict[str, Any] = {"backend": backend, "first": first, "repeat": second}
        if backend == "postgresql":
            service.extra_env["CARDCAT_RATE_LIMIT"] = str(10**9)
            service.start()
            expansions = [r["id"] for r in read_jsonl(feed_path(SHARED_CATALOG, "expansions"))]
            with service.client() as client:
                pages = change_requests(client, expansions, requests)
                boards = leaderboard_requests(expansions, requests)
                for path, params in pages[:20] + boards[:20]:  # connections and plans warm
                    client.get(path, params=params)
                result["include_change"] = latencies(client, pages)
                result["leaderboard"] = latencies(client, boards)
        return result
    finally:
        service.stop()


def _pair(latency: dict[str, float] | None) -> str:
    return "-" if latency is None else f"{latency['p50_ms']} / {latency['p99_ms']} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=120)
    parser.add_argument("--backends", nargs="+", default=["postgresql", "sqlite"])
    parser.add_argument("--requests", type=int, default=400, help="timed requests per read kind")
    parser.add_argument("--out", type=Path, default=RESULTS / "price_sync.json")
    args = parser.parse_args()
    try:
        require_shared()
    except BaseException as skip:  # require_shared skips pytest-style; here it is a plain error
        print(f"needs ../shared: {skip}", file=sys.stderr)
        return 2
    feed = market_feed(args.days)
    results = []
    with tempfile.TemporaryDirectory(prefix="cardcat-bench-") as tmp:
        for backend in args.backends:
            results.append(run_backend(backend, feed, args.requests, Path(tmp) / backend))
    print()
    print(
        "| backend | rows | first sync | rows/s | repeat run | include=change p50/p99 | leaderboard p50/p99 |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        first, repeat = r["first"], r["repeat"]
        rows = first["card_rows"] + first["product_rows"]
        change, board = (_pair(r.get(kind)) for kind in ("include_change", "leaderboard"))
        print(
            f"| {r['backend']} | {rows:,} | {first['wall_seconds']} s | {first['rows_per_s']:,} | "
            f"{repeat['wall_seconds']} s ({repeat['files_skipped']} files skipped) | {change} | {board} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "days": args.days,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "results": results,
    }
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
