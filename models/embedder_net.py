"""The card-face embedder's network: a small CNN mapping a prepared face to an L2-normalised vector.

Defined here, once, and imported by training and by the torch path of `models.embedder.CardEmbedder`, so
the two cannot drift. Kept apart from `models.embedder` so that a replica whose network runs in ONNX
Runtime (`python -m training.embedder.export_onnx` writes it) never imports torch.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from models.layers import conv_bn_relu


class Block(nn.Module):
    """Downsampling residual pair: plain 3x3 convs are the fastest thing oneDNN runs on one CPU thread."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.down = conv_bn_relu(cin, cout, 2)
        self.conv = nn.Sequential(nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.down(x)
        return F.relu(x + self.conv(x), inplace=True)


def _windows(size: int, cells: int) -> tuple[int, int] | None:
    """Adaptive average pooling's windows along one axis (cell i spans floor(i*size/cells) to
    ceil((i+1)*size/cells)) as one (kernel, stride), or None where they are not all alike."""
    starts = [i * size // cells for i in range(cells)]
    ends = [math.ceil((i + 1) * size / cells) for i in range(cells)]
    kernels = {e - s for s, e in zip(starts, ends, strict=True)}
    strides = {b - a for a, b in itertools.pairwise(starts)} or {1}
    if len(kernels) == 1 and len(strides) == 1:
        return kernels.pop(), strides.pop()
    return None


def grid_pool(x: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """`F.adaptive_avg_pool2d(x, grid)` as a plain average pool wherever its windows are all alike (the
    shipped net's 5x3 map into 4x3 cells: 2x1 windows, stride 1): a graph ONNX can export (its exporter
    refuses adaptive pooling to sizes that do not divide the input), with the same values on the CPU
    (tests/models/test_onnx_embedder.py)."""
    rows, cols = _windows(int(x.shape[-2]), grid[0]), _windows(int(x.shape[-1]), grid[1])
    if rows is None or cols is None:
        return F.adaptive_avg_pool2d(x, grid)
    return F.avg_pool2d(x, (rows[0], cols[0]), (rows[1], cols[1]))


class CardNet(nn.Module):
    """uint8 NCHW -> unit vectors. The head keeps a coarse spatial grid because where things sit on a
    face (art window vs text box) is what tells two artworks apart; global pooling alone would blur it."""

    mean: torch.Tensor
    std: torch.Tensor
    # Pool with `grid_pool`: set only while exporting to ONNX, so torch's own arithmetic (training, GPU
    # serving, the index) stays exactly what it was.
    export_pooling: bool = False

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
        x = grid_pool(x, self.grid) if self.export_pooling else F.adaptive_avg_pool2d(x, self.grid)
        x = x.flatten(1)
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
