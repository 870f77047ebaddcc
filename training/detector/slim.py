"""A narrower detector cut from a trained one, to start a distillation run from:
`python -m training.detector.slim --widths 12,24,48,96,128 --decoder 48,32,16,12 --out runs/detector/slim.pt`.

Why: the detector network is most of a scan's CPU (three 224-px views a photo), and a network trained from
scratch on this box's two cores never reached the shipped one's corners on hard photos. A narrower U-Net
that starts from the shipped one's strongest channels (each BatchNorm's |gamma|: a channel whose scale is
near zero adds little after the ReLU) begins near the teacher and only has to recover what the cut channels
carried; `training.detector.train` with `train.teacher` set then distils the shipped network into it.

Every kept channel keeps its weights exactly; the cut follows the U-Net's wiring: a stage's output channels
are the next stage's inputs and, concatenated after the upsampled decoder channels, a skip's inputs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import cast

import torch
from torch import nn

from models.checkpoints import atomic_save
from models.detector import WEIGHTS
from models.detector_net import DetectorNet, read_net


def _conv_norm(block: nn.Module) -> tuple[nn.Conv2d, nn.BatchNorm2d]:
    """The convolution and BatchNorm of a `models.layers.conv_bn_relu` block."""
    conv, norm = cast(nn.Sequential, block)[:2]
    assert isinstance(conv, nn.Conv2d) and isinstance(norm, nn.BatchNorm2d)
    return conv, norm


def strongest(block: nn.Module, keep: int) -> torch.Tensor:
    """Indices (ascending) of the `keep` output channels of a conv-BatchNorm-ReLU block with the largest
    BatchNorm scale."""
    norm = _conv_norm(block)[1]
    if keep > norm.num_features:
        raise ValueError(f"cannot keep {keep} of {norm.num_features} channels")
    return torch.sort(torch.topk(norm.weight.detach().abs(), keep).indices).values


def _copy_block(dst: nn.Module, src: nn.Module, inputs: torch.Tensor, outputs: torch.Tensor) -> None:
    """dst's conv and BatchNorm = src's, restricted to the `inputs` and `outputs` channel indices."""
    (dst_conv, dst_norm), (src_conv, src_norm) = _conv_norm(dst), _conv_norm(src)
    with torch.no_grad():
        dst_conv.weight.copy_(src_conv.weight[outputs][:, inputs])
        for name in ("weight", "bias", "running_mean", "running_var"):
            getattr(dst_norm, name).copy_(getattr(src_norm, name)[outputs])


def slim(teacher: DetectorNet, widths: tuple[int, ...], decoder: tuple[int, ...]) -> DetectorNet:
    """A DetectorNet of `widths`/`decoder` whose every channel is one of `teacher`'s, weights copied."""
    if len(widths) != len(teacher.down) or len(decoder) != len(teacher.up):
        raise ValueError("the slim network needs the teacher's number of stages")
    student = DetectorNet(widths, decoder)
    inputs = torch.arange(3)
    skips: list[torch.Tensor] = []  # the kept output channels of each down stage
    for src, dst, width in zip(teacher.down, student.down, widths, strict=True):
        (src_first, src_second), (dst_first, dst_second) = cast(nn.Sequential, src), cast(nn.Sequential, dst)
        first = strongest(src_first, width)
        _copy_block(dst_first, src_first, inputs, first)
        inputs = strongest(src_second, width)
        _copy_block(dst_second, src_second, first, inputs)
        skips.append(inputs)
    full = _conv_norm(cast(nn.Sequential, teacher.down[-1])[1])[1].num_features  # what flows up, unslimmed
    for src, dst, width, skip in zip(teacher.up, student.up, decoder, reversed(skips[:-1]), strict=True):
        # The teacher's decoder input is cat(upsampled, skip): skip channel k sits at full + k.
        outputs = strongest(src, width)
        _copy_block(dst, src, torch.cat([inputs, full + skip]), outputs)
        inputs, full = outputs, _conv_norm(src)[1].num_features
    student_bias, teacher_bias = student.head.bias, teacher.head.bias
    assert student_bias is not None and teacher_bias is not None
    with torch.no_grad():
        student.head.weight.copy_(teacher.head.weight[:, inputs])
        student_bias.copy_(teacher_bias)
    return student


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", type=Path, default=WEIGHTS, help="the detector to cut from")
    parser.add_argument("--widths", type=_ints, required=True, help="encoder widths, e.g. 12,24,48,96,128")
    parser.add_argument("--decoder", type=_ints, required=True, help="decoder widths, e.g. 48,32,16,12")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    teacher = read_net(args.weights)
    student = slim(teacher, args.widths, args.decoder)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # The shape of a run's checkpoint without an optimiser: `train --init` starts a run from it.
    atomic_save(
        {"net": student.state_dict(), "step": 0, "elapsed": 0.0, "slimmed_from": str(args.weights)}, args.out
    )
    kept = sum(p.numel() for p in student.parameters())
    print(f"{kept:,} of {sum(p.numel() for p in teacher.parameters()):,} parameters -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
