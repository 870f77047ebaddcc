"""Compile the shipped print reader to TorchScript: `python -m training.ocr.compile [--weights PATH]`.

Writes `<weights>.ts` beside the weights (`models/weights/ocr.ts` for the shipped ones). The Reader
replica serves that file with torch alone instead of building the model through docTR (~300 MB less per
replica), as long as it was compiled from the weights being loaded; run this after every retraining
(a stale file is ignored, never used).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from models.ocr import WEIGHTS, compile_reader


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", type=Path, default=WEIGHTS)
    parser.add_argument("--out", type=Path, default=None, help="default: the weights' path with .ts")
    args = parser.parse_args(argv)
    out = compile_reader(args.weights, args.out)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
