"""What the scanner fault tests share: photos of indexed TG cards, and the processes of a deployment."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image


def tg_photos(seed: int, count: int = 4) -> list[bytes]:
    """JPEG phone photos (training.synth, standard) of swsh10tg-TG01.. (rendered by launch_scanner)."""
    from training.renders import DEFAULT_CACHE
    from training.synth import make_photo

    out = []
    for n in range(1, count + 1):
        face = np.asarray(
            Image.open(DEFAULT_CACHE / "catalog" / f"swsh10tg-TG{n:02d}" / "high.jpg").convert("RGB")
        )
        buffer = io.BytesIO()
        Image.fromarray(make_photo(face, seed + n, "standard").image).save(buffer, format="JPEG", quality=90)
        out.append(buffer.getvalue())
    return out


def replica_pids(deployment: str) -> list[int]:
    """The pids of the scanner app's `deployment` replicas on this machine."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if f"ServeReplica:scanner:{deployment}".encode() in cmdline:
                found.append(int(entry.name))
    return found
