"""The narrower detector cut from a trained one (`training.detector.slim`) and its distillation loss."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from models.checkpoints import load_weights
from models.detector import WEIGHTS, DetectorConfig
from models.detector_net import DetectorNet, read_net
from training.detector.slim import main as slim_main
from training.detector.slim import slim
from training.detector.train import DEFAULTS, detector_loss, load_teacher, training_loss


def shipped() -> DetectorNet:
    return read_net(WEIGHTS)


def test_a_cut_at_full_width_is_the_teacher() -> None:
    teacher = shipped()
    student = slim(teacher, tuple(DetectorConfig().widths), tuple(DetectorConfig().decoder)).eval()
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        assert torch.equal(student(x), teacher(x))


def _blocks(net: DetectorNet) -> list[nn.Sequential]:
    """Every conv-BatchNorm-ReLU block, in order."""
    return [m for m in net.modules() if isinstance(m, nn.Sequential) and isinstance(m[0], nn.Conv2d)]


def test_a_cut_keeps_the_live_channels_wired_as_the_teacher_had_them() -> None:
    """A teacher whose every block has dead channels (BatchNorm scale and shift 0: the ReLU outputs 0) at
    scattered positions computes exactly what its live channels do; the cut must find those channels and
    wire each stage, skip and the head to the same ones, so it computes the same maps."""
    torch.manual_seed(0)
    teacher = DetectorNet((8, 8, 8, 8, 8), (8, 8, 8, 8)).eval()
    live_widths = (5, 6, 4, 7, 5)
    live_decoder = (6, 3, 5, 4)
    # Block order: each down stage's two blocks, then the up blocks.
    lives = [w for w in live_widths for _ in (0, 1)] + list(live_decoder)
    with torch.no_grad():
        for block, live in zip(_blocks(teacher), lives, strict=True):
            norm = block[1]
            dead = torch.randperm(8)[: 8 - live]
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.2, 0.2)
            norm.running_mean.uniform_(-0.1, 0.1)
            norm.running_var.uniform_(0.5, 2.0)
            norm.weight[dead] = 0.0
            norm.bias[dead] = 0.0
    student = slim(teacher, live_widths, live_decoder).eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        assert torch.allclose(student(x), teacher(x), atol=1e-5)
        # Not the same by accident: the dead channels are what the cut removed.
        assert student.head.weight.shape[1] == live_decoder[-1] < teacher.head.weight.shape[1]


def test_a_cut_cannot_be_wider_than_its_teacher() -> None:
    with pytest.raises(ValueError, match="cannot keep"):
        slim(shipped(), (8, 16, 32, 96, 256), (48, 32, 12, 8))


def test_the_cut_file_starts_a_training_run_and_names_its_teacher(tmp_path: Path) -> None:
    out = tmp_path / "slim.pt"
    widths, decoder = (8, 16, 32, 96, 128), (48, 32, 12, 8)
    assert slim_main(["--widths", "8,16,32,96,128", "--decoder", "48,32,12,8", "--out", str(out)]) == 0
    blob = torch.load(out, weights_only=False)
    assert blob["slimmed_from"] == str(WEIGHTS) and blob["step"] == 0
    student = load_weights(DetectorNet(widths, decoder), blob)  # what `train --init` does with it
    assert sum(p.numel() for p in student.parameters()) < sum(p.numel() for p in shipped().parameters())


def test_distillation_mixes_the_truth_with_the_teachers_probabilities() -> None:
    tc = dict(DEFAULTS["train"])
    teacher = load_teacher(str(WEIGHTS), torch.device("cpu"))
    assert teacher is not None and not any(p.requires_grad for p in teacher.parameters())
    assert load_teacher("", torch.device("cpu")) is None
    torch.manual_seed(0)
    x = torch.randn(2, 3, 64, 64)
    target = (torch.rand(2, 3, 64, 64) > 0.5).float()
    logits = torch.randn(2, 3, 64, 64)
    truth = detector_loss(logits, target, tc)
    with torch.no_grad():
        soft = detector_loss(logits, torch.sigmoid(teacher(x)), tc)
    assert torch.equal(training_loss(logits, target, x, None, tc), truth)
    mixed = training_loss(logits, target, x, teacher, {**tc, "distill_weight": 0.25})
    assert torch.allclose(mixed, 0.75 * truth + 0.25 * soft)
    assert not torch.allclose(soft, truth)
