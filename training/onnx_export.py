"""Write a served graph as ONNX, checked against torch before it is written.

The detector's, the embedder's and the reader's exports (`training.<model>.export_onnx`) differ only in
the graph they trace and what they record; this is the rest. A CPU replica runs the file
in ONNX Runtime without importing torch (`models.sessions.OnnxSession`), and refuses one whose
`cardcat_version` is not its weights' (`models.sessions.check_version`), so the version goes in here.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import torch
from torch import nn

from models.checkpoints import weights_version
from models.sessions import onnx_path


def write_onnx(
    graph: nn.Module,
    checks: list[tuple[np.ndarray, np.ndarray]],
    names: tuple[str, str],
    weights: Path,
    meta: dict[str, str],
    out: Path | None,
    tolerance: float,
    dynamic: tuple[dict[int, str], dict[int, str]] = ({0: "batch"}, {0: "batch"}),
) -> Path:
    """Trace `graph` (one input, one output, `names`) on the first of `checks` (input, torch's output)
    with `dynamic` axes (input's, output's: the batch unless told otherwise), record the weights' version
    and `meta` in the file's metadata, and write it to `out` (None: beside the weights, `onnx_path`) only
    when ONNX Runtime's answer to every check's input is within `tolerance` of its output. Returns the
    path written."""
    source, target = names
    out = Path(out) if out is not None else onnx_path(weights)
    tmp = out.with_suffix(".onnx.tmp")
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch nudges towards its dynamo exporter, which needs onnxscript
        torch.onnx.export(
            graph.eval(),
            (torch.from_numpy(checks[0][0]),),
            str(tmp),
            input_names=[source],
            output_names=[target],
            dynamic_axes={source: dynamic[0], target: dynamic[1]},
            opset_version=17,
            dynamo=False,
        )
    model = onnx.load(str(tmp))
    for key, value in {"cardcat_version": weights_version(weights), **meta}.items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, str(tmp))
    session = onnxruntime.InferenceSession(str(tmp), providers=["CPUExecutionProvider"])
    error = max(float(np.abs(session.run([target], {source: x})[0] - y).max()) for x, y in checks)
    if error > tolerance:
        tmp.unlink()
        raise ValueError(f"the ONNX export differs from torch by {error:.2e} (> {tolerance})")
    tmp.replace(out)
    return out


def export_command(
    argv: list[str] | None, doc: str | None, export: Callable[[Path, Path | None], Path], weights: Path
) -> int:
    """The command line every `training.<model>.export_onnx` runs: `[--weights PATH] [--out PATH]`."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--weights", type=Path, default=weights)
    parser.add_argument("--out", type=Path, default=None, help="default: the weights' path with .onnx")
    args = parser.parse_args(argv)
    out = export(args.weights, args.out)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0
