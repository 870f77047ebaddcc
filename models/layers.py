"""Building blocks the scanner's networks share (one definition, so the detector's and the embedder's
convolutions cannot drift apart). State-dict keys follow the Sequential's indices: 0 conv, 1 norm."""

from __future__ import annotations

from torch import nn


def conv_bn_relu(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    """3x3 conv (no bias: the norm has one) -> BatchNorm -> ReLU; `fold_batchnorm` fuses the first two."""
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)
    )
