"""The scanner as a Ray Serve application.

Detection, OCR and embedding (with the FAISS index) are separate deployments, each batching requests
with `@serve.batch` (a replica takes `max_ongoing_requests` >= `max_batch_size`, or batches never fill)
and each placed on a GPU when the cluster has one. `serve_app.pipeline.ScanPipeline` composes them. The
`/v1` ingress, which has already authenticated, rate-limited and size-checked the request, runs that
pipeline in its own process with DeploymentHandles to the three deployments (one Ray call per scan fewer
than a hop through a composing replica). `ScanService`, the application's own ingress deployment, runs
the same pipeline for Ray's HTTP proxy (`POST /scan`, for an ingress outside the Ray cluster) and holds
the fusion thresholds the app was deployed with. The answer names cards by id; the ingress adds the
catalog fields. A batch photo enters the Detector by `locate_background`, behind users' scans
(`serve_app.priority`).

    photo bytes -> Detector.locate: decode at working scale, find the corners, rectify to the 600x838 face
                -> Embedder.search: the face shrunk to 96x134, upright and turned 180°, keep the better
                -> Reader.read: that face, and the footer lines of the matched artworks' reprints, scored
                -> fusion.decide -> {"matches": [{card_id, score}], "unidentified": ...}

Each deployment gets only what it needs (measured: docs/benchmarks.md, "Scanner load"): the
Detector the compressed photo (decoding where the pixels are used saves moving a 4-37 MB array between
processes), the Embedder a 38 KB thumbnail, the Reader the face. The composing process (the ingress, or
ScanService) loads no network runtime (no torch): it only passes references on and fuses.

Runtime knobs (index directory, batch sizes, thresholds) arrive through `reconfigure(user_config)`,
so a rebuilt index or new weights are swapped in by `serve deploy` without dropping requests. The
Embedder also notices a rebuilt index directory on its own (`serve_app.index_bundle`, the one watcher);
the pipeline takes the print table of the build each search came from from the Embedder, never from disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import ray
from ray import serve
from ray.serve.handle import DeploymentHandle
from ray.serve.metrics import Counter
from starlette.requests import Request
from starlette.responses import JSONResponse

from core.devices import resolve_device
from core.errors import PayloadTooLarge
from core.photo import MAX_IMAGE_BYTES
from core.scan_contract import PageAnswer, ScanAnswer, ScanRefusal, refusal, refusal_error
from models.geometry import half_turn
from serve_app.config import ScanConfig
from serve_app.fusion import Hits, PrintTable, Thresholds
from serve_app.pipeline import (
    DETECTOR,
    EMBEDDER,
    FACE_LOST,
    READER,
    SERVICE,
    Located,
    LocatedPage,
    LocateRequest,
    PageRequest,
    ScanPipeline,
)
from serve_app.priority import InteractiveFirst
from serve_app.stages import Face, PageFaces, locate_page, locate_photos, search_faces

if TYPE_CHECKING:  # imported where used: the bundle brings torch and FAISS, which ScanService never loads
    from serve_app.index_bundle import BundleWatcher, IndexBundle

log = logging.getLogger("cardcat.scan")
# How long a batch waits for more requests after its first, unless ScanConfig.batch_wait_ms or a
# user_config's `batch_wait_ms` says otherwise.
BATCH_WAIT_S = ScanConfig.batch_wait_ms / 1000
# Faces a Detector replica keeps a reference to after handing them out. The face travels by object
# reference, owned by the Detector, through the composing process to the Reader; under load Ray's
# distributed reference counting now and then freed one before the Reader fetched it
# (ReferenceCountingAssertionError: 2 faces in each of two `benchmarks/scan_floor.py` runs of ~2,500 scans,
# none in eight runs with this hold). Holding the latest few keeps each face in the store until long
# after its Reader call began at any rate a 2-core box sees; 32 faces are 48 MB of the 256 MB store.
FACES_HELD = 32
DETECTOR_CALLS_METRIC = "cardcat_scanner_detector_calls_total"


def _set_batching(method: Any, config: dict[str, Any]) -> None:
    """A `@serve.batch` method's size and wait from a user_config (`max_batch_size`, `batch_wait_ms`)."""
    method.set_max_batch_size(int(config.get("max_batch_size", 8)))
    if "batch_wait_ms" in config:
        method.set_batch_wait_timeout_s(float(config["batch_wait_ms"]) / 1000)


