"""Card-face embedder: a small CNN mapping a rectified face to an L2-normalised vector.

The scanner rectifies a photo to the canonical 600x838 face; this model embeds it (and the caller embeds
the 180-degree rotation too) so that a cosine search over every catalog face finds its artwork. The
network is defined here, once, and imported by both training and serving, so the two cannot drift.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from models.checkpoints import load_weights, read_weights, weights_version
from models.geometry import shrink
from models.inference import InferenceModel
from models.layers import conv_bn_relu
from models.sessions import Backend, Session, fold_batchnorm, open_graph

WEIGHTS = Path(__file__).resolve().parent / "weights" / "embedder.pt"
INPUT_W, INPUT_H = 96, 134  # keeps the face's 600:838 aspect; the art window is ~80x53 pixels here
# Tensor names of the served graph; Triton's libtorch backend wants the <name>__<index> form.
INPUT, OUTPUT = "faces__0", "vectors__0"


def prepare(face: np.ndarray, size: tuple[int, int] = (INPUT_W, INPUT_H)) -> np.ndarray:
    """RGB uint8 face of any size -> the network's input size (`models.geometry.shrink`)."""
    return shrink(face, size)


class Block(nn.Module):
    """Downsampling residual pair: plain 3x3 convs are the fastest thing oneDNN runs on one CPU thread."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.down = conv_bn_relu(cin, cout, 2)
        self.conv = nn.Sequential(nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.down(x)
        return F.relu(x + self.conv(x), inplace=True)


class CardNet(nn.Module):
    """uint8 NCHW -> unit vectors. The head keeps a coarse spatial grid because where things sit on a
    face (art window vs text box) is what tells two artworks apart; global pooling alone would blur it."""

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(
        self, dim: int = 128, widths: tuple[int, ...] = (16, 32, 64, 128, 192), grid: tuple[int, int] = (4, 3)
    ):
        super().__init__()
        self.stem = conv_bn_relu(3, widths[0], 2)
        self.stages = nn.Sequential(*[Block(a, b) for a, b in itertools.pairwise(widths)])
        self.grid = grid
        self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(widths[-1] * grid[0] * grid[1], dim))
        self.register_buffer("mean", torch.tensor([0.5, 0.5, 0.5]).view(1, 3, 1, 1) * 255)
        self.register_buffer("std", torch.tensor([0.25, 0.25, 0.25]).view(1, 3, 1, 1) * 255)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = (x.float() - self.mean) / self.std
        x = self.stages(self.stem(x))
        x = F.adaptive_avg_pool2d(x, self.grid).flatten(1)
        return F.normalize(self.head(x), dim=1)


def build_net(config: dict[str, Any]) -> CardNet:
    """The one model factory (training and serving both call it with the manifest's `model` section)."""
    return CardNet(
        dim=int(config.get("dim", 128)),
        widths=tuple(config.get("widths", (16, 32, 64, 128, 192))),
        grid=tuple(config.get("grid", (4, 3))),
    )


def to_tensor(faces: list[np.ndarray]) -> torch.Tensor:
    """Prepared RGB uint8 HWC faces -> a uint8 NCHW batch (normalisation happens inside the net)."""
    return torch.from_numpy(np.stack(faces)).permute(0, 3, 1, 2).contiguous()


class EmbedderGraph(nn.Module):
    """What a Session runs: prepared uint8 NHWC faces -> (N, dim) unit vectors (bytes on the wire)."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, faces: torch.Tensor) -> torch.Tensor:
        return self.net(faces.permute(0, 3, 1, 2).contiguous())


class CardEmbedder(InferenceModel[np.ndarray, np.ndarray]):
    """Loads weights once and embeds faces in batches; `version` says which weights built an index."""

    version: str
    input_size: tuple[int, int]
    dim: int
    net: CardNet
    graph: EmbedderGraph
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
        either way: its hash is the version an index records and a Triton export must carry."""
        self.weights = Path(weights) if weights is not None else WEIGHTS
        self.device = torch.device(device)
        self.batch_size = batch_size
        self.backend = backend or Backend()
        super().__init__(load=load)

    def _load(self) -> None:
        path = self.weights
        if not path.exists():
            raise FileNotFoundError(f"{path} not found: train with `python -m training.embedder.train`")
        self.version = weights_version(path)
        blob = read_weights(path)
        model_cfg = blob["model"]
        width, height = model_cfg.get("input_size", (INPUT_W, INPUT_H))
        self.input_size = (int(width), int(height))
        self.net = load_weights(build_net(model_cfg), blob)
        fold_batchnorm(self.net.to(self.device).eval())
        self.dim = int(model_cfg.get("dim", 128))
        self.graph = EmbedderGraph(self.net)
        self.session = open_graph(
            self.backend, "embedder", self.graph, (INPUT, OUTPUT), self.device, self.version
        )

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
