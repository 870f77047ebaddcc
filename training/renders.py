"""Card faces from `../shared/tools/cardrender.py`, cached on disk and resumable.

The renderer is the image CDN stand-in. It cannot draw a card without an English name (it crashes), so
every record goes through the service's own normalisation first (`catalog_api.ingest.feed.card_name`): such a
card is drawn with the name the API serves. Cards already rendered in the cache are skipped, so an
interrupted render picks up where it stopped and the full catalog (~20 min on 2 cores) is paid once.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import sys
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from tqdm import tqdm

from catalog_api.ingest.feed import card_name, feed_path, read_jsonl

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CARDCAT_SHARED_DIR", REPO.parent / "shared"))
DEFAULT_CACHE = Path(os.environ.get("CARDCAT_RENDER_CACHE", Path.home() / ".cache" / "cardcat" / "renders"))


def load_renderer(shared: Path = SHARED) -> ModuleType:
    path = shared / "tools" / "cardrender.py"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: the renderer lives in ../shared/tools")
    spec = importlib.util.spec_from_file_location("cardrender", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_renderer: ModuleType | None = None


def _render_one(job: tuple[dict[str, Any], dict[str, Any] | None, int, str]) -> dict[str, Any]:
    global _renderer
    if _renderer is None:
        _renderer = load_renderer()
    card, expansion, series_index, out = job
    image, info = _renderer.render(card, expansion, series_index)
    folder = Path(out) / card["id"]
    folder.mkdir(parents=True, exist_ok=True)
    for name, picture, quality in (
        ("high.jpg", image, 92),
        ("low.jpg", image.resize(_renderer.LOW, _renderer.Image.LANCZOS), 88),
    ):
        tmp = folder / f".{name}.tmp"
        picture.save(tmp, format="JPEG", quality=quality)
        tmp.replace(folder / name)
    info.update(high=f"{card['id']}/high.jpg", low=f"{card['id']}/low.jpg")
    return info


def render_catalog(
    catalog: Path,
    out: Path,
    expansions: Iterable[str] | None = None,
    limit: int = 0,
    workers: int = os.cpu_count() or 1,
    progress: bool = True,
) -> Path:
    """Render (or reuse) every selected card's face under `out`; returns the manifest path."""
    exp_records = {e["id"]: e for e in read_jsonl(feed_path(catalog, "expansions"))}
    series_order = {
        s: i for i, s in enumerate(sorted({e.get("series_id") for e in exp_records.values()}, key=str))
    }
    wanted = set(expansions) if expansions else None
    cards = [
        c for c in read_jsonl(feed_path(catalog, "cards")) if wanted is None or c["expansion_id"] in wanted
    ]
    if limit:
        cards = cards[:limit]
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.jsonl"
    known: dict[str, dict[str, Any]] = {}
    if manifest_path.exists():
        for line in manifest_path.read_text().splitlines():
            if line.strip():
                info = json.loads(line)
                known[info["id"]] = info
    jobs = []
    for card in cards:
        if (
            card["id"] in known
            and (out / card["id"] / "high.jpg").exists()
            and (out / card["id"] / "low.jpg").exists()
        ):
            continue
        expansion = exp_records.get(card["expansion_id"])
        series_index = series_order.get((expansion or {}).get("series_id"), 0)
        jobs.append(({**card, "name": card_name(card)}, expansion, series_index, str(out)))
    if jobs:
        with (
            ProcessPoolExecutor(max_workers=max(1, workers)) as pool,
            manifest_path.open("a", encoding="utf-8") as manifest,
        ):
            results = pool.map(_render_one, jobs, chunksize=8)
            for info in tqdm(results, total=len(jobs), desc="render", unit=" cards", disable=not progress):
                manifest.write(json.dumps(info) + "\n")
                manifest.flush()
    return manifest_path


# Syllables of the made-up names of cards the catalog does not have (`stranger_face`).
_SYLLABLES = (
    "zor",
    "vak",
    "mel",
    "quin",
    "dra",
    "lo",
    "tep",
    "shi",
    "ber",
    "nox",
    "ul",
    "fay",
    "grim",
    "ost",
)


@functools.cache
def _templates(catalog: Path) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The catalog's card records (sorted by id) and expansions by id, read once per process."""
    cards = sorted(read_jsonl(feed_path(catalog, "cards")), key=lambda c: str(c["id"]))
    return cards, {e["id"]: e for e in read_jsonl(feed_path(catalog, "expansions"))}


def stranger_card(seed: int, shared: Path = SHARED) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The record of a card the catalog does not have, its set's, and the series index the renderer takes
    (which border): a real card's record (drawn by `seed`) given a made-up name, number, illustrator and a
    set newer than the catalog, so its artwork is new (the renderer's `artwork_key` comes from the name and
    illustrator) and its layout is the game's."""
    rng = np.random.default_rng([seed, 43])
    cards, expansions = _templates(shared / "catalog")
    template = cards[int(rng.integers(0, len(cards)))]
    name = "".join(str(rng.choice(_SYLLABLES)) for _ in range(int(rng.integers(2, 4)))).capitalize()
    expansion = dict(expansions.get(template.get("expansion_id") or "", {}))
    expansion.update(id=f"stranger{seed % 89}", name=f"{name} Tides", code=f"ZZ{seed % 89}")
    card = {
        **template,
        "id": f"stranger-{seed}",
        "name": name,
        "names": {},
        "number": str(int(rng.integers(1, 250))),
        "illustrator": f"{name} {seed}",
        "expansion_id": expansion["id"],
    }
    return card, expansion, int(rng.integers(0, 2))


def stranger_face(seed: int, shared: Path = SHARED) -> np.ndarray:
    """The face of `stranger_card(seed)`, drawn by the catalog's own renderer. What a collector scans when
    a set comes out before the catalog has it: a scanner should name nothing for it, and it is face-like
    in every way a look-alike card drawn another way is not (#43: the close bound is chosen on these too).
    RGB uint8, 838x600 like every render."""
    global _renderer
    if _renderer is None:
        _renderer = load_renderer(shared)
    image, _ = _renderer.render(*stranger_card(seed, shared))
    return np.asarray(image.convert("RGB"))


def read_manifest(path: Path) -> dict[str, dict[str, Any]]:
    """Card id -> renderer info (artwork_key, art_colour, full_art, high, low); last line wins."""
    entries: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            info = json.loads(line)
            entries[info["id"]] = info
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Render (and cache) card faces with ../shared/tools/cardrender.py"
    )
    parser.add_argument("--catalog", type=Path, default=SHARED / "catalog")
    parser.add_argument("--out", type=Path, default=DEFAULT_CACHE / "catalog")
    parser.add_argument("--expansion", action="append")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    path = render_catalog(args.catalog, args.out, args.expansion, args.limit, args.workers)
    print(f"{len(read_manifest(path))} cards in {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
