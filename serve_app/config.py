"""What the scanner's Ray Serve application is built from: weights, index, device, batching."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from serve_app.fusion import Thresholds

MODELS = Path(__file__).resolve().parents[1] / "models" / "weights"
SECOND_DETECTOR = MODELS / "detector_second.pt"  # models.detector.SECOND_WEIGHTS
FACE_CHECK = MODELS / "face_check.onnx"  # models.face_check.WEIGHTS


@dataclass
class ScanConfig:
    index_dir: str
    detector_weights: str = str(MODELS / "detector.pt")
    # Every card of a page photo (#48, `POST /v1/scan/page`); "" turns pages off.
    page_detector_weights: str = str(MODELS / "page_detector.pt")  # models.page_detector.PAGE_WEIGHTS
    # The detector asked about photos `detector_weights` finds no card in (`models.detector.CardDetector`'s
    # `second`); "" asks no one.
    second_detector_weights: str = str(SECOND_DETECTOR)
    # The face check asked about every find of the detector (and of its second opinion): a find it takes
    # for a card back or an empty holder is no card (`models.face_check`); "" checks none.
    face_check_weights: str = str(FACE_CHECK)
    embedder_weights: str = str(MODELS / "embedder.pt")
    ocr_weights: str = str(MODELS / "ocr.pt")
    ocr_checkpoint: str | None = None  # any docTR recognition checkpoint, instead of ours
    ocr_arch: str = "crnn_mobilenet_v3_small"
    device: str = "auto"  # "auto": CUDA when the replica has a GPU
    top_k: int = 32
    threads: int = 1  # torch intra-op threads per CPU model replica
    # How long each model deployment's batch waits for more requests after its first (milliseconds).
    # 0: a batch takes what is queued when the replica is free. Under load the queue fills batches while
    # the previous one runs anyway; a lone scan waited at each of three stages (2 ms: ~5-10 ms more p50 at
    # concurrency 1, the same CPU per scan at 16; docs/scanner-performance.md, "Batch wait").
    batch_wait_ms: float = 0.0
    # Batch photos (`catalog_api.batches`) a Detector replica takes beside users' scans
    # (`serve_app.priority.InteractiveFirst`): `background_idle_slots` at once while no user's scan came
    # for `background_quiet_ms`, else `background_busy_slots`, so a user waits behind one batch photo, not
    # every lane of every ingress process (docs/batches.md, "Users' scans first").
    background_busy_slots: int = 1
    background_idle_slots: int = 8
    background_quiet_ms: float = 500.0
    # Replicas of each model deployment (Detector, Embedder, Reader). Ray Serve spreads a deployment's
    # replicas over the cluster's nodes, so on several nodes one lost node leaves each model answering.
    replicas: int = 1
    # The scan cascade (#47): the detector's whole-photo view alone first (`CardDetector.first_look_batch`);
    # its answer is kept only when the picture alone is certain of a unique artwork, else the photo goes
    # through the full pipeline from that view's candidates (docs/scanner-performance.md, "The first look").
    first_look: bool = True
    thresholds: dict[str, float] = field(default_factory=dict)
    # Where the detector and embedder networks run: "torch" in the replica, or "triton": a Triton server
    # at triton_url (host:port, HTTP) serving the repository `python -m deploy.triton.export` writes.
    # The OCR model always runs in the replica.
    backend: str = "torch"
    triton_url: str = "127.0.0.1:8000"
    # The detector's arithmetic in the replica (models.sessions.Backend.precision): "fp32", or "bf16" /
    # "auto" (bf16 on a CPU with bf16 instructions). bf16 halves the network's time and moves corners by
    # ~0.1% (validation seeds 20M), but end to end it saved only ~6 ms of ~140 per scan and flipped two
    # reprint near-ties (benchmarks/results/*_bf16.json), so fp32 stays the default. The embedder stays
    # fp32, the arithmetic its index was built with; the OCR network gained nothing from bf16.
    detector_precision: str = "fp32"
    # Where each model replica runs its network when `backend` is "torch": "torch", "onnx" (its ONNX
    # export beside the weights, `models/weights/<model>.onnx`, in ONNX Runtime on the CPU; that replica
    # never imports torch, ~60 MB of runtime instead of ~690 for this CUDA build), or "auto": onnx where the
    # model replicas get no GPU, torch where they do. Outputs agree with torch's to ~1e-7 (detector,
    # embedder) and ~2e-4 in log-probability (reader); on the full benchmark every answer was the same but
    # one more hard reprint photo with its true card among the matches (docs/scanner-performance.md, "The
    # three models without torch"). `training.<model>` writes the export with new weights; a stale one is
    # refused. An "onnx" embedder searches on the CPU; `detector_precision` is torch's only; a docTR
    # checkpoint (`ocr_checkpoint`) has no export, so with one the reader runs in torch.
    detector_runtime: str = "auto"
    embedder_runtime: str = "auto"
    reader_runtime: str = "auto"

    def resolved(self, gpu: bool) -> ScanConfig:
        """This config with each "auto" runtime made definite for model replicas with a GPU or without."""

        def pick(runtime: str) -> str:
            return ("torch" if gpu else "onnx") if runtime == "auto" else runtime

        return replace(
            self,
            detector_runtime=pick(self.detector_runtime),
            embedder_runtime=pick(self.embedder_runtime),
            reader_runtime=pick(self.reader_runtime),
        )

    def embedder_options(self) -> dict[str, Any]:
        """What the Embedder's models.sessions.Backend.from_dict takes."""
        return self._runtime_options(self.backend_options(), self.embedder_runtime)

    def detector_options(self) -> dict[str, Any]:
        """What the Detector's models.sessions.Backend.from_dict takes."""
        return self._runtime_options(self.backend_options(self.detector_precision), self.detector_runtime)

    def reader_options(self) -> str:
        """The runtime the Reader replica runs its network in (`models.ocr.PrintReader`'s `runtime`): "onnx"
        only where asked for (an unresolved "auto" is torch, as for the other two) and no checkpoint is."""
        return "onnx" if self.reader_runtime == "onnx" and not self.ocr_checkpoint else "torch"

    def _runtime_options(self, options: dict[str, Any], runtime: str) -> dict[str, Any]:
        """ONNX Runtime in the replica where asked for and the backend is the in-process one."""
        if self.backend == "torch" and runtime == "onnx":
            options["kind"] = "onnx"
        return options

    def backend_options(self, precision: str = "fp32") -> dict[str, Any]:
        """What models.sessions.Backend.from_dict takes."""
        return {"kind": self.backend, "triton_url": self.triton_url, "precision": precision}

    def fusion_thresholds(self) -> Thresholds:
        return Thresholds(**self.thresholds)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def models_present(config: ScanConfig) -> list[str]:
    """The weight files and index parts that are missing (empty when the scanner can run)."""
    needed = [config.detector_weights, config.embedder_weights]
    if config.second_detector_weights:
        needed.append(config.second_detector_weights)
    if config.face_check_weights:
        needed.append(config.face_check_weights)
    if not config.ocr_checkpoint:
        needed.append(config.ocr_weights)
    needed += [str(Path(config.index_dir) / name) for name in ("index.faiss", "meta.json", "cards.json")]
    return [path for path in needed if not Path(path).exists()]
