"""Where a network runs: in this process (PyTorch or ONNX Runtime) or on a Triton Inference Server, behind
one protocol.

The detector and the embedder are pure tensor-in, tensor-out graphs (`DetectorGraph`, `EmbedderGraph`):
everything before and after them (letterboxing, quad fitting, resizing, the index) stays in Python and is
the same whichever backend runs the graph. `open_session` picks the backend from a `Backend`, the way
immich's `sessions/<backend>.py` hides ONNX Runtime, ARM NN and RKNN behind one `ModelSession`.
`deploy/triton/export.py` writes these graphs as a Triton model repository under the same tensor names.
The OCR model (docTR) is not a single graph (its decoding is Python) and always runs in-process.
This module imports torch only where a torch session is built, so a replica whose network runs in ONNX
Runtime (`OnnxSession`) never loads it (~690 MB of RSS for this CUDA build of torch against ~60).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    import torch
    from torch import nn

# What an ONNX export records of its network beside its weights' version (`cardcat_version`): a JSON
# object of what the serving code needs to know without the weights file (input size, inference knobs).
ONNX_MODEL_META = "cardcat_model"


def onnx_path(weights: Path) -> Path:
    """Where the ONNX export of a weights file lives: beside it (`detector.pt` -> `detector.onnx`)."""
    return Path(weights).with_suffix(".onnx")


def open_export(weights: Path, exporter: str, threads: int = 1) -> tuple[OnnxSession, dict[str, Any]]:
    """The ONNX export beside `weights` in ONNX Runtime, and what it records of its network
    (`ONNX_MODEL_META`); refused when absent or made from other weights (the caller's config, and for the
    embedder its index, assume the weights'). `exporter`: the module that writes it, named in the error."""
    from models.checkpoints import weights_version

    path = onnx_path(weights)
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found: export it with `python -m {exporter} --weights {weights}`"
        )
    session = OnnxSession(path, threads=threads)
    check_version(session, weights_version(weights))
    return session, json.loads(session.parameters.get(ONNX_MODEL_META, "{}"))


class Session(Protocol):
    """A compiled network: named numpy tensors in, named numpy tensors out (batch first)."""

    input_names: tuple[str, ...]
    output_names: tuple[str, ...]

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


@dataclass(frozen=True)
class Backend:
    """Which runtime serves a model. `torch` is the in-process torch path; `onnx` runs the model's ONNX
    export in-process in ONNX Runtime on the CPU with `threads` threads (the detector and the embedder; no
    torch in the process); `triton` sends the same tensors to `triton_url` (host:port of Triton's HTTP
    endpoint), model `triton_model` (default: the model's own name in the exported repository), version
    `triton_version` ("" lets the server's policy choose).

    `precision` is the in-process arithmetic: "fp32", "bf16" (autocast), or "auto": bf16 on a CPU that
    computes it natively (AVX512-BF16 or AMX: half the detector network's time, probabilities within
    ~1e-3), fp32 elsewhere, where bf16 would be emulated and slower. GPUs stay fp32 until measured there.
    The scanner uses fp32 unless told otherwise (serve_app.config: bf16 flipped reprint near-ties)."""

    kind: str = "torch"
    triton_url: str = "127.0.0.1:8000"
    triton_model: str = ""
    triton_version: str = ""
    timeout_s: float = 60.0
    precision: str = "fp32"
    threads: int = 1

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Backend:
        known = {k: v for k, v in (data or {}).items() if k in cls.__dataclass_fields__}
        return cls(**known)


def fold_batchnorm(module: nn.Module) -> nn.Module:
    """Fold every BatchNorm2d that directly follows a Conv2d (inside a Sequential) into the conv, in place.

    Inference only (eval mode): a frozen BatchNorm is an affine map, so the folded conv computes the same
    values (to float rounding, ~1e-5) without a second pass over every activation. Measured on one CPU
    thread: the OCR model's 10 crops 28 -> 17 ms, a detector view 6.9 -> 6.1 ms."""
    from torch import nn
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    for child in module.children():
        if isinstance(child, nn.Sequential):
            for i in range(len(child) - 1):
                conv, norm = child[i], child[i + 1]
                if isinstance(conv, nn.Conv2d) and isinstance(norm, nn.BatchNorm2d):
                    child[i], child[i + 1] = fuse_conv_bn_eval(conv, norm), nn.Identity()
        fold_batchnorm(child)
    return module


def native_bf16(device: torch.device) -> bool:
    """Whether bf16 is worth it here: a CPU with bf16 instructions (oneDNN says), not an emulation."""
    import torch

    return device.type == "cpu" and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype a `Backend.precision` means on `device` (None: plain fp32)."""
    import torch

    match precision:
        case "fp32":
            return None
        case "bf16":
            return torch.bfloat16
        case "auto":
            return torch.bfloat16 if native_bf16(device) else None
        case other:
            raise ValueError(f"unknown precision {other!r} (expected 'fp32', 'bf16' or 'auto')")


class TorchSession:
    """Runs an nn.Module in this process: positional inputs in `input_names` order, outputs as returned
    (as fp32 whatever the arithmetic was)."""

    def __init__(
        self,
        module: nn.Module,
        input_names: tuple[str, ...],
        output_names: tuple[str, ...],
        device: Any,
        precision: str = "fp32",
    ) -> None:
        import torch

        self.module, self.device = module, torch.device(device)
        self.input_names, self.output_names = input_names, output_names
        self.autocast = autocast_dtype(precision, self.device)

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import torch

        return self.run_tensors({name: torch.from_numpy(inputs[name]) for name in self.input_names})

    def run_tensors(self, inputs: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
        """`run` for tensors, e.g. views already cut on the session's device: no NumPy round trip."""
        import torch

        dtype = self.autocast
        with (
            torch.inference_mode(),
            torch.autocast(self.device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None),
        ):
            out = self.module(*(inputs[name].to(self.device) for name in self.input_names))
            outs = out if isinstance(out, tuple | list) else (out,)
            return {name: t.float().cpu().numpy() for name, t in zip(self.output_names, outs, strict=True)}


