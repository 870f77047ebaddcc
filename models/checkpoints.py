"""Checkpoint files as the models and the training scripts read and write them, with one set of rules.

Shipped weights (`models/weights/*.pt`) hold fp16 floating tensors under `state_dict` next to what
their model needs to be rebuilt (`config`, `model`, or `arch`/`vocab`); a run's `last.pt` holds fp32
tensors and the optimiser state. Loading always casts floating tensors to fp32 and leaves integer ones
(BatchNorm's `num_batches_tracked`) as they are, so a network loads the same from either file.
torch is imported where a file is read or written, not here: a replica that runs its network in ONNX
Runtime checks its weights' version (`weights_version`) without loading torch.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import torch
    from torch import nn

ModuleT = TypeVar("ModuleT", bound="nn.Module")


def weights_sha256(path: Path) -> str:
    """The weights file's SHA-256: what a compiled reader (`ocr.ts`) records it was compiled from."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def weights_version(path: Path) -> str:
    """The short version of a weights file (12 hex digits of its SHA-256): what an index records and a
    Triton export carries, so neither is used with other weights."""
    return weights_sha256(path)[:12]


def state_dict_of(blob: Any) -> dict[str, torch.Tensor]:
    """A bare state dict, or one wrapped under a usual key (shipped weights: `state_dict`; a run's
    checkpoint: `net`, or `model` for the reader's)."""
    for key in ("state_dict", "model", "model_state_dict", "net"):
        if isinstance(blob, dict) and isinstance(blob.get(key), dict):
            return blob[key]
    if not isinstance(blob, dict):
        raise ValueError("checkpoint is not a state dict")
    return blob


def read_weights(path: Path) -> dict[str, Any]:
    """A weights file's blob on the CPU: tensors and plain data only (`weights_only`: no code runs)."""
    import torch

    return torch.load(Path(path), map_location="cpu", weights_only=True)


def as_float32(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Floating tensors as fp32 (shipped weights are fp16), the others as they are."""
    return {k: v.float() if v.is_floating_point() else v for k, v in state.items()}


def load_weights(module: ModuleT, blob: Any) -> ModuleT:
    """Load a checkpoint blob (or a bare state dict) into `module` in fp32; returns the module."""
    module.load_state_dict(as_float32(state_dict_of(blob)))
    return module


def fp16_state(module: nn.Module) -> dict[str, torch.Tensor]:
    """The module's state dict as shipped: floating tensors fp16, on the CPU (half the bytes)."""
    return {k: (v.half() if v.is_floating_point() else v).cpu() for k, v in module.state_dict().items()}


def atomic_save(obj: Any, path: Path) -> None:
    """torch.save through a temporary file beside `path`: a reader or a crash never sees half a file."""
    import torch

    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(obj, tmp)
    tmp.replace(path)
