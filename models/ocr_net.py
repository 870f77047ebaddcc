"""The print reader's network: docTR's recognition models, built offline, the CRNN's log-probabilities, and
the graph its ONNX export runs; loading the compiled (TorchScript) form.

Defined here, once, and imported by training and by the torch paths of `models.ocr.PrintReader`, so the
two cannot drift. It imports nothing of `models.ocr` (training builds the compiled and exported forms:
`training.ocr.compile`, `training.ocr.export_onnx`), and `models.ocr` imports it only on its torch path,
so a replica whose network runs in ONNX Runtime never imports torch.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from models.checkpoints import weights_sha256

# A docTR recognition model (CRNN, PARSeq...): an nn.Module whose parts docTR leaves untyped.
Recognizer = Any
# Where a compiled reader (TorchScript, `training.ocr.compile`) keeps what serving needs beside the graph.
COMPILED_META = "cardcat.json"


def default_vocab() -> str:
    from doctr.datasets import VOCABS

    return str(VOCABS["french"])


def build_model(arch: str, vocab: str, **kwargs: Any) -> Recognizer:
    """A docTR recognition model, never downloading anything (weights come from our own files).

    docTR is imported here, not at the top: a replica serving the compiled network never loads it."""
    from doctr.models import recognition

    factory = getattr(recognition, arch, None)
    if factory is None or arch not in recognition.zoo.ARCHS:
        raise ValueError(f"unknown docTR recognition arch {arch!r}; one of {recognition.zoo.ARCHS}")
    return factory(pretrained=False, pretrained_backbone=False, vocab=vocab, **kwargs)


def crnn_features(model: Recognizer, x: torch.Tensor) -> torch.Tensor:
    """The CRNN backbone's feature sequence (B, T, C*H), as docTR's forward builds it."""
    features = model.feat_extractor(x)
    b, c, h, w = features.shape
    return features.reshape(b, c * h, w).transpose(1, 2)


def crnn_logits(model: Recognizer, x: torch.Tensor, seq: torch.Tensor | None = None) -> torch.Tensor:
    """CRNN logits (B, T, vocab+1; blank last), bypassing docTR's forward, which wants labels in training.

    The LSTM's zero state is made from the sequence itself: left to the LSTM, a trace records it as a
    tensor on the tracing device, and the compiled reader then fails on any other (a GPU replica)."""
    seq = crnn_features(model, x) if seq is None else seq
    lstm = model.decoder
    layers = lstm.num_layers * (2 if lstm.bidirectional else 1)
    zeros = seq.new_zeros(layers, seq.shape[0], lstm.hidden_size)
    out, _ = lstm(seq, (zeros, zeros))
    return model.linear(out)


def to_tensor(crops: Sequence[np.ndarray], mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """uint8 RGB crops (same size) -> a normalised float batch, as docTR's models expect."""
    x = torch.from_numpy(np.stack(crops)).permute(0, 3, 1, 2).float().div_(255.0)
    return (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)


class CTCLogProbs(torch.nn.Module):
    """A CRNN's per-step log-probabilities (N, T, vocab+1): what the reader needs of it, and what
    `compile_reader` freezes into TorchScript."""

    def __init__(self, model: Recognizer) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return crnn_logits(self.model, x).float().log_softmax(-1)


class ReaderGraph(torch.nn.Module):
    """What the ONNX export runs: uint8 NHWC crops (one size) -> per-step log-probabilities (N, T, C).
    Normalising inside the graph, as `to_tensor` does outside it, lets the caller send bytes and keeps
    torch out of the replica."""

    def __init__(self, log_probs: torch.nn.Module, mean: Sequence[float], std: Sequence[float]) -> None:
        super().__init__()
        self.log_probs = log_probs
        self.mean = torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1)

    def forward(self, crops: torch.Tensor) -> torch.Tensor:
        x = crops.permute(0, 3, 1, 2).float() / 255.0
        return self.log_probs((x - self.mean) / self.std)


def load_compiled(path: Path, weights: Path, device: str) -> tuple[Any, dict[str, Any]] | None:
    """The compiled network and its meta, if `path` holds one compiled from exactly `weights`."""
    if not path.exists():
        return None
    files = {COMPILED_META: ""}
    with warnings.catch_warnings():  # torch 2.14 nudges towards torch.export; TorchScript still loads
        warnings.simplefilter("ignore", FutureWarning)
        module = torch.jit.load(str(path), map_location=device, _extra_files=files)
    meta = json.loads(files[COMPILED_META] or "{}")
    if meta.get("source_sha256") != weights_sha256(weights):
        return None  # stale: compiled from other weights
    return module, meta
