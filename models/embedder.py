"""Card-face embedder: a rectified face -> an L2-normalised vector, for a cosine search over every face.

The scanner rectifies a photo to the canonical 600x838 face; this model embeds it (and the caller embeds
the 180-degree rotation too) so that a cosine search over every catalog face finds its artwork. The
network lives in `models.embedder_net` (torch), imported by training and by the torch path here. With
`Backend(kind="onnx")` the same network runs in ONNX Runtime from `embedder.onnx` beside the weights
(`python -m training.embedder.export_onnx`), and this module never imports torch: a CPU replica then
costs ~60 MB of runtime instead of torch's ~690 (docs/scanner-performance.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from models.checkpoints import load_weights, read_weights, weights_version
from models.geometry import shrink
from models.inference import InferenceModel
from models.sessions import Backend, Session, open_export, open_graph

if TYPE_CHECKING:
    from models.embedder_net import CardNet, EmbedderGraph

WEIGHTS = Path(__file__).resolve().parent / "weights" / "embedder.pt"
INPUT_W, INPUT_H = 96, 134  # keeps the face's 600:838 aspect; the art window is ~80x53 pixels here
# Tensor names of the served graph; Triton's libtorch backend wants the <name>__<index> form.
INPUT, OUTPUT = "faces__0", "vectors__0"


def prepare(face: np.ndarray, size: tuple[int, int] = (INPUT_W, INPUT_H)) -> np.ndarray:
    """RGB uint8 face of any size -> the network's input size (`models.geometry.shrink`)."""
    return shrink(face, size)


class CardEmbedder(InferenceModel[np.ndarray, np.ndarray]):
    """Loads weights once and embeds faces in batches; `version` says which weights built an index."""

    version: str
    input_size: tuple[int, int]
    dim: int
    net: CardNet  # the torch path only
    graph: EmbedderGraph  # the torch path only
    session: Session

    def __init__(
        self,
        weights: Path | None = None,
        device: str = "cpu",
        batch_size: int = 64,
        backend: Backend | None = None,
        *,
        load: bool = True,
    ) -> None:
        """`backend` (default: torch, in-process) picks where the network runs; the weights file is read
        either way: its hash is the version an index records and a Triton or ONNX export must carry."""
        self.weights = Path(weights) if weights is not None else WEIGHTS
        self.device = str(device)
        self.batch_size = batch_size
        self.backend = backend or Backend()
        super().__init__(load=load)

    def _load(self) -> None:
        path = self.weights
        if not path.exists():
            raise FileNotFoundError(f"{path} not found: train with `python -m training.embedder.train`")
        self.version = weights_version(path)
        if self.backend.kind == "onnx":
            self._load_onnx()
            return
        import torch

        from models.embedder_net import EmbedderGraph, build_net
        from models.sessions import fold_batchnorm

        blob = read_weights(path)
        model_cfg = blob["model"]
        width, height = model_cfg.get("input_size", (INPUT_W, INPUT_H))
        self.input_size = (int(width), int(height))
        self.net = load_weights(build_net(model_cfg), blob)
        fold_batchnorm(self.net.to(torch.device(self.device)).eval())
        self.dim = int(model_cfg.get("dim", 128))
        self.graph = EmbedderGraph(self.net)
        self.session = open_graph(
            self.backend, "embedder", self.graph, (INPUT, OUTPUT), self.device, self.version
        )

    def _load_onnx(self) -> None:
        """The export beside the weights, refused when it was made from other weights (its index and the
        vectors it computes must come from one network)."""
        self.session, meta = open_export(self.weights, "training.embedder.export_onnx", self.backend.threads)
        width, height = meta.get("input_size", (INPUT_W, INPUT_H))
        self.input_size = (int(width), int(height))
        self.dim = int(meta.get("dim", 128))

    def _warm_batch(self) -> list[np.ndarray]:
        return [np.full((838, 600, 3), 200, np.uint8)]

    def transform(self, item: np.ndarray) -> np.ndarray:
        return prepare(item, self.input_size)

    def embed_batch(self, faces: list[np.ndarray]) -> np.ndarray:
        """RGB uint8 faces (any size, canonical orientation) -> (N, dim) float32 unit vectors."""
        return self.predict_batch(faces)

    def _predict_batch(self, faces: list[np.ndarray]) -> np.ndarray:
        out = np.zeros((len(faces), self.dim), np.float32)
        for start in range(0, len(faces), self.batch_size):
            chunk = np.stack(faces[start : start + self.batch_size])
            out[start : start + len(chunk)] = self.session.run({INPUT: chunk})[OUTPUT]
        return out
