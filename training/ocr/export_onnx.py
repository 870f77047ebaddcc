"""Export the print reader's network to ONNX: `python -m training.ocr.export_onnx [--weights PATH]`.

Writes `<weights>.onnx` beside the weights (`models/weights/ocr.onnx` for the shipped ones): uint8 crops of
any batch and width in, per-step CTC log-probabilities out, with the weights' version (`cardcat_version`)
and the vocabulary and normalisation (`cardcat_model`) in its metadata. A CPU Reader replica serves it in
ONNX Runtime without importing torch or docTR (`CARDCAT_SCAN_READER_RUNTIME`); an export made from other
weights is refused there, so run this after every retraining, as `training.ocr.compile` is. Checked
against torch at two crop widths (the name's and the footer's) before it is written.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from models.ocr import FOOTER, NAME, WEIGHTS, PrintReader
from models.ocr_net import CTCLogProbs, ReaderGraph
from models.sessions import ONNX_MODEL_META
from training.onnx_export import export_command, write_onnx

# ONNX Runtime against torch on random crops, in log-probability: measured ~2e-4 (the LSTM's and the
# convolutions' float rounding), the same best glyph at every step; the compiled TorchScript is held to
# docTR's within 1e-3 as well.
TOLERANCE = 1e-3
INPUT, OUTPUT = "crops", "log_probs"


def export(weights: Path = WEIGHTS, out: Path | None = None) -> Path:
    """Trace the weights' CRNN (docTR's, BatchNorm folded) with the normalisation in front to ONNX with a
    dynamic batch and width, check it against torch, and write it with its metadata."""
    reader = PrintReader(weights, compiled=None)
    if not reader.is_ctc:
        raise ValueError(f"only CTC (crnn) models export; {reader.arch} does not")
    graph = ReaderGraph(CTCLogProbs(reader.model).eval(), reader.mean, reader.std).eval()
    rng = np.random.default_rng(0)
    crops = {region.name: rng.integers(0, 256, (3, *region.size, 3), np.uint8) for region in (NAME, FOOTER)}
    with torch.inference_mode():
        expected = {name: graph(torch.from_numpy(x)).numpy() for name, x in crops.items()}
    meta = {
        ONNX_MODEL_META: json.dumps(
            {"arch": reader.arch, "vocab": reader.vocab, "mean": list(reader.mean), "std": list(reader.std)}
        )
    }
    dynamic = ({0: "batch", 2: "width"}, {0: "batch", 1: "steps"})
    checks = [(crops[name], expected[name]) for name in ("name", "footer")]  # traced at the name's width
    return write_onnx(graph, checks, (INPUT, OUTPUT), weights, meta, out, TOLERANCE, dynamic)


def main(argv: list[str] | None = None) -> int:
    return export_command(argv, __doc__, export, WEIGHTS)


if __name__ == "__main__":
    raise SystemExit(main())
