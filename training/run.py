"""One training run's life, shared by the three trainers (`training/{detector,embedder,ocr}/train.py`).

A run lives in `runs/<model>/<name>/`, as dinov2 keeps its runs: the resolved config (`config.yaml`) and
the code's git SHA (`git_sha.txt`) written when it starts, one checkpoint (`last.pt`, replaced whole so
a stopped run never leaves half a file) that it resumes from by default, `metrics.jsonl` (one JSON row a
log or validation step) and `curves.png` drawn from it. A new run may start from other weights
(`start_from`: shipped `models/weights/*.pt` or another run's `last.pt`) and then says so in `init.txt`.
What goes in a checkpoint (its keys) and what is plotted stay each trainer's business.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn

from models.checkpoints import atomic_save, load_weights
from training.curves import Panel, plot_curves
from training.runconfig import git_sha

CHECKPOINT, METRICS, CURVES, INIT_NOTE = "last.pt", "metrics.jsonl", "curves.png", "init.txt"


@dataclass(frozen=True)
class Run:
    """A run directory and what a trainer does with it."""

    directory: Path

    @classmethod
    def start(cls, directory: Path, config: dict[str, Any]) -> Run:
        """Create the directory (or reopen it, to resume) and record the resolved config and git SHA."""
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
        (directory / "git_sha.txt").write_text(git_sha() + "\n")
        return cls(directory)

    @property
    def checkpoint(self) -> Path:
        return self.directory / CHECKPOINT

    def resume(self, fresh: bool = False, map_location: Any = "cpu") -> dict[str, Any] | None:
        """The last checkpoint's blob, or None when there is none (or `fresh` asks to start over)."""
        if fresh or not self.checkpoint.exists():
            return None
        return torch.load(self.checkpoint, map_location=map_location, weights_only=False)

    def save(self, state: dict[str, Any]) -> None:
        atomic_save(state, self.checkpoint)

    def start_from(
        self,
        net: nn.Module,
        path: Path,
        optimizer: torch.optim.Optimizer | None = None,
        map_location: Any = "cpu",
    ) -> dict[str, Any]:
        """Load `net` (floating tensors as fp32) from shipped weights or a run's checkpoint, and the
        optimiser state too when `optimizer` is given and the file has one; returns the file's blob."""
        blob: dict[str, Any] = torch.load(path, map_location=map_location, weights_only=False)
        load_weights(net, blob)
        if optimizer is not None and "opt" in blob:
            optimizer.load_state_dict(blob["opt"])
        return blob

    def note_init(self, text: str) -> None:
        """Where this run's weights started (read back by the exports, into the weights' manifest)."""
        (self.directory / INIT_NOTE).write_text(text + "\n")

    def init_note(self) -> str | None:
        path = self.directory / INIT_NOTE
        return path.read_text().strip() if path.exists() else None

    def log(self, row: dict[str, Any]) -> None:
        """Append one metrics row (flushed: a crash keeps every row logged before it)."""
        with (self.directory / METRICS).open("a") as fh:
            fh.write(json.dumps(row) + "\n")

    def metrics(self) -> list[dict[str, Any]]:
        path = self.directory / METRICS
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines if line.strip()]

    def clear_metrics(self) -> None:
        """A new run (not a resumed one) starts its log afresh."""
        (self.directory / METRICS).unlink(missing_ok=True)

    def plot(self, panels: Sequence[Panel], dpi: int = 90) -> None:
        plot_curves(self.metrics(), self.directory / CURVES, panels, dpi)


def manifest_of(weights: Path) -> dict[str, Any]:
    """The JSON manifest shipped beside weights (`detector.pt` -> `detector.json`)."""
    return json.loads(Path(weights).with_suffix(".json").read_text())


def warmup_cosine(peak: float, step: int, warmup_steps: int, progress: float) -> float:
    """Learning rate: linear warm-up over `warmup_steps`, then cosine from `peak` to 0 as `progress`
    (the larger of steps and wall-clock budget spent, 0..1) goes to 1."""
    return peak * min(1.0, (step + 1) / warmup_steps) * 0.5 * (1 + math.cos(math.pi * progress))