def _limit_threads(device: str, threads: int, torch_too: bool = True) -> None:
    """One intra-op thread per CPU replica unless told otherwise, for torch and OpenCV alike: replicas
    already run side by side, and extra threads only spin-wait between a small network's layers or split
    a 224-px resize (CPU spent, nothing gained). OpenCV's default pool (a thread per core) cost the
    Detector ~15% more CPU per photo than one thread, for the same corners. `torch_too=False`: a replica
    that never loads torch (its network in ONNX Runtime, which takes its thread count itself)."""
    import cv2

    if device == "cpu":
        cv2.setNumThreads(max(1, threads))
    if not torch_too:
        return
    import torch

    if device == "cpu":
        torch.set_num_threads(max(1, threads))
    if torch.get_num_interop_threads() != 1:
        with contextlib.suppress(RuntimeError):  # fixed for good once torch ran anything in this process
            torch.set_num_interop_threads(1)


def _replica_device(device: str, threads: int, onnx: bool) -> str:
    """Where a model replica computes, its threads limited there (`_limit_threads`): the CPU when its
    network runs in ONNX Runtime (asking torch whether there is a GPU would load torch), else `device`."""
    device = "cpu" if onnx else resolve_device(device)
    _limit_threads(device, threads, torch_too=not onnx)
    return device


