"""Which torch device a setting names: the scanner and every training script read `auto` the same way."""

from __future__ import annotations


def resolve_device(device: str) -> str:
    """`auto` is CUDA when torch sees a GPU, else CPU; any other value (`cpu`, `cuda:1`) is kept as is."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
