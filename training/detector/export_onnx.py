"""Export the detector's network to ONNX: `python -m training.detector.export_onnx [--weights PATH]`.

Writes `<weights>.onnx` beside the weights (`models/weights/detector.onnx` for the shipped ones) with the
weights' version (`cardcat_version`) and their inference knobs (`cardcat_model`: the `DetectorConfig`) in
its metadata, so a CPU Detector replica serves it in ONNX Runtime without importing torch or reading the
weights file's tensors (`CARDCAT_SCAN_DETECTOR_RUNTIME`). An export made from other weights is refused
there, so `training.detector.export` runs this after writing new weights. Checked against torch first.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch

from models.checkpoints import load_weights, read_weights
from models.detector import INPUT, OUTPUT, WEIGHTS, DetectorConfig
from models.detector_net import DetectorGraph, build_net
from models.sessions import ONNX_MODEL_META, fold_batchnorm
from training.onnx_export import export_command, write_onnx

# ONNX Runtime against torch on random views: probabilities agree to float rounding (measured ~1e-7).
TOLERANCE = 1e-5


def export(weights: Path = WEIGHTS, out: Path | None = None) -> Path:
    """Trace the weights' network (BatchNorm folded, as served) on views of its input size to ONNX with a
    dynamic batch, check it against torch, and write it with its metadata."""
    blob = read_weights(weights)
    cfg = DetectorConfig.from_dict(blob["config"])
    graph = DetectorGraph(fold_batchnorm(load_weights(build_net(cfg), blob).eval())).eval()
    size = cfg.input_size
    views = np.random.default_rng(0).integers(0, 256, (3, size, size, 3), np.uint8)
    with torch.inference_mode():
        expected = graph(torch.from_numpy(views)).numpy()
    meta = {ONNX_MODEL_META: json.dumps(dataclasses.asdict(cfg))}
    return write_onnx(graph, [(views, expected)], (INPUT, OUTPUT), weights, meta, out, TOLERANCE)


def main(argv: list[str] | None = None) -> int:
    return export_command(argv, __doc__, export, WEIGHTS)


if __name__ == "__main__":
    raise SystemExit(main())
