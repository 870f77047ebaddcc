"""The scanner as a Ray Serve application.

Detection, OCR and embedding (with the FAISS index) are separate deployments, each batching requests
with `@serve.batch` (a replica takes `max_ongoing_requests` >= `max_batch_size`, or batches never fill)
and each placed on a GPU when the cluster has one. `ScanService` composes them and answers
`POST /scan` with the raw photo bytes as the body (the `/v1` ingress has already authenticated,
rate-limited and size-checked the request). Its JSON answer names cards by id; the ingress adds the
catalog fields.

    photo bytes -> decode -> Detector.locate -> rectify (+ the 180° turn)
                -> Embedder.search (both turns, keep the better)
                -> Reader.read (that face, and the footer lines of the matched artworks' reprints, scored)
                -> fusion.decide -> {"matches": [{card_id, score}], "unidentified": ...}

Runtime knobs (index directory, batch sizes, thresholds) arrive through `reconfigure(user_config)`,
so a rebuilt index or new weights are swapped in by `serve deploy` without dropping requests; the
Embedder and ScanService also notice a rebuilt index directory on their own (its meta.json changes).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
from ray import serve
from ray.serve.handle import DeploymentHandle
from starlette.requests import Request
from starlette.responses import JSONResponse

from catalog_api.errors import APIError
from serve_app.config import ScanConfig, resolve_device
from serve_app.fusion import (
    Decision,
    PrintTable,
    Read,
    Thresholds,
    better_turn,
    decide,
    footer_candidates,
)
from serve_app.intake import decode_image

log = logging.getLogger("cardcat.scan")
INDEX_RECHECK_S = 2.0
# How long a batch waits for more requests after its first: at one request in flight every stage waits
# this long, and under load the queue fills batches while the previous one runs anyway.
BATCH_WAIT_S = 0.002
Hits = list[tuple[str, float]]


def _index_stamp(index_dir: Path) -> str | None:
    try:
        return (index_dir / "meta.json").read_text()
    except OSError:
        return None


@serve.deployment(max_ongoing_requests=32)
class Detector:
    def __init__(self, weights: str, device: str = "auto", backend: dict[str, Any] | None = None) -> None:
        from models.detector import CardDetector
        from models.sessions import Backend

        self.model = CardDetector(Path(weights), resolve_device(device), Backend.from_dict(backend))
        self.model.locate_batch([np.zeros((480, 360, 3), np.uint8)])  # warm up

    def reconfigure(self, config: dict[str, Any]) -> None:
        self.locate.set_max_batch_size(int(config.get("max_batch_size", 8)))  # type: ignore[attr-defined]

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=BATCH_WAIT_S)
    async def locate(self, images: list[np.ndarray]) -> list[np.ndarray | None]:
        return await asyncio.to_thread(self.model.locate_batch, images)


@serve.deployment(max_ongoing_requests=32)
class Reader:
    def __init__(
        self, weights: str, device: str = "auto", checkpoint: str | None = None, arch: str = ""
    ) -> None:
        from models.ocr import PrintReader

        kwargs: dict[str, Any] = {"arch": arch} if arch else {}
        self.model = PrintReader(
            Path(weights), resolve_device(device), Path(checkpoint) if checkpoint else None, **kwargs
        )
        self.model.read_batch([np.full((838, 600, 3), 200, np.uint8)])

    def reconfigure(self, config: dict[str, Any]) -> None:
        self.read.set_max_batch_size(int(config.get("max_batch_size", 8)))  # type: ignore[attr-defined]

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=BATCH_WAIT_S)
    async def read(self, requests: list[tuple[np.ndarray, list[str]]]) -> list[dict[str, Any]]:
        """Each request: a face, and the footer lines its candidates print (scored for fusion)."""
        faces, footers = [face for face, _ in requests], [lines for _, lines in requests]
        reads = await asyncio.to_thread(self.model.read_batch, faces, footers)
        return [dataclasses.asdict(read) for read in reads]


@serve.deployment(max_ongoing_requests=32)
class Embedder:
    """The embedding model and the index it built, swapped together when either changes."""

    def __init__(
        self,
        weights: str,
        index_dir: str,
        device: str = "auto",
        top_k: int = 32,
        backend: dict[str, Any] | None = None,
    ) -> None:
        from models.embedder import CardEmbedder
        from models.sessions import Backend

        self.model = CardEmbedder(Path(weights), resolve_device(device), backend=Backend.from_dict(backend))
        self.top_k = top_k
        self.index_dir = Path(index_dir)
        self.index: Any = None
        self.stamp: str | None = None
        self.checked = 0.0
        self._load_index()
        self.model.embed_batch([np.full((838, 600, 3), 200, np.uint8)])

    def _load_index(self) -> None:
        from models.index import CardIndex

        stamp = _index_stamp(self.index_dir)
        if stamp is None or stamp == self.stamp:
            return
        index = CardIndex.load(self.index_dir)
        if index.embedder_version != self.model.version:
            log.error(
                "index %s was built by embedder %s, not %s",
                self.index_dir,
                index.embedder_version,
                self.model.version,
            )
        self.index, self.stamp = index, stamp  # one assignment: requests see the old or the new index
        log.info("index loaded: %d cards", len(index.card_ids))

    def reconfigure(self, config: dict[str, Any]) -> None:
        if config.get("index_dir"):
            self.index_dir = Path(config["index_dir"])
        self.top_k = int(config.get("top_k", self.top_k))
        self.search.set_max_batch_size(int(config.get("max_batch_size", 8)))  # type: ignore[attr-defined]
        self._load_index()

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=BATCH_WAIT_S)
    async def search(self, faces: list[np.ndarray]) -> list[tuple[Hits, Hits]]:
        """Each request: one rectified face; its hits upright and turned 180° (the detector leaves the top
        open). The replica turns the face itself, so a scan sends it once, in one call."""
        if time.monotonic() - self.checked > INDEX_RECHECK_S:
            self.checked = time.monotonic()
            await asyncio.to_thread(self._load_index)
        from models.detector import half_turn

        index = self.index

        def run() -> list[tuple[Hits, Hits]]:
            both = [view for face in faces for view in (face, half_turn(face))]
            hits = index.search(self.model.embed_batch(both), self.top_k)
            return list(zip(hits[0::2], hits[1::2], strict=True))

        return await asyncio.to_thread(run)


@serve.deployment(max_ongoing_requests=64)
class ScanService:
    def __init__(
        self,
        detector: DeploymentHandle,
        embedder: DeploymentHandle,
        reader: DeploymentHandle,
        config: dict[str, Any],
    ) -> None:
        self.detector, self.embedder, self.reader = detector, embedder, reader
        self.config = ScanConfig(**config)
        self.thresholds = self.config.fusion_thresholds()
        self.index_dir = Path(self.config.index_dir)
        self.table: PrintTable | None = None
        self.stamp: str | None = None
        self.checked = 0.0
        self._load_table()

    def _load_table(self) -> None:
        stamp = _index_stamp(self.index_dir)
        if stamp is None or stamp == self.stamp:
            return
        records = json.loads((self.index_dir / "cards.json").read_text())
        self.table, self.stamp = PrintTable.from_records(records), stamp

    def reconfigure(self, config: dict[str, Any]) -> None:
        if config.get("thresholds"):
            self.thresholds = Thresholds(**config["thresholds"])
        if config.get("index_dir"):
            self.index_dir = Path(config["index_dir"])
        self._load_table()

    async def __call__(self, request: Request) -> JSONResponse:
        data = await request.body()
        try:
            image = np.asarray(await asyncio.to_thread(decode_image, data))
        except APIError as error:
            return JSONResponse(
                {"error": {"code": error.code, "message": error.message}}, status_code=error.status
            )
        decision = await self.scan(image)
        return JSONResponse(decision.as_dict())

    async def scan(self, image: np.ndarray) -> Decision:
        from models.detector import half_turn, rectify

        if time.monotonic() - self.checked > INDEX_RECHECK_S:
            self.checked = time.monotonic()
            self._load_table()
        assert self.table is not None
        quad = await self.detector.locate.remote(image)
        if quad is None:
            return decide({}, None, self.table, self.thresholds)
        face = await asyncio.to_thread(rectify, image, quad)
        upright, upside_down = await self.embedder.search.remote(face)
        best_face, hits = better_turn(face, half_turn(face), upright, upside_down)
        footers = footer_candidates(hits, self.table, self.thresholds.race_window)
        read = await self.reader.read.remote((best_face, footers))
        similar = dict(hits)
        return decide(similar, Read(**read), self.table, self.thresholds)


def build_app(args: dict[str, Any]) -> Any:
    """`serve run serve_app.app:build_app index_dir=...` and the deploy/ configs call this."""
    config = ScanConfig(**args)
    device = config.device
    # Fractional CPUs so the four deployments fit a 2-core machine; the model deployments share a GPU.
    models = {"num_cpus": 0.5, **({"num_gpus": 0.25} if resolve_device(device) == "cuda" else {})}
    # With backend: triton the detector and embedder replicas only pre- and post-process: no GPU.
    tensor_models = models if config.backend == "torch" else {"num_cpus": 0.5}
    # Ray's decorator turns these classes into Deployments, which mypy cannot see.
    deployments: Any = {"detector": Detector, "embedder": Embedder, "reader": Reader, "service": ScanService}
    detector = deployments["detector"].options(ray_actor_options=tensor_models)
    embedder = deployments["embedder"].options(ray_actor_options=tensor_models)
    reader = deployments["reader"].options(ray_actor_options=models)
    service = deployments["service"].options(ray_actor_options={"num_cpus": 0.25})
    return service.bind(
        detector.bind(config.detector_weights, device, config.backend_options()),
        embedder.bind(
            config.embedder_weights, config.index_dir, device, config.top_k, config.backend_options()
        ),
        reader.bind(config.ocr_weights, device, config.ocr_checkpoint, config.ocr_arch),
        config.as_dict(),
    )
