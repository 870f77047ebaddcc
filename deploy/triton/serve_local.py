"""Serve an exported model repository from a real Triton Inference Server on a machine without Triton.

    bash deploy/triton/setup_env.sh
    .venv-triton/bin/python -m deploy.triton.serve_local --repository DIR [--http-port 8000]

Runs under `.venv-triton/`, not `.venv`. The Triton bundled in NVIDIA's nvidia-pytriton wheel has only the
Python backend, not libtorch, so the exported `1/model.pt` files are loaded here with torch.jit.load and
bound to Triton through pytriton, under the names, dtypes, shapes, batch size and batching window their
`config.pbtxt` declares. Clients see an ordinary Triton (HTTP/gRPC v2 protocol), which is what the
scanner's `TritonSession` and tests/serve_app/test_triton.py need; production Triton loads the same
repository with its libtorch backend instead.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from google.protobuf import text_format
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig
from tritonclient.grpc import model_config_pb2

DTYPES = {"TYPE_UINT8": np.uint8, "TYPE_FP32": np.float32}


def read_config(folder: Path) -> Any:
    return text_format.Parse((folder / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())


def infer_func(model: torch.jit.ScriptModule, config: Any) -> Callable[..., dict[str, np.ndarray]]:
    inputs = [t.name for t in config.input]
    outputs = [t.name for t in config.output]

    @batch
    def infer(**tensors: np.ndarray) -> dict[str, np.ndarray]:
        with torch.inference_mode():
            out = model(*(torch.from_numpy(tensors[name]) for name in inputs))
        outs = out if isinstance(out, tuple | list) else (out,)
        return {name: t.numpy() for name, t in zip(outputs, outs, strict=True)}

    return infer


def bind(triton: Triton, folder: Path) -> None:
    config = read_config(folder)
    version = max(int(p.name) for p in folder.iterdir() if p.name.isdigit())
    model = torch.jit.load(str(folder / str(version) / "model.pt"), map_location="cpu").eval()

    def tensors(specs: Any) -> list[Tensor]:
        dtype = model_config_pb2.DataType.Name
        return [Tensor(name=t.name, dtype=DTYPES[dtype(t.data_type)], shape=tuple(t.dims)) for t in specs]

    delay = config.dynamic_batching.max_queue_delay_microseconds
    triton.bind(
        model_name=config.name or folder.name,
        infer_func=infer_func(model, config),
        inputs=tensors(config.input),
        outputs=tensors(config.output),
        model_version=version,
        config=ModelConfig(
            max_batch_size=config.max_batch_size, batcher=DynamicBatcher(max_queue_delay_microseconds=delay)
        ),
        strict=True,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repository", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--http-port", type=int, default=8000)
    parser.add_argument("--grpc-port", type=int, default=8001)
    parser.add_argument("--metrics-port", type=int, default=8002)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the machine has few cores)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads)
    # Triton's Python-backend stub links against libpython, which pyenv builds keep outside the loader's
    # default path; tritonserver and the stub inherit this environment.
    libdir = sysconfig.get_config_var("LIBDIR")
    os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (libdir, os.environ.get("LD_LIBRARY_PATH")) if p
    )
    config = TritonConfig(
        http_address=args.host,
        http_port=args.http_port,
        grpc_address=args.host,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        allow_gpu_metrics=False,
    )
    # SIGTERM (what the test and process managers send) stops like Ctrl-C: pytriton then stops tritonserver
    # and removes its workspace (~22 MB under ~/.cache/pytriton), which a plain kill leaves behind.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with Triton(config=config) as triton:
        for folder in sorted(p.parent for p in args.repository.glob("*/config.pbtxt")):
            bind(triton, folder)
        print(f"serving {args.repository} on {args.host}:{args.http_port}", file=sys.stderr, flush=True)
        triton.serve()


if __name__ == "__main__":
    main()
