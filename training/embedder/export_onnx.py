"""Export the embedder's network to ONNX: `python -m training.embedder.export_onnx [--weights PATH]`.

Writes `<weights>.onnx` beside the weights (`models/weights/embedder.onnx` for the shipped ones) with the
weights' version (`cardcat_version`) and the network's input size and width (`cardcat_model`) in its
metadata. A CPU Embedder replica serves it in ONNX Runtime without importing torch
(`CARDCAT_SCAN_EMBEDDER_RUNTIME`); an export made from other weights is refused there, so training's
export runs this after every retraining. The export is checked against torch before it is written.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from models.checkpoints import load_weights, read_weights
from models.embedder import INPUT, INPUT_H, INPUT_W, OUTPUT, WEIGHTS
from models.embedder_net import EmbedderGraph, build_net
from models.sessions import ONNX_MODEL_META, fold_batchnorm
from training.onnx_export import export_command, write_onnx

# ONNX Runtime against torch on random faces: unit vectors agree to float rounding (measured ~1e-7).
TOLERANCE = 1e-5


def export(weights: Path = WEIGHTS, out: Path | None = None) -> Path:
    """Trace the weights' network (BatchNorm folded, grid pooling exportable) to ONNX with a dynamic batch,
    check it against torch, and write it with its metadata."""
    blob = read_weights(weights)
    model_cfg = dict(blob["model"])
    width, height = model_cfg.get("input_size", (INPUT_W, INPUT_H))
    net = load_weights(build_net(model_cfg), blob).eval()
    fold_batchnorm(net)  # in place
    graph = EmbedderGraph(net).eval()
    faces = np.random.default_rng(0).integers(0, 256, (4, int(height), int(width), 3), np.uint8)
    with torch.inference_mode():
        expected = graph(torch.from_numpy(faces)).numpy()  # torch's own forward, adaptive pooling
    meta = {
        ONNX_MODEL_META: json.dumps(
            {"input_size": [int(width), int(height)], "dim": int(model_cfg.get("dim", 128))}
        )
    }
    net.export_pooling = True  # the exporter refuses the adaptive pool; the same values as a plain one
    return write_onnx(graph, [(faces, expected)], (INPUT, OUTPUT), weights, meta, out, TOLERANCE)


def main(argv: list[str] | None = None) -> int:
    return export_command(argv, __doc__, export, WEIGHTS)


if __name__ == "__main__":
    raise SystemExit(main())
