"""Scanner replicas killed under load: a scan is a pure function of its photo, so the ingress tries a call
that died with its replica once more; what still fails is `503 scan_unavailable` with `Retry-After`,
never a 500 or a dropped connection, and the scanner answers again once Ray has restarted the replica."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from tests.harness import Service, launch_scanner, require_shared
from tests.serve_app.replicas import replica_pids, tg_photos

EXPANSIONS = ("swsh10tg",)
SEED = 22_000_000


@pytest.fixture(scope="module")
def scanner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    require_shared()
    service = launch_scanner(tmp_path_factory.mktemp("faults"), EXPANSIONS)
    yield service
    service.stop()


def test_replicas_killed_under_load_cost_no_500_and_no_dropped_connection(scanner: Service):
    bodies = tg_photos(SEED)
    outcomes: Counter[str] = Counter()
    missing_retry_after: list[int] = []
    stop = threading.Event()

    async def load() -> None:
        headers = {"Authorization": f"Bearer {scanner.quick_key()}"}
        async with httpx.AsyncClient(base_url=scanner.base_url, headers=headers, timeout=120) as client:

            async def loop(k: int) -> None:
                n = k
                while not stop.is_set():
                    files = {"image": ("p.jpg", bodies[n % len(bodies)], "image/jpeg")}
                    n += 1
                    try:
                        response = await client.post("/v1/scan", files=files)
                    except httpx.HTTPError as error:
                        outcomes[f"dropped: {type(error).__name__}"] += 1
                        continue
                    outcomes[str(response.status_code)] += 1
                    if response.status_code == 503 and "retry-after" not in response.headers:
                        missing_retry_after.append(response.status_code)

            await asyncio.gather(*(loop(k) for k in range(4)))

    worker = threading.Thread(target=lambda: asyncio.run(load()))
    worker.start()
    try:
        time.sleep(3)
        for deployment in ("Reader", "Detector"):
            os.kill(replica_pids(deployment)[0], signal.SIGKILL)
            time.sleep(10)
    finally:
        stop.set()
        worker.join(timeout=180)
    print(f"scans while replicas were killed: {dict(outcomes)}")
    assert set(outcomes) <= {"200", "503"}, outcomes
    assert not missing_retry_after
    assert outcomes["200"] > 0, outcomes
    # and it recovers: Ray restarts the replicas and the same photo is answered again
    deadline = time.monotonic() + 90
    with scanner.client() as client:
        client.timeout = httpx.Timeout(120)
        while True:
            response = client.post("/v1/scan", files={"image": ("p.jpg", bodies[0], "image/jpeg")})
            if response.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(2)
    assert response.status_code == 200, response.text
