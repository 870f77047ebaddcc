"""The scanner's networks in ONNX Runtime through `cardcat serve --scan`
(`CARDCAT_SCAN_{DETECTOR,EMBEDDER,READER}_RUNTIME=onnx`): the scans answer as before, and no model replica
maps torch's libraries (what costs a torch replica ~690 MB of RSS). The same with every model set to
torch: the answers again, and torch in every model replica (the check sees torch where it is). Both with
the detector's second opinion on (`CARDCAT_SCAN_SECOND_DETECTOR`), loaded and warmed in the Detector's
runtime (the warm-up's blank photo goes to it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchmarks.replicas import replica_pids, tg_photos
from benchmarks.scan_load import process_tree
from cardcat.stack import Service, launch_scanner, require_shared

EXPANSIONS = ("swsh10tg",)
SEED = 23_000_000
MODELS = ("Detector", "Embedder", "Reader")


@pytest.fixture(scope="module", params=["onnx", "torch"])
def scanner(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Service, dict[str, str]]]:
    """A scanner with every model in ONNX Runtime, or every one in torch; and the runtimes it was given."""
    require_shared()
    runtimes = {f"CARDCAT_SCAN_{model.upper()}_RUNTIME": request.param for model in MODELS}
    second = {"CARDCAT_SCAN_SECOND_DETECTOR": "true"}
    service = launch_scanner(tmp_path_factory.mktemp("onnx-runtime"), EXPANSIONS, **runtimes, **second)
    yield service, runtimes
    service.stop()


def _maps_torch(pid: int) -> bool:
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


def test_the_models_answer_and_only_torch_replicas_map_torch(
    scanner: tuple[Service, dict[str, str]],
) -> None:
    service, runtimes = scanner
    with service.client() as client:
        client.timeout = httpx.Timeout(120)
        for n, body in enumerate(tg_photos(SEED, count=3), start=1):
            response = client.post("/v1/scan", files={"image": ("p.jpg", body, "image/jpeg")})
            assert response.status_code == 200, response.text
            assert response.json()["data"]["matches"][0]["card"]["id"] == f"swsh10tg-TG{n:02d}"
    server = set(process_tree(service.processes[0].pid))
    for model in MODELS:
        pids = [pid for pid in replica_pids(model) if pid in server]
        assert len(pids) == 1, model
        assert _maps_torch(pids[0]) == (runtimes[f"CARDCAT_SCAN_{model.upper()}_RUNTIME"] == "torch"), model
