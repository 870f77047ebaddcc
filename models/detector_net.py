"""The card detector's network: a small U-Net from a photo's view to card and band probability maps.

Defined here, once, and imported by training and by the torch path of `models.detector.CardDetector`, so
the two cannot drift. Kept apart from `models.detector` (the geometry around the network) so that a
replica whose network runs in ONNX Runtime (`python -m training.detector.export_onnx` writes it) never
imports torch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from models.checkpoints import load_weights, read_weights
from models.detector_config import DetectorConfig
from models.layers import conv_bn_relu


class DetectorNet(nn.Module):
    """A small U-Net: five stride-2 stages down, four up; 3 logit maps at input resolution."""

    def __init__(
        self, widths: tuple[int, ...] = (16, 32, 64, 96, 128), decoder: tuple[int, ...] = (64, 48, 24, 16)
    ):
        super().__init__()
        self.down = nn.ModuleList()
        cin = 3
        for w in widths:
            self.down.append(nn.Sequential(conv_bn_relu(cin, w, 2), conv_bn_relu(w, w)))
            cin = w
        self.up = nn.ModuleList()
        for skip, w in zip(reversed(widths[:-1]), decoder, strict=True):
            self.up.append(conv_bn_relu(cin + skip, w))
            cin = w
        self.head = nn.Conv2d(cin, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for stage in self.down:
            x = stage(x)
            skips.append(x)
        for stage, skip in zip(self.up, reversed(skips[:-1]), strict=True):
            x = stage(torch.cat([_upsample_to(x, skip), skip], 1))
        return F.interpolate(self.head(x), scale_factor=2, mode="bilinear", align_corners=False)


def _upsample_to(x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
    """`x` bilinearly resized to `skip`'s height and width. Where that is exactly twice `x`'s (every stage
    of a view whose side divides by 32, as the served 224 does), by `scale_factor=2`: the same numbers in
    torch, bit for bit, but a traced export then has a constant scale instead of sizes computed from the
    tensor's shape, which ONNX Runtime runs in its blocked-channel (NCHWc) layout like the convolutions
    around it, without converting the layout back and forth at every stage (`models/weights/detector.onnx`:
    ~10% less time a view, measured in docs/scanner-performance.md)."""
    if skip.shape[-2] == 2 * x.shape[-2] and skip.shape[-1] == 2 * x.shape[-1]:
        return F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
    return F.interpolate(x, size=skip.shape[-2:], mode="bilinear", align_corners=False)


def build_net(cfg: DetectorConfig) -> DetectorNet:
    return DetectorNet(cfg.widths, cfg.decoder)


def read_net(weights: Path) -> DetectorNet:
    """The trainable fp32 network of a weights file, in eval mode (BatchNorm kept: a teacher to distil, a
    network to cut), where `CardDetector` folds it for serving."""
    blob = read_weights(weights)
    return load_weights(build_net(DetectorConfig.from_dict(blob["config"])), blob).eval()


def to_tensor(views: list[np.ndarray], device: str | torch.device = "cpu") -> torch.Tensor:
    """uint8 HxWx3 RGB views -> normalised NCHW float (channels_last: faster convolutions on CPU)."""
    return _normalise(torch.from_numpy(np.stack(views)).to(device))


def _normalise(views: torch.Tensor) -> torch.Tensor:
    x = views.permute(0, 3, 1, 2).float()
    return ((x - 127.5) / 64.0).contiguous(memory_format=torch.channels_last)


class DetectorGraph(nn.Module):
    """What a Session runs: uint8 NHWC views -> card and band probabilities (N, 3, H, W). Normalising
    inside the graph lets a Triton client send bytes, a quarter of the floats, with the same arithmetic."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, views: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.net(_normalise(views)))
