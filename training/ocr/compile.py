"""Compile the shipped print reader: `python -m training.ocr.compile [--weights PATH]`.

Writes `<weights>.ts` beside the weights (`models/weights/ocr.ts` for the shipped ones) and their ONNX
export `<weights>.onnx` (`training.ocr.export_onnx`). A torch Reader replica serves the TorchScript file
with torch alone instead of building the model through docTR (~300 MB less per replica), as long as it
was compiled from the weights being loaded (a stale file is ignored, never used); an ONNX one serves the
export without torch, and refuses a stale one. Run this after every retraining.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from models.ocr import WEIGHTS
from models.ocr_net import compile_reader
from training.ocr import export_onnx


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
