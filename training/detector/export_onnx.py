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
from models.page_detector import PAGE_WEIGHTS
from models.sessions import ONNX_MODEL_META, fold_batchnorm
from training.onnx_export import export_command, write_onnx

# ONNX Runtime against torch on random views: probabilities agree to float rounding (measured ~1e-7).
TOLERANCE = 1e-5


def export(weights: Path = WEIGHTS, out: Path | None = None) -> Path:
    """Trace the weights' network (BatchNorm folded, as served) on views of its input size to ONNX with a
    dynamic batch, check it against torch, and write it with its metadata. The page detector's export
    (`models/weights/page_detector.pt`) takes views of any size that divides by 32 too: it sees the whole
    photo at `page_input` px and each card at `input_size`; checked at both."""
    blob = read_weights(weights)
    cfg = DetectorConfig.from_dict(blob["config"])
    graph = DetectorGraph(fold_batchnorm(load_weights(build_net(cfg), blob).eval())).eval()
    any_size = weights.name == PAGE_WEIGHTS.name
    sizes = (cfg.input_size, cfg.page_input) if any_size else (cfg.input_size,)
    checks = []
    for size in sizes:
        views = np.random.default_rng(size).integers(0, 256, (2, size, size, 3), np.uint8)
        with torch.inference_mode():
            checks.append((views, graph(torch.from_numpy(views)).numpy()))
    meta = {ONNX_MODEL_META: json.dumps(dataclasses.asdict(cfg))}
    axes = ({0: "batch", 1: "height", 2: "width"}, {0: "batch", 2: "height", 3: "width"})
    dynamic = axes if any_size else ({0: "batch"}, {0: "batch"})
    return write_onnx(graph, checks, (INPUT, OUTPUT), weights, meta, out, TOLERANCE, dynamic)


def main(argv: list[str] | None = None) -> int:
    return export_command(argv, __doc__, export, WEIGHTS)


if __name__ == "__main__":
    raise SystemExit(main())
