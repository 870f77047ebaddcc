"""Checkpoint files as the models and the training scripts read and write them."""

from __future__ import annotations

from typing import Any

import torch


def state_dict_of(blob: Any) -> dict[str, torch.Tensor]:
    """A bare state dict, or one wrapped under a usual key (ours: `state_dict`)."""
    for key in ("state_dict", "model", "model_state_dict"):
        if isinstance(blob, dict) and isinstance(blob.get(key), dict):
            return blob[key]
    if not isinstance(blob, dict):
        raise ValueError("checkpoint is not a state dict")
    return blob
