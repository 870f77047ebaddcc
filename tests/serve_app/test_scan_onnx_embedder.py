"""`CARDCAT_SCAN_EMBEDDER_RUNTIME=onnx` through `cardcat serve --scan`: the Embedder replica searches with
the network in ONNX Runtime, answers the photos as before, and never maps torch's libraries (what costs a
torch replica ~690 MB of RSS)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks.scan_load import process_tree
from tests.harness import Service, launch_scanner, require_shared
from tests.serve_app.replicas import replica_pids, tg_photos

EXPANSIONS = ("swsh10tg",)
SEED = 23_000_000


@pytest.fixture(scope="module")
def scanner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    require_shared()
    service = launch_scanner(
        tmp_path_factory.mktemp("onnx-embedder"), EXPANSIONS, CARDCAT_SCAN_EMBEDDER_RUNTIME="onnx"
    )
    yield service
    service.stop()


def _maps_torch(pid: int) -> bool:
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


def test_the_onnx_embedder_answers_and_its_replica_has_no_torch(scanner: Service) -> None:
    with scanner.client() as client:
        client.timeout = httpx.Timeout(120)
        for n, body in enumerate(tg_photos(SEED, count=3), start=1):
            response = client.post("/v1/scan", files={"image": ("p.jpg", body, "image/jpeg")})
            assert response.status_code == 200, response.text
            assert response.json()["data"]["matches"][0]["card"]["id"] == f"swsh10tg-TG{n:02d}"
    server = set(process_tree(scanner.processes[0].pid))
    embedders = [pid for pid in replica_pids("Embedder") if pid in server]
    detectors = [pid for pid in replica_pids("Detector") if pid in server]
    assert len(embedders) == 1 and len(detectors) == 1
    assert not _maps_torch(embedders[0])
    assert _maps_torch(detectors[0])  # the detector still runs torch: the check sees torch where it is