# 64: batch photos waiting at the gate (`locate_background`) count as ongoing too, and every uvicorn
# worker's lanes (CARDCAT_BATCH_LANES, 8) may wait there at once; a user's scan must still find room.
@serve.deployment(max_ongoing_requests=64)
class Detector:
    """Decode, locate and rectify: everything that needs the photo's pixels happens in this replica, so
    only the compressed photo comes in and only the 600x838 face goes out."""

    def __init__(
        self,
        weights: str,
        device: str = "auto",
        backend: dict[str, Any] | None = None,
        threads: int = 1,
        pixels: str = "auto",
        batch_wait_ms: float = ScanConfig.batch_wait_ms,
        background_busy_slots: int = ScanConfig.background_busy_slots,
        background_idle_slots: int = ScanConfig.background_idle_slots,
        background_quiet_ms: float = ScanConfig.background_quiet_ms,
        page_weights: str | None = None,
        second_weights: str | None = None,
        check_weights: str | None = None,
    ) -> None:
        """`pixels`: where photos are decoded and faces rectified: "numpy" (Pillow and OpenCV on the
        host), "torch" (on the replica's torch device), "auto" (torch on a GPU, NumPy on a CPU).
        `background_*`: how many batch photos this replica takes beside users' scans (`InteractiveFirst`).
        `page_weights`: the page detector (#48, `POST /v1/scan/page`), in the same runtime; loaded on the
        first page, so a replica that never sees one never holds it. `second_weights`: the detector asked
        about photos these weights find no card in (`CardDetector.second`), in the same runtime.
        `check_weights`: the face check asked about every find (`CardDetector.check`), in OpenCV."""
        from models.detector import CardDetector
        from models.face_check import FaceCheck
        from models.page_detector import PageDetector
        from models.sessions import Backend

        runtime = Backend.from_dict({**(backend or {}), "threads": threads})
        device = _replica_device(device, threads, onnx=runtime.kind == "onnx")
        # A Triton server serves the single-card detector only: the others then run in-process.
        own_runtime = runtime if runtime.kind != "triton" else Backend.from_dict({"threads": threads})
        second = CardDetector(Path(second_weights), device, own_runtime) if second_weights else None
        check = FaceCheck(Path(check_weights)) if check_weights else None
        self.model = CardDetector(Path(weights), device, runtime, second=second, check=check)
        self.page_model = (
            PageDetector(Path(page_weights), device, own_runtime, load=False) if page_weights else None
        )
        self.on_device = device.startswith("cuda") if pixels == "auto" else pixels == "torch"
        self.handed_out: deque[Any] = deque(maxlen=FACES_HELD)
        _set_batching(self.locate_batch, {"batch_wait_ms": batch_wait_ms})
        self.gate = InteractiveFirst(background_busy_slots, background_idle_slots, background_quiet_ms / 1000)
        # Exported by Ray as `ray_cardcat_scanner_detector_calls_total{priority}`.
        self.calls = Counter(
            DETECTOR_CALLS_METRIC,
            description="Photos the Detector located: users' scans (interactive) and batch photos "
            "(background, let in behind them).",
            tag_keys=("priority",),
        )
        self.model.warm()  # first-call costs (allocator, oneDNN kernels) before the first request

    def reconfigure(self, config: dict[str, Any]) -> None:
        _set_batching(self.locate_batch, config)

    async def locate(self, request: LocateRequest) -> Located:
        """A user's scan (`POST /v1/scan`): straight into the batching queue."""
        self.calls.inc(tags={"priority": "interactive"})
        async with self.gate.interactive():
            return await self.locate_batch(request)

    async def locate_background(self, request: LocateRequest) -> Located:
        """A batch photo (`catalog_api.batches`): in when the gate has a slot (`serve_app.priority`)."""
        async with self.gate.background():
            self.calls.inc(tags={"priority": "background"})
            return await self.locate_batch(request)

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=BATCH_WAIT_S)
    async def locate_batch(self, requests: list[LocateRequest]) -> list[Located]:
        timings: list[dict[str, float]] = [{} for _ in requests]
        photos, sizes = [r.photo for r in requests], [r.thumbnail for r in requests]
        looks, coarse = [r.first_look for r in requests], [r.coarse for r in requests]
        found = await asyncio.to_thread(self.locate_photos, photos, timings, sizes, looks, coarse)
        located = []
        for item, spent in zip(found, timings, strict=True):
            if isinstance(item, Face) and item.first_look:
                # Answered from its thumbnail, or sent back for the full pipeline: never read, never put.
                located.append(
                    Located(None, item.thumbnail, timings=spent, first_look=True, candidates=item.candidates)
                )
            elif isinstance(item, Face):
                face = ray.put(item.pixels)
                self.handed_out.append(face)
                located.append(Located(face, item.thumbnail, timings=spent))
            else:
                located.append(dataclasses.replace(item, timings=spent))
        return located

    async def locate_page(self, request: PageRequest) -> LocatedPage:
        """Every card of one photo (#48): not batched (a page is a batch of cards already); its faces go
        out by reference, as a single scan's."""
        if self.page_model is None:
            raise RuntimeError("this scanner was deployed without a page detector")
        self.calls.inc(tags={"priority": "interactive"})
        timings: dict[str, float] = {}
        async with self.gate.interactive():
            found = await asyncio.to_thread(
                locate_page, self.page_model, request.photo, request.thumbnail, request.limit, timings
            )
        if not isinstance(found, PageFaces):
            return LocatedPage(error=found, timings=timings)
        faces = [None if face is None else ray.put(face) for face in found.faces]
        self.handed_out.extend(face for face in faces if face is not None)
        return LocatedPage(found.quads, faces, found.thumbnails, found.truncated, timings=timings)

    def locate_photos(
        self,
        photos: list[bytes],
        timings: list[dict[str, float]] | None = None,
        thumbnails: list[tuple[int, int]] | None = None,
        looks: list[bool] | None = None,
        coarse: list[list[np.ndarray] | None] | None = None,
    ) -> list[Face | Located]:
        """Photos of any size and format in one batch (`serve_app.stages.locate_photos`, which says what
        `looks` and `coarse` do): the rectified face (and thumbnail, sizes given) of each, or a `Located`
        saying there is none, or why."""
        found = locate_photos(self.model, photos, self.on_device, timings, thumbnails, looks, coarse)
        return [face if isinstance(face, Face) else Located(error=face) for face in found]


