"""Junk keys from one address while real keys read: does anyone but the junk get a 429?

Issue 45's high finding, as a hostile load on real servers: PostgreSQL, Redis (shared rate limit and
the shared unknown-key cache) and `cardcat serve --workers 2`, all clients on 127.0.0.1 (the one address
every client has behind an ingress whose proxy is not trusted). Junk clients flood `/v1/series` with
made-up keys (a fresh one per request, and one repeated revoked key) as fast as they can; once the
address's anonymous budget is spent, 8 real keys, each new to the servers (new clients, or every client
after a rollout), read at a steady pace well inside their own budget. Each real key's
answers are counted by status: any 429 that its own count does not explain (more than `limit` in one
window) is a lock-out, and the run fails.

    .venv/bin/python benchmarks/junk_keys.py [--seconds 20] [--limit 300] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import secrets
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cardcat.stack import REDIS_URL, REPO, launch, require_redis

REAL_KEYS = 8


def _junk(base_url: str, stop: threading.Event, counts: Counter[str], revoked: str | None) -> None:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        while not stop.is_set():
            key = revoked or "cc_" + secrets.token_urlsafe(32)
            response = client.get("/v1/series", headers={"Authorization": f"Bearer {key}"})
            counts[str(response.status_code)] += 1


def _real(base_url: str, key: str, pace_s: float, stop: threading.Event, counts: Counter[str]) -> None:
    with httpx.Client(base_url=base_url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as client:
        while not stop.is_set():
            started = time.monotonic()
            counts[str(client.get("/v1/series", params={"limit": 1}).status_code)] += 1
            stop.wait(max(0.0, pace_s - (time.monotonic() - started)))


def run(seconds: float, limit: int, junk_clients: int) -> dict[str, Any]:
    redis_url = require_redis()
    with tempfile.TemporaryDirectory() as tmp:
        service = launch(
            "postgresql",
            Path(tmp),
            None,
            CARDCAT_RATE_LIMIT=str(limit),
            CARDCAT_REDIS_URL=redis_url,
            CARDCAT_RESPONSE_CACHE_MB="0",
        )
        try:
            for proc in service.processes:  # one server of two workers instead of the launch's one
                proc.terminate()
                proc.wait(timeout=30)
            service.processes.clear()
            base_url = service.start("--workers", "2")
            revoked = service.new_key("revoked")
            service.cli("keys", "revoke", revoked)
            keys = [service.quick_key() for _ in range(REAL_KEYS)]
            # Each real key reads at half its budget's pace: at most limit/2 + 1 requests in a window.
            pace_s = 2 * 60 / limit
            stop = threading.Event()
            junk: Counter[str] = Counter()
            real = [Counter[str]() for _ in keys]
            threads = [
                threading.Thread(target=_junk, args=(base_url, stop, junk, revoked if i == 0 else None))
                for i in range(junk_clients)
            ]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + 90
            while junk["429"] == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            if junk["429"] == 0:
                raise RuntimeError(f"the junk never spent its address's budget: {dict(junk)}")
            readers = [
                threading.Thread(target=_real, args=(base_url, key, pace_s, stop, counts))
                for key, counts in zip(keys, real, strict=True)
            ]
            for thread in readers:
                thread.start()
            threads += readers
            time.sleep(seconds)
            stop.set()
            for thread in threads:
                thread.join()
        finally:
            service.stop()
    locked_out = sum(counts["429"] for counts in real)
    return {
        "seconds": seconds,
        "limit_per_window": limit,
        "junk_clients": junk_clients,
        "junk": dict(junk),
        "junk_per_s": round(sum(junk.values()) / seconds, 1),
        "real_keys": [dict(counts) for counts in real],
        "real_429": locked_out,
        "real_not_200": sum(sum(c.values()) - c["200"] for c in real),
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        "| who | requests | 200 | 401 | 429 | other |",
        "|---|---|---|---|---|---|",
    ]
    junk: dict[str, int] = result["junk"]
    other = sum(v for k, v in junk.items() if k not in ("200", "401", "429"))
    lines.append(
        f"| junk ({result['junk_clients']} clients, {result['junk_per_s']} req/s) | {sum(junk.values())} "
        f"| {junk.get('200', 0)} | {junk.get('401', 0)} | {junk.get('429', 0)} | {other} |"
    )
    for i, counts in enumerate(result["real_keys"], 1):
        other = sum(v for k, v in counts.items() if k not in ("200", "401", "429"))
        lines.append(
            f"| real key {i} | {sum(counts.values())} | {counts.get('200', 0)} | {counts.get('401', 0)} "
            f"| {counts.get('429', 0)} | {other} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--limit", type=int, default=300, help="CARDCAT_RATE_LIMIT, requests a minute")
    parser.add_argument("--junk-clients", type=int, default=4)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "junk_keys.json")
    args = parser.parse_args()
    result = run(args.seconds, args.limit, args.junk_clients)
    print(table(result))
    verdict = "PASS" if result["real_not_200"] == 0 else "FAIL"
    print(f"{verdict}: real keys' answers other than 200: {result['real_not_200']}")
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": platform.processor() or platform.machine()}
    meta["redis"] = REDIS_URL
    args.out.write_text(json.dumps({"meta": meta, "result": result}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
