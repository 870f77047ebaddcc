"""What the scanner fault tests and `benchmarks/faults.py` share: photos of indexed TG cards, the
processes of a deployment, and a scan load to run while something breaks."""

from __future__ import annotations

import asyncio
import io
import threading
from collections import Counter
from pathlib import Path

import httpx
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


# The settings a deployment under `ScanLoad` runs with: four closed-loop clients on one key must never
# meet its rate limit (300 a minute by default), or a 429 hides what a fault test looks for. On a fast CPU
# they scan ~15 photos a second: a minute's budget gone in twenty seconds.
UNDER_LOAD = {"CARDCAT_RATE_LIMIT": "1000000"}


class ScanLoad:
    """Closed-loop scan clients (one event loop in a thread) while a test breaks something: counts each
    outcome (status, or `dropped: <error>` for a connection closed without an answer) and the 503s that
    came without `Retry-After`. Start the deployment with `UNDER_LOAD`."""

    def __init__(self, base_url: str, key: str, bodies: list[bytes], clients: int = 4) -> None:
        self.base_url, self.key, self.bodies, self.clients = base_url, key, bodies, clients
        self.outcomes: Counter[str] = Counter()
        self.missing_retry_after = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._load()))

    async def _load(self) -> None:
        headers = {"Authorization": f"Bearer {self.key}"}
        async with httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=120) as client:

            async def loop(n: int) -> None:
                while not self.stop.is_set():
                    files = {"image": ("p.jpg", self.bodies[n % len(self.bodies)], "image/jpeg")}
                    n += 1
                    try:
                        response = await client.post("/v1/scan", files=files)
                    except httpx.HTTPError as error:
                        self.outcomes[f"dropped: {type(error).__name__}"] += 1
                        continue
                    self.outcomes[str(response.status_code)] += 1
                    if response.status_code == 503 and "retry-after" not in response.headers:
                        self.missing_retry_after += 1

            await asyncio.gather(*(loop(k) for k in range(self.clients)))

    def __enter__(self) -> ScanLoad:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=300)