@serve.deployment(max_ongoing_requests=32)
class Reader:
    def __init__(
        self,
        weights: str,
        device: str = "auto",
        checkpoint: str | None = None,
        arch: str = "",
        threads: int = 1,
        batch_wait_ms: float = ScanConfig.batch_wait_ms,
        runtime: str = "torch",
    ) -> None:
        """`runtime`: "torch", or "onnx" (the weights' ONNX export in ONNX Runtime on the CPU; no torch)."""
        from models.ocr import PrintReader

        device = _replica_device(device, threads, onnx=runtime == "onnx")
        kwargs: dict[str, Any] = {"arch": arch} if arch else {}
        checkpoint_path = Path(checkpoint) if checkpoint else None
        self.model = PrintReader(
            Path(weights), device, checkpoint_path, runtime=runtime, threads=threads, **kwargs
        )
        _set_batching(self.read, {"batch_wait_ms": batch_wait_ms})
        self.model.warm()  # first-call costs (allocator, oneDNN kernels) before the first request

    def reconfigure(self, config: dict[str, Any]) -> None:
        _set_batching(self.read, config)

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=BATCH_WAIT_S)
    async def read(self, requests: list[tuple[Any, bool, list[str]]]) -> list[dict[str, Any]]:
        """Each request: a face (an array, or the Detector's object reference to one), whether to turn it
        180° first, and the footer lines its candidates print (scored for fusion)."""
        fetched = await asyncio.gather(*(_resolve(face) for face, _, _ in requests), return_exceptions=True)
        # A face the object store no longer has fails its own scan only (the caller retries it), not the
        # batch it came in with.
        faces, footers = [], []
        for face, (_, turn, lines) in zip(fetched, requests, strict=True):
            if isinstance(face, np.ndarray):
                faces.append(half_turn(face) if turn else face)
                footers.append(lines)
        reads = iter(await asyncio.to_thread(self.model.read_batch, faces, footers) if faces else [])
        return [
            dataclasses.asdict(next(reads))
            if isinstance(face, np.ndarray)
            else {FACE_LOST: f"{type(face).__name__}: {face}"}
            for face in fetched
        ]


async def _resolve(face: Any) -> np.ndarray:
    return face if isinstance(face, np.ndarray) else await face


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
        threads: int = 1,
        batch_wait_ms: float = ScanConfig.batch_wait_ms,
    ) -> None:
        from models.embedder import CardEmbedder
        from models.sessions import Backend
        from serve_app.index_bundle import BundleWatcher

        runtime = Backend.from_dict({**(backend or {}), "threads": threads})
        device = _replica_device(device, threads, onnx=runtime.kind == "onnx")
        self.model = CardEmbedder(Path(weights), device, backend=runtime)
        # On a GPU the index is searched there too (one exact matrix product, models.tensor_ops).
        self.search_device = device if device.startswith("cuda") else None
        self.top_k = top_k
        self.watcher: BundleWatcher = BundleWatcher(Path(index_dir))
        self.searched: str | None = None
        self._prepare()
        _set_batching(self.search, {"batch_wait_ms": batch_wait_ms})
        self.model.warm()  # first-call costs (allocator, oneDNN kernels) before the first request

    def _prepare(self) -> IndexBundle:
        """The current bundle, moved to the search device and checked against the model on first use."""
        bundle = self.watcher.bundle
        if bundle is None:
            raise RuntimeError(f"no index in {self.watcher.directory}")
        if bundle.stamp != self.searched:
            if self.search_device:
                bundle.index.search_on(self.search_device)
            if bundle.index.embedder_version != self.model.version:
                log.error(
                    "index %s was built by embedder %s, not %s",
                    self.watcher.directory,
                    bundle.index.embedder_version,
                    self.model.version,
                )
            self.searched = bundle.stamp
        return bundle

    def reconfigure(self, config: dict[str, Any]) -> None:
        if config.get("index_dir"):
            self.watcher.move_to(Path(config["index_dir"]))
        self.top_k = int(config.get("top_k", self.top_k))
        _set_batching(self.search, config)
        self._prepare()

    def print_table(self) -> tuple[str, PrintTable]:
        """The print table of the build this replica searches now, with its stamp."""
        bundle = self._prepare()
        return bundle.stamp, bundle.table

    def input_size(self) -> tuple[int, int]:
        """(width, height) the network takes: callers shrink faces to it before sending them."""
        return self.model.input_size

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=BATCH_WAIT_S)
    async def search(self, faces: list[np.ndarray]) -> list[tuple[Hits, Hits, str]]:
        """Each request: one rectified face (best at `input_size`); its hits upright and turned 180° (the
        detector leaves the top open), and the stamp of the build they came from. The replica turns the
        face itself, so a scan sends it once."""
        if self.watcher.due():
            await asyncio.to_thread(self.watcher.refresh)
            await asyncio.to_thread(self._prepare)  # a new build moves to the search device off the loop
        bundle = self._prepare()

        def run() -> list[tuple[Hits, Hits, str]]:
            hits = search_faces(self.model, bundle.index, faces, self.top_k)
            return [(up, down, bundle.stamp) for up, down in hits]

        return await asyncio.to_thread(run)


