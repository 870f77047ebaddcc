"""Card faces for tests that run the models on real renders."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def base1_faces(count: int, tmp_dir: Path) -> list[Any]:
    """The first `count` base1 card faces (held out of every model's training), RGB uint8: from the render
    cache when it has them, else rendered into `tmp_dir` from ../shared (the caller skips without it)."""
    from models.geometry import read_face
    from training.renders import DEFAULT_CACHE, SHARED, read_manifest, render_catalog

    cache = DEFAULT_CACHE / "catalog"
    manifest = read_manifest(cache / "manifest.jsonl") if (cache / "manifest.jsonl").exists() else {}
    paths = [cache / info["high"] for cid, info in sorted(manifest.items()) if cid.startswith("base1-")][
        :count
    ]
    if len([p for p in paths if p.exists()]) < count:
        rendered = read_manifest(
            render_catalog(SHARED / "catalog", tmp_dir, ["base1"], limit=count, progress=False)
        )
        paths = [tmp_dir / info["high"] for info in rendered.values()]
    return [read_face(Path(p)) for p in paths]
