"""Scanner replicas killed under load: a scan is a pure function of its photo, so the ingress tries a call
that died with its replica once more; what still fails is `503 scan_unavailable` with `Retry-After`,
never a 500 or a dropped connection, and the scanner answers again once Ray has restarted the replica."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks.replicas import UNDER_LOAD, ScanLoad, replica_pids, tg_photos
from benchmarks.scan_load import process_tree, role
from cardcat.stack import Service, launch_scanner, require_shared
from serve_app.local import SERVE_PACE

EXPANSIONS = ("swsh10tg",)
SEED = 22_000_000


@pytest.fixture(scope="module")
def scanner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    require_shared()
    service = launch_scanner(tmp_path_factory.mktemp("faults"), EXPANSIONS, **UNDER_LOAD)
    yield service
    service.stop()


def _environ(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
    return dict(pair.split("=", 1) for pair in pairs if "=" in pair)


def test_rays_processes_keep_house_at_the_scanners_pace(scanner: Service):
    """`serve_app.local.SERVE_PACE` reaches the Serve controller (its loop's interval) and the replicas
    (their metrics flush) of the Ray instance `cardcat serve --scan` starts; the test below then checks
    that replicas still come back at that pace."""
    server = process_tree(scanner.processes[0].pid)  # this deployment's Ray, not another test's
    ray_processes = [pid for pid in server if role(pid) == "ServeController"]
    ray_processes += [pid for pid in replica_pids("Detector") if pid in server]
    assert len(ray_processes) == 2, ray_processes
    for pid in ray_processes:
        environ = _environ(pid)
        assert {name: environ.get(name) for name in SERVE_PACE} == SERVE_PACE, pid


def test_replicas_killed_under_load_cost_no_500_and_no_dropped_connection(scanner: Service):
    bodies = tg_photos(SEED)
    with ScanLoad(scanner.base_url, scanner.quick_key(), bodies) as load:
        time.sleep(3)
        for deployment in ("Reader", "Detector"):
            os.kill(replica_pids(deployment)[0], signal.SIGKILL)
            time.sleep(10)
    outcomes = load.outcomes
    print(f"scans while replicas were killed: {dict(outcomes)}")
    assert set(outcomes) <= {"200", "503"}, outcomes
    assert load.missing_retry_after == 0
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
