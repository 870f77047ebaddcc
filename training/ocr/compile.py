"""Compile the shipped print reader: `python -m training.ocr.compile [--weights PATH]`.

Writes `<weights>.ts` beside the weights (`models/weights/ocr.ts` for the shipped ones) and their ONNX
export `<weights>.onnx` (`training.ocr.export_onnx`). A torch Reader replica serves the TorchScript file
with torch alone instead of building the model through docTR (~300 MB less per replica), as long as it
was compiled from the weights being loaded (a stale file is ignored, never used); an ONNX one serves the
export without torch, and refuses a stale one. Run this after every retraining.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from models.checkpoints import weights_sha256
from models.ocr import WEIGHTS, PrintReader
from models.ocr_net import COMPILED_META, CTCLogProbs
from training.ocr import export_onnx


def compile_reader(weights: Path = WEIGHTS, out: Path | None = None) -> Path:
    """Trace the weights' CRNN (BatchNorm folded) to TorchScript beside them, with what serving needs
    (vocab, normalisation, the weights' SHA-256) inside. Any batch size and crop width traces the same."""
    reader = PrintReader(weights, compiled=None)
    if not reader.is_ctc:
        raise ValueError(f"only CTC (crnn) models compile; {reader.arch} does not")
    out = out or Path(weights).with_suffix(".ts")
    with torch.inference_mode():
        traced = torch.jit.freeze(
            torch.jit.trace(CTCLogProbs(reader.model).eval(), torch.rand(5, 3, 32, 288))
        )
    meta = {
        "source_sha256": weights_sha256(weights),
        "arch": reader.arch,
        "vocab": reader.vocab,
        "mean": list(reader.mean),
        "std": list(reader.std),
    }
    torch.jit.save(traced, str(out), _extra_files={COMPILED_META: json.dumps(meta)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", type=Path, default=WEIGHTS)
    parser.add_argument("--out", type=Path, default=None, help="default: the weights' path with .ts")
    args = parser.parse_args(argv)
    out = compile_reader(args.weights, args.out)
    exported = export_onnx.export(args.weights)
    for path in (out, exported):
        print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
