"""The scanner on a two-node Ray cluster, and the loss of one node under load.

A real cluster on this machine: a head (`ray start --head`) and a worker node (`ray start --address`),
each its own raylet with its own CPUs. `cardcat serve --scan` attaches to it (`CARDCAT_RAY_ADDRESS`) and
deploys two replicas of each model, which Ray Serve spreads over both nodes. Then the worker node is
killed whole (its process group, as a machine dies) while scans run: every scan is answered, 200, or 503
`scan_unavailable` with `Retry-After` while replicas move, never a 500 or a dropped connection, and the
scanner answers from the head alone afterwards.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from benchmarks.replicas import UNDER_LOAD, ScanLoad, replica_pids, tg_photos
from cardcat.outages import TwoNodeCluster
from cardcat.stack import REPO, Service, launch_scanner, require_shared

pytestmark = pytest.mark.slow
EXPANSIONS = ("swsh10tg",)
SEED = 23_000_000


@pytest.fixture(scope="module")
def cluster() -> Iterator[TwoNodeCluster]:
    require_shared()
    cluster = TwoNodeCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def scanner(cluster: TwoNodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = launch_scanner(
        tmp_path_factory.mktemp("multinode"),
        EXPANSIONS,
        CARDCAT_RAY_ADDRESS=cluster.address,
        CARDCAT_SCAN_REPLICAS="2",
        **cluster.auth,
        **UNDER_LOAD,
    )
    yield service
    service.stop()


def test_replicas_are_spread_over_both_nodes(cluster: TwoNodeCluster, scanner: Service) -> None:
    for deployment in ("Detector", "Embedder", "Reader"):
        pids = replica_pids(deployment)
        assert len(pids) == 2, (deployment, pids)
        assert sorted(cluster.on_worker(pid) for pid in pids) == [False, True], deployment
    with scanner.client() as client:
        client.timeout = httpx.Timeout(120)
        response = client.post("/v1/scan", files={"image": ("p.jpg", tg_photos(SEED)[0], "image/jpeg")})
    assert response.status_code == 200, response.text
    assert response.json()["data"]["matches"][0]["card"]["id"] == "swsh10tg-TG01"


def test_losing_the_worker_node_under_load_costs_no_500_and_no_dropped_connection(
    cluster: TwoNodeCluster, scanner: Service
) -> None:
    bodies = tg_photos(SEED)
    with ScanLoad(scanner.base_url, scanner.quick_key(), bodies) as load:
        time.sleep(5)
        before = load.outcomes["200"]
        cluster.kill_worker()
        time.sleep(20)
    outcomes = load.outcomes
    print(f"scans while the worker node died: {dict(outcomes)}")
    assert before > 0, outcomes
    assert set(outcomes) <= {"200", "503"}, outcomes
    assert load.missing_retry_after == 0
    assert not any(
        cluster.on_worker(pid) for d in ("Detector", "Embedder", "Reader") for pid in replica_pids(d)
    )
    # The head answers alone: replicas lost with the node are replaced there.
    deadline = time.monotonic() + 120
    with scanner.client() as client:
        client.timeout = httpx.Timeout(120)
        while True:
            response = client.post("/v1/scan", files={"image": ("p.jpg", bodies[1], "image/jpeg")})
            if response.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(2)
    assert response.status_code == 200, response.text
    assert response.json()["data"]["matches"][0]["card"]["id"] == "swsh10tg-TG02"


def run_driver(code: str, env: dict[str, str]) -> None:
    """A Python process that joins the cluster, does what an operator would, and leaves."""
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_while_the_app_is_deleted_and_redeployed_scans_answer_503_then_200(
    cluster: TwoNodeCluster, scanner: Service
) -> None:
    """The operator deletes the Serve app and deploys it again (`serve deploy` of a new config does the
    same per deployment): meanwhile a scan is `503 scan_unavailable` with `Retry-After`, not a 500 or a
    hung request, and the ingress reaches the new app without restarting."""
    env = {**cluster.env, "PYTHONPATH": str(REPO)}
    driver = (
        f"import ray; from ray import serve; ray.init(address={cluster.address!r}); serve.delete('scanner')"
    )
    subprocess.run([sys.executable, "-c", driver], env=env, check=True, capture_output=True, timeout=180)
    body = tg_photos(SEED)[2]
    with scanner.client() as client:
        client.timeout = httpx.Timeout(180)
        started = time.monotonic()
        response = client.post("/v1/scan", files={"image": ("p.jpg", body, "image/jpeg")})
        assert response.status_code == 503, response.text
        assert response.json()["error"]["code"] == "scan_unavailable" and response.headers["retry-after"]
        assert time.monotonic() - started < 150
        redeploy = (
            "from serve_app.config import ScanConfig; from serve_app.local import start_scanner; "
            f"start_scanner(ScanConfig(index_dir={str(scanner.data_dir / 'index')!r}), "
            f"ray_address={cluster.address!r})"
        )
        subprocess.run(
            [sys.executable, "-c", redeploy], env=env, check=True, capture_output=True, cwd=REPO, timeout=300
        )
        deadline = time.monotonic() + 120
        while True:
            response = client.post("/v1/scan", files={"image": ("p.jpg", body, "image/jpeg")})
            if response.status_code == 200 or time.monotonic() > deadline:
                break
            assert response.status_code == 503 and response.headers["retry-after"], response.text
            time.sleep(2)
    assert response.status_code == 200, response.text
    assert response.json()["data"]["matches"][0]["card"]["id"] == "swsh10tg-TG03"