@serve.deployment(max_ongoing_requests=64)
class ScanService:
    """`ScanPipeline` as a deployment, for callers that reach the app rather than its models: Ray's HTTP
    proxy, and Serve configs deployed for an ingress elsewhere. `cardcat serve`'s ingress runs the same
    pipeline in its own process and asks this replica only for the fusion thresholds. Loads no network
    runtime."""

    def __init__(
        self,
        detector: DeploymentHandle,
        embedder: DeploymentHandle,
        reader: DeploymentHandle,
        config: dict[str, Any],
    ) -> None:
        self.config = ScanConfig(**config)
        self.pipeline = ScanPipeline(
            detector, embedder, reader, self.config.fusion_thresholds(), first_look=self.config.first_look
        )

    def reconfigure(self, config: dict[str, Any]) -> None:
        if config.get("thresholds"):
            self.pipeline.thresholds = Thresholds(**config["thresholds"])
        if "first_look" in config:
            self.pipeline.first_look = self.config.first_look = bool(config["first_look"])

    def pipeline_settings(self) -> dict[str, Any]:
        """How this app composes a scan (its args, or a later user_config): the fusion `thresholds` and
        whether the cascade's `first_look` runs. An ingress composing scans itself fetches them from here,
        so one deployment config holds them."""
        thresholds = dataclasses.asdict(self.pipeline.thresholds)
        return {"thresholds": thresholds, "first_look": self.pipeline.first_look}

    async def __call__(self, request: Request) -> JSONResponse:
        """`POST /scan` on Ray's HTTP proxy: the photo's bytes as the body (`POST /scan/page`: every card
        in it, #48). The proxy is off unless an operator turns it on for an ingress elsewhere
        (`CARDCAT_SCAN_PORT`, or a Serve config, which `deploy/k8s/networkpolicy.yaml` opens to the API
        pods only), and it holds the ingress's cap."""
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_IMAGE_BYTES:
                too_large = PayloadTooLarge("The photo is larger than 10 MB.")
                return JSONResponse(refusal(too_large.code, too_large.message), status_code=too_large.status)
        answer: ScanAnswer | PageAnswer
        if request.url.path.rstrip("/").endswith("/page"):  # `POST /scan/page`: every card (#48)
            answer = await self.pipeline.scan_page(bytes(body))
        else:
            answer = await self.scan_photo(bytes(body), request.query_params.get("background") == "1")
        status = refusal_error(cast(ScanRefusal, answer)["error"]).status if "error" in answer else 200
        return JSONResponse(answer, status_code=status)

    async def scan_photo(self, data: bytes, background: bool = False) -> ScanAnswer:
        """The decision as JSON-ready data, or `{"error": {code, message}}` when the bytes are not a photo
        we can decode; `background`: a batch photo (`?background=1` on `POST /scan`)."""
        return await self.pipeline.scan_photo(data, background)


