"""What the scanner's Ray Serve application is built from: weights, index, device, batching."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from serve_app.fusion import Thresholds

MODELS = Path(__file__).resolve().parents[1] / "models" / "weights"


@dataclass
class ScanConfig:
    index_dir: str
    detector_weights: str = str(MODELS / "detector.pt")
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
    # Replicas of each model deployment (Detector, Embedder, Reader). Ray Serve spreads a deployment's
    # replicas over the cluster's nodes, so on several nodes one lost node leaves each model answering.
    replicas: int = 1
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
    # Where the embedder's network runs when `backend` is "torch": "torch", or "onnx": its ONNX export
    # (`models/weights/embedder.onnx`, `python -m training.embedder.export_onnx`) in ONNX Runtime on the
    # CPU. An "onnx" replica never imports torch: ~60 MB of runtime instead of ~690 for this CUDA build,
    # vectors within ~1e-7 of torch's (docs/scanner-performance.md, "The embedder without torch"). It
    # searches on the CPU even where the node has a GPU.
    embedder_runtime: str = "torch"

    def embedder_options(self) -> dict[str, Any]:
        """What the Embedder's models.sessions.Backend.from_dict takes."""
        options = self.backend_options()
        if self.backend == "torch" and self.embedder_runtime == "onnx":
            options["kind"] = "onnx"
        return options

    def backend_options(self, precision: str = "fp32") -> dict[str, Any]:
        """What models.sessions.Backend.from_dict takes."""
        return {"kind": self.backend, "triton_url": self.triton_url, "precision": precision}

    def fusion_thresholds(self) -> Thresholds:
        return Thresholds(**self.thresholds)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def models_present(config: ScanConfig) -> list[str]:
    """The weight files and index parts that are missing (empty when the scanner can run)."""
    needed = [config.detector_weights, config.embedder_weights]
    if not config.ocr_checkpoint:
        needed.append(config.ocr_weights)
    needed += [str(Path(config.index_dir) / name) for name in ("index.faiss", "meta.json", "cards.json")]
    return [path for path in needed if not Path(path).exists()]
