"""Faults under load: what clients see while a part of the service fails, as a table and JSON.

Each fault is staged on real servers (the shared PostgreSQL and Redis are never touched: the ones taken
down are private, cardcat/outages.py) while closed-loop clients keep calling over keep-alive connections:

- `replicas`: the scanner's Reader replica, then its Detector, SIGKILLed during scans (3 expansions'
  index is not needed: one, swsh10tg);
- `postgres`: PostgreSQL stopped for 5 s (fast shutdown) during catalog reads, then started again;
  `postgres-nocache` the same with the response cache off, so every card read needs the database;
- `redis`: the Redis that holds the shared rate limit stopped for 10 s during catalog reads;
- `node`: on a two-node Ray cluster, the worker node (its replicas with it) killed during scans.

Per fault: requests by outcome (status and error code; `dropped` = a connection closed without an
answer), `5xx` answers without `Retry-After`, and how long after the fault ended (the database back,
Redis back, the replica or node killed) until every answer was 200 again.

    .venv/bin/python benchmarks/faults.py [--only postgres,redis,replicas,node] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.replicas import replica_pids, tg_photos
from cardcat.outages import PrivatePostgres, PrivateRedis, TwoNodeCluster
from cardcat.stack import REPO, Database, Service, launch_scanner
from catalog_api.ingest.demo_catalog import write_demo_catalog

FAULTS = ("replicas", "postgres", "postgres-nocache", "redis", "node")
SEED = 24_000_000


@dataclass
class Load:
    """Closed-loop clients, each on its own keep-alive connection, recording (sent at, outcome)."""

    call: Callable[[httpx.Client, random.Random], httpx.Response]
    base_url: str
    key: str
    clients: int
    timeline: list[tuple[float, str]] = field(default_factory=list)
    no_retry_after: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def _loop(self, seed: int) -> None:
        rng = random.Random(seed)
        headers = {"Authorization": f"Bearer {self.key}"}
        with httpx.Client(base_url=self.base_url, headers=headers, timeout=120) as client:
            while not self.stop.is_set():
                sent = time.monotonic()
                try:
                    response = self.call(client, rng)
                except httpx.TransportError as error:
                    self.timeline.append((sent, f"dropped ({type(error).__name__})"))
                    continue
                outcome = str(response.status_code)
                if response.status_code >= 400:
                    try:
                        outcome += " " + response.json()["error"]["code"]
                    except (ValueError, KeyError, TypeError):
                        outcome += " (not the envelope)"
                if response.status_code >= 500 and "retry-after" not in response.headers:
                    self.no_retry_after += 1
                self.timeline.append((sent, outcome))

    @contextmanager
    def running(self) -> Iterator[Load]:
        threads = [threading.Thread(target=self._loop, args=(n,)) for n in range(self.clients)]
        for thread in threads:
            thread.start()
        try:
            yield self
        finally:
            self.stop.set()
            for thread in threads:
                thread.join(timeout=300)

    def summary(self, fault: str, ended_at: float) -> dict[str, Any]:
        """Counts, and seconds from `ended_at` until the last non-200 (0 if none came after it)."""
        late_failures = [sent for sent, outcome in self.timeline if sent >= ended_at and outcome != "200"]
        return {
            "fault": fault,
            "requests": len(self.timeline),
            "outcomes": dict(Counter(outcome for _, outcome in self.timeline).most_common()),
            "dropped": sum(outcome.startswith("dropped") for _, outcome in self.timeline),
            "5xx_without_retry_after": self.no_retry_after,
            "all_200_again_after_s": round(max(late_failures) - ended_at, 1) if late_failures else 0.0,
        }


def _read(client: httpx.Client, rng: random.Random) -> httpx.Response:
    path = rng.choice(["/v1/cards?limit=5", "/v1/series", "/v1/expansions?limit=3", "/v1/cards?q=emb"])
    return client.get(path)


def _scan(bodies: list[bytes]) -> Callable[[httpx.Client, random.Random], httpx.Response]:
    def call(client: httpx.Client, rng: random.Random) -> httpx.Response:
        return client.post("/v1/scan", files={"image": ("p.jpg", rng.choice(bodies), "image/jpeg")})

    return call


def _catalog_service(root: Path, database: Database, **env: str) -> Service:
    service = Service(database, root / "data", {"CARDCAT_RATE_LIMIT": "1000000", **env})
    service.cli("db", "upgrade")
    service.cli("catalog", "sync", "--from", str(write_demo_catalog(root / "feed")), "--quiet")
    service.key = service.new_key()
    service.start()
    return service


def fault_postgres(root: Path, cache: bool = True) -> dict[str, Any]:
    postgres = PrivatePostgres()
    env = {} if cache else {"CARDCAT_RESPONSE_CACHE_MB": "0"}
    service = _catalog_service(root, Database(postgres.url, "postgresql"), **env)
    try:
        with Load(_read, service.base_url, service.key, clients=8).running() as load:
            time.sleep(3)
            postgres.stop()
            time.sleep(5)
            postgres.start()
            back = time.monotonic()
            time.sleep(15)
        what = "response cache on" if cache else "response cache off: every card read needs the database"
        return load.summary(f"PostgreSQL stopped 5 s during catalog reads (8 clients; {what})", back)
    finally:
        service.stop()
        postgres.close()


def fault_redis(root: Path) -> dict[str, Any]:
    cache = PrivateRedis(root / "redis")
    service = _catalog_service(
        root, Database(f"sqlite:///{root / 'cardcat.db'}", "sqlite"), CARDCAT_REDIS_URL=cache.url
    )
    try:
        with Load(_read, service.base_url, service.key, clients=8).running() as load:
            time.sleep(3)
            cache.stop()
            time.sleep(10)
            cache.start()
            back = time.monotonic()
            time.sleep(10)
        return load.summary("Redis (shared rate limit) stopped 10 s during catalog reads (8 clients)", back)
    finally:
        service.stop()
        cache.close()


def fault_replicas(root: Path) -> dict[str, Any]:
    service = launch_scanner(root, ("swsh10tg",))
    try:
        with Load(_scan(tg_photos(SEED)), service.base_url, service.key, clients=4).running() as load:
            time.sleep(5)
            for deployment in ("Reader", "Detector"):
                os.kill(replica_pids(deployment)[0], signal.SIGKILL)
                killed = time.monotonic()
                time.sleep(12)
            time.sleep(10)
        return load.summary("Reader, then Detector replica SIGKILLed during scans (4 clients)", killed)
    finally:
        service.stop()


def fault_node(root: Path) -> dict[str, Any]:
    cluster = TwoNodeCluster()
    try:
        cluster.start()
        env = {"CARDCAT_RAY_ADDRESS": cluster.address, "CARDCAT_SCAN_REPLICAS": "2", **cluster.auth}
        service = launch_scanner(root, ("swsh10tg",), env=env)
        try:
            with Load(_scan(tg_photos(SEED)), service.base_url, service.key, clients=4).running() as load:
                time.sleep(5)
                cluster.kill_worker()
                killed = time.monotonic()
                time.sleep(25)
            return load.summary("Ray worker node (half the replicas) killed during scans (4 clients)", killed)
        finally:
            service.stop()
    finally:
        cluster.stop()


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| fault under load | requests | outcomes | dropped | 5xx w/o Retry-After | all 200 again after |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        outcomes = ", ".join(f"{n} × {outcome}" for outcome, n in row["outcomes"].items())
        lines.append(
            f"| {row['fault']} | {row['requests']} | {outcomes} | {row['dropped']} | "
            f"{row['5xx_without_retry_after']} | {row['all_200_again_after_s']} s |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(FAULTS), help=f"comma-separated, of {', '.join(FAULTS)}")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "faults.json")
    args = parser.parse_args()
    runs: dict[str, Callable[[Path], dict[str, Any]]] = {
        "replicas": fault_replicas,
        "postgres": fault_postgres,
        "postgres-nocache": lambda root: fault_postgres(root, cache=False),
        "redis": fault_redis,
        "node": fault_node,
    }
    rows = []
    for name in args.only.split(","):
        with tempfile.TemporaryDirectory(prefix=f"cardcat-fault-{name}-") as tmp:
            print(f"fault: {name} ...", flush=True)
            rows.append({"name": name, **runs[name](Path(tmp))})
    print(table(rows))
    meta = {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "when": time.strftime("%Y-%m-%d"),
    }
    args.out.write_text(json.dumps({"meta": meta, "faults": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
