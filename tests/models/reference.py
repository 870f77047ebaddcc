"""Fixed inputs and what the shipped networks make of them, so a refactor can prove it changed nothing.

`python -m tests.models.reference` (re)writes `reference.json` beside this file from the code as it is:
run it only when the weights or the models' arithmetic change on purpose. The inputs are two rendered
catalog faces (`../shared/tools/cardrender.py`, base1) and two synthetic photos of them (`training.synth`,
benchmark seeds), all deterministic.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from models.geometry import read_face
from training.renders import SHARED, read_manifest, render_catalog
from training.synth import BENCH_SEED_BASE, make_photo

REFERENCE = Path(__file__).with_name("reference.json")
CARDS = 2
SEED = BENCH_SEED_BASE + 424_242


def render_faces(out: Path) -> list[tuple[str, np.ndarray]]:
    """The first base1 faces rendered into `out`: (card id, RGB face)."""
    rendered = read_manifest(render_catalog(SHARED / "catalog", out, ["base1"], limit=CARDS, progress=False))
    return [(cid, read_face(out / info["high"])) for cid, info in sorted(rendered.items())]


def photos(faces: list[tuple[str, np.ndarray]]) -> list[np.ndarray]:
    return [make_photo(face, SEED + i, "standard", cid).image for i, (cid, face) in enumerate(faces)]


def outputs(faces: list[tuple[str, np.ndarray]]) -> dict[str, Any]:
    """What the detector, embedder and reader (default weights, CPU) return for the fixed inputs."""
    from models.detector import CardDetector
    from models.embedder import CardEmbedder
    from models.ocr import PrintReader

    images = [face for _, face in faces]
    quads = CardDetector().locate_batch(photos(faces))
    vectors = CardEmbedder().embed_batch(images)
    reads = PrintReader().read_batch(images, [["BS 001/102", "BS 002/102", "001/102"]] * len(images))
    return {
        "quads": [None if q is None else q.astype(float).tolist() for q in quads],
        "vectors": vectors.astype(float).tolist(),
        "reads": [dataclasses.asdict(r) for r in reads],
    }


def main() -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        REFERENCE.write_text(json.dumps(outputs(render_faces(Path(tmp))), indent=1) + "\n")
    print(f"wrote {REFERENCE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
