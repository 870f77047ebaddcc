"""Write the detector and the embedder as a Triton model repository, for teams that serve models from Triton.

    python -m deploy.triton.export --out DIR [--max-batch-size 32]
                                   [--detector-weights W] [--embedder-weights W]

gives, for each model, `DIR/<model>/config.pbtxt` and `DIR/<model>/1/model.pt`: the same graph the
in-process `TorchSession` runs (`DetectorGraph`, `EmbedderGraph`: uint8 NHWC images in, float32 out),
traced to TorchScript for Triton's PyTorch (libtorch) backend, with a dynamic batch dimension and dynamic
batching. Each config records the weights' hash as parameter `cardcat_version`; a `TritonSession` for
other weights refuses to start. Only the tensor graph is exported: photo decoding, quad fitting and the
FAISS search stay in the scanner, which reaches this repository through `backend: triton`.
"""

from __future__ import annotations

import argparse
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

TRITON_TYPES = {np.dtype(np.uint8): "TYPE_UINT8", np.dtype(np.float32): "TYPE_FP32"}


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: np.dtype
    dims: tuple[int, ...]  # without the batch dimension

    def pbtxt(self) -> str:
        dims = ", ".join(str(d) for d in self.dims)
        fields = f'name: "{self.name}"', f"data_type: {TRITON_TYPES[self.dtype]}", f"dims: [ {dims} ]"
        return "  {\n" + "".join(f"    {line}\n" for line in fields) + "  }"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    graph: nn.Module
    input: TensorSpec
    output: TensorSpec
    version: str

    def config(self, max_batch_size: int, queue_delay_us: int) -> str:
        return "\n".join(
            [
                f'name: "{self.name}"',
                'platform: "pytorch_libtorch"',
                f"max_batch_size: {max_batch_size}",
                f"input [\n{self.input.pbtxt()}\n]",
                f"output [\n{self.output.pbtxt()}\n]",
                f"dynamic_batching {{\n  max_queue_delay_microseconds: {queue_delay_us}\n}}",
                _parameter("cardcat_version", self.version),
                _parameter("INFERENCE_MODE", "true"),
                "",
            ]
        )


def _parameter(key: str, value: str) -> str:
    return f'parameters: {{\n  key: "{key}"\n  value: {{ string_value: "{value}" }}\n}}'


def model_specs(
    detector_weights: Path | None = None, embedder_weights: Path | None = None
) -> list[ModelSpec]:
    """The two exportable graphs, on the CPU, with their tensor names and shapes as served."""
    from models import detector, embedder

    det = detector.CardDetector(detector_weights)
    size = det.cfg.input_size
    emb = embedder.CardEmbedder(embedder_weights)
    width, height = emb.input_size
    return [
        ModelSpec(
            "detector",
            det.graph,
            TensorSpec(detector.INPUT, np.dtype(np.uint8), (size, size, 3)),
            TensorSpec(detector.OUTPUT, np.dtype(np.float32), (3, size, size)),
            det.version,
        ),
        ModelSpec(
            "embedder",
            emb.graph,
            TensorSpec(embedder.INPUT, np.dtype(np.uint8), (height, width, 3)),
            TensorSpec(embedder.OUTPUT, np.dtype(np.float32), (emb.dim,)),
            emb.version,
        ),
    ]


def trace(spec: ModelSpec) -> torch.jit.ScriptModule:
    """TorchScript by tracing (both graphs are static); checked at other batch sizes than the traced one,
    so a graph that baked in its batch size fails here rather than in Triton."""
    rng = np.random.default_rng(0)

    def example(batch: int) -> torch.Tensor:
        return torch.from_numpy(rng.integers(0, 256, (batch, *spec.input.dims), dtype=np.uint8))

    # TorchScript is deprecated in PyTorch, but it is what Triton's libtorch backend loads.
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(spec.graph.eval(), example(2))
        for batch in (1, 3):
            x = example(batch)
            torch.testing.assert_close(traced(x), spec.graph(x))
    return traced


def export(
    out: Path, max_batch_size: int = 32, queue_delay_us: int = 5000, **weights: Path | None
) -> list[Path]:
    """Write the repository; returns the model directories. Existing model files are replaced."""
    written = []
    for spec in model_specs(weights.get("detector_weights"), weights.get("embedder_weights")):
        folder = out / spec.name
        (folder / "1").mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trace(spec).save(str(folder / "1" / "model.pt"))
        (folder / "config.pbtxt").write_text(spec.config(max_batch_size, queue_delay_us))
        written.append(folder)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="model repository to write")
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--queue-delay-us", type=int, default=5000, help="dynamic batching window")
    parser.add_argument("--detector-weights", type=Path, default=None)
    parser.add_argument("--embedder-weights", type=Path, default=None)
    args = parser.parse_args(argv)
    for folder in export(
        args.out,
        args.max_batch_size,
        args.queue_delay_us,
        detector_weights=args.detector_weights,
        embedder_weights=args.embedder_weights,
    ):
        print(folder)


if __name__ == "__main__":
    main()