def _wants_gpu(device: str) -> bool:
    """Whether the model replicas ask Ray for a GPU. For "auto" the cluster's resources decide, not torch:
    this runs in the process that builds the app (the ingress, for `cardcat serve`), which should not
    load torch's 500 MB just to look."""
    if device != "auto":
        return device.startswith("cuda")
    if ray.is_initialized():
        return ray.cluster_resources().get("GPU", 0) > 0
    return resolve_device(device) == "cuda"


def build_app(args: dict[str, Any]) -> Any:
    """`serve run serve_app.app:build_app index_dir=...` and the deploy/ configs call this. Ray takes an
    application builder of exactly one parameter (`serve deploy` refuses any other), so the stand-ins'
    variant is `compose_app`."""
    return compose_app(args)


def compose_app(args: dict[str, Any], classes: dict[str, Any] | None = None) -> Any:
    """The scanner application. `classes` replaces deployments by role ("detector", "embedder",
    "reader"): `benchmarks/scan_floor.py` serves stand-ins without networks through the same options and
    composition, to measure what Ray costs."""
    config = ScanConfig(**args)
    device = config.device
    gpu = _wants_gpu(device)
    config = config.resolved(gpu)  # "auto" runtimes: ONNX Runtime where the model replicas get no GPU
    # Fractional CPUs so the four deployments fit a 2-core machine; the model deployments share a GPU.
    models = {"num_cpus": 0.5, **({"num_gpus": 0.25} if gpu else {})}
    # With backend: triton the detector and embedder replicas only pre- and post-process: no GPU; nor does
    # a model replica whose network runs in ONNX Runtime (on the CPU).
    tensor_models = models if config.backend == "torch" else {"num_cpus": 0.5}
    detector_models = tensor_models if config.detector_runtime == "torch" else {"num_cpus": 0.5}
    embedder_models = tensor_models if config.embedder_runtime == "torch" else {"num_cpus": 0.5}
    # Ray's decorator turns these classes into Deployments, which mypy cannot see.
    deployments: Any = {"detector": Detector, "embedder": Embedder, "reader": Reader, "service": ScanService}
    deployments.update(classes or {})
    replicas = config.replicas
    # Named as the ingress asks for them (serve_app.pipeline), whatever the classes are called.
    detector = deployments["detector"].options(
        name=DETECTOR, ray_actor_options=detector_models, num_replicas=replicas
    )
    embedder = deployments["embedder"].options(
        name=EMBEDDER, ray_actor_options=embedder_models, num_replicas=replicas
    )
    reader_models = models if config.reader_options() == "torch" else {"num_cpus": 0.5}
    reader = deployments["reader"].options(
        name=READER, ray_actor_options=reader_models, num_replicas=replicas
    )
    service = deployments["service"].options(name=SERVICE, ray_actor_options={"num_cpus": 0.25})
    # Warnings only, no access log: a line per request and stage is I/O the scanner pays for on every call.
    quiet = {"log_level": "WARNING", "enable_access_log": False}
    detector, embedder, reader, service = (
        d.options(logging_config=quiet) for d in (detector, embedder, reader, service)
    )
    threads, wait = config.threads, config.batch_wait_ms
    return service.bind(
        detector.bind(
            config.detector_weights,
            device,
            config.detector_options(),
            threads,
            batch_wait_ms=wait,
            background_busy_slots=config.background_busy_slots,
            background_idle_slots=config.background_idle_slots,
            background_quiet_ms=config.background_quiet_ms,
            page_weights=config.page_detector_weights,
            second_weights=config.second_detector_weights,
            check_weights=config.face_check_weights,
        ),
        embedder.bind(
            config.embedder_weights,
            config.index_dir,
            device,
            config.top_k,
            config.embedder_options(),
            threads,
            batch_wait_ms=wait,
        ),
        reader.bind(
            config.ocr_weights,
            device,
            config.ocr_checkpoint,
            config.ocr_arch,
            threads,
            batch_wait_ms=wait,
            runtime=config.reader_options(),
        ),
        config.as_dict(),
    )