class OnnxSession:
    """An ONNX export run by ONNX Runtime on the CPU, in this process. The file's metadata (key -> string)
    is `parameters`, as a Triton model's config parameters are, so `check_version` refuses an export made
    from other weights the same way."""

    def __init__(self, path: Path, threads: int = 1) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1  # one graph at a time; replicas already run side by side
        self.path = Path(path)
        self.model = self.path.name
        self.session = onnxruntime.InferenceSession(
            str(self.path), options, providers=["CPUExecutionProvider"]
        )
        self.input_names = tuple(t.name for t in self.session.get_inputs())
        self.output_names = tuple(t.name for t in self.session.get_outputs())
        self.parameters: dict[str, str] = dict(self.session.get_modelmeta().custom_metadata_map)

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        feeds = {name: np.ascontiguousarray(inputs[name]) for name in self.input_names}
        return dict(zip(self.output_names, self.session.run(list(self.output_names), feeds), strict=True))


class TritonSession:
    """The same tensors over Triton's HTTP/REST protocol (binary tensor data, not JSON lists).

    Names come from the server's model metadata, so a mismatch with the exported repository fails at
    start-up rather than on the first photo. tritonclient's HTTP client is not safe to share between
    threads (Ray runs inference in a thread pool), so each thread gets its own.
    """

    def __init__(self, url: str, model: str, version: str = "", timeout_s: float = 60.0) -> None:
        self.url, self.model, self.version, self.timeout_s = url, model, version, timeout_s
        self._local = threading.local()
        meta = self._client().get_model_metadata(model, version)
        self.input_names = tuple(t["name"] for t in meta["inputs"])
        self.output_names = tuple(t["name"] for t in meta["outputs"])
        config = self._client().get_model_config(model, version)
        self.parameters: dict[str, str] = {
            key: value.get("string_value", "") for key, value in config.get("parameters", {}).items()
        }
        # Triton refuses a request larger than the model's batch limit; the detector can ask for more
        # views at once (every coarse candidate of a batch of photos, or four windows a photo with no card
        # found), so `run` sends them in requests of at most this many (0: the model does not batch).
        self.max_batch_size = int(config.get("max_batch_size", 0))

    def _client(self) -> Any:
        client = getattr(self._local, "client", None)
        if client is None:
            import tritonclient.http as httpclient

            client = httpclient.InferenceServerClient(
                self.url, connection_timeout=self.timeout_s, network_timeout=self.timeout_s
            )
            self._local.client = client
        return client

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        size = len(next(iter(inputs.values())))
        limit = self.max_batch_size
        if limit <= 0 or size <= limit:
            return self._infer(inputs)
        parts = [
            self._infer({name: array[start : start + limit] for name, array in inputs.items()})
            for start in range(0, size, limit)
        ]
        return {name: np.concatenate([part[name] for part in parts]) for name in self.output_names}

    def _infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One request to Triton."""
        import tritonclient.http as httpclient
        from tritonclient.utils import np_to_triton_dtype

        request = []
        for name in self.input_names:
            array = np.ascontiguousarray(inputs[name])
            tensor = httpclient.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
            tensor.set_data_from_numpy(array, binary_data=True)
            request.append(tensor)
        wanted = [httpclient.InferRequestedOutput(name, binary_data=True) for name in self.output_names]
        result = self._client().infer(self.model, request, model_version=self.version, outputs=wanted)
        return {name: result.as_numpy(name) for name in self.output_names}


def open_session(backend: Backend, name: str, torch_session: Callable[[], TorchSession]) -> Session:
    """The one place that picks a backend; `name` is the model's name in the exported repository."""
    match backend.kind:
        case "torch":
            return torch_session()
        case "triton":
            model = backend.triton_model or name
            return TritonSession(backend.triton_url, model, backend.triton_version, backend.timeout_s)
        case other:
            raise ValueError(f"unknown inference backend {other!r} (expected 'torch' or 'triton')")


def open_graph(
    backend: Backend, name: str, graph: nn.Module, tensors: tuple[str, str], device: Any, version: str
) -> Session:
    """A one-input, one-output graph (`tensors`: its input and output names) on `backend`, refusing a
    Triton model exported from other weights than `version`."""
    session = open_session(
        backend, name, lambda: TorchSession(graph, tensors[:1], tensors[1:], device, backend.precision)
    )
    check_version(session, version)
    return session


def check_version(session: Session, version: str) -> None:
    """Refuse a Triton model or an ONNX file exported from other weights than the local file (whose config
    and, for the embedder, whose index assume them). Repositories that do not record it (pytriton's) are
    trusted; an ONNX file that does not must be re-exported."""
    served = getattr(session, "parameters", {}).get("cardcat_version")
    if isinstance(session, OnnxSession) and not served:
        raise ValueError(f"{session.path} records no cardcat_version: export it again")
    if served and served != version:
        kind = "ONNX file" if isinstance(session, OnnxSession) else "Triton model"
        model = getattr(session, "model", "?")
        raise ValueError(f"{kind} {model!r} was exported from weights {served}, the local ones are {version}")
