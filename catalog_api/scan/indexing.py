"""Building and refreshing the scanner's index from what the catalog serves.

The index directory holds the FAISS index of every card face the service hosts (`index.faiss`,
`meta.json`) and the print table the fusion step compares OCR reads with (`cards.json`). A rebuild is
written beside the live directory and swapped in by rename, so the scanner (which watches meta.json)
moves from the old index to the new one between two requests.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from catalog_api.kit.images import ImageStore
from catalog_api.kit.private_files import tighten_tree
from catalog_api.kit.settings import Settings
from catalog_api.scan.card_rows import imaged_card_prints
from models.files import swap_dir


def print_records(engine: Engine, card_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Each imaged card's print: what the OCR can be compared with."""
    wanted = set(card_ids) if card_ids is not None else None
    with engine.connect() as conn:
        rows = imaged_card_prints(conn)
    return [
        {
            "id": row.id,
            "name": row.name,
            "number": row.number,
            "set_code": row.code,
            "printed_total": str(row.card_count_official) if row.number and row.number.isdigit() else None,
            # The renderer's rule: reprints that share name and illustrator share their artwork.
            "artwork": f"{row.name}|{row.illustrator or row.id}",
            "image_key": row.image_key,
        }
        for row in rows
        if wanted is None or row.id in wanted
    ]


def faces(settings: Settings, records: list[dict[str, Any]]) -> list[tuple[str, Path]]:
    store = ImageStore(settings.images_dir)
    found = []
    for record in records:
        path = store.path(record["image_key"], "high")
        if path is not None and path.is_file():
            found.append((record["id"], path))
    return found


def build_index(
    settings: Settings, engine: Engine, weights: Path | None = None, progress: bool = True
) -> int:
    """Embed every hosted card face into a fresh index and swap it in; returns the card count."""
    from models.embedder import CardEmbedder
    from models.index import CardIndex

    records = print_records(engine)
    embedder = CardEmbedder(weights)
    checkpoints = settings.data_dir / "index-build"
    index = CardIndex.build(embedder, faces(settings, records), checkpoint_dir=checkpoints, progress=progress)
    staged = settings.index_dir.with_name(settings.index_dir.name + ".new")
    shutil.rmtree(staged, ignore_errors=True)
    index.save(staged)
    _write_table(staged, records)
    swap_dir(staged, settings.index_dir)
    shutil.rmtree(checkpoints, ignore_errors=True)
    return len(index.card_ids)


def refresh_index(
    settings: Settings, engine: Engine, card_ids: list[str], weights: Path | None = None
) -> int:
    """After a catalog sync: re-embed the changed cards and swap the updated index in."""
    from models.embedder import CardEmbedder
    from models.index import CardIndex

    if not (settings.index_dir / "meta.json").exists() or not card_ids:
        return 0
    index = CardIndex.load(settings.index_dir)
    embedder = CardEmbedder(weights)
    changed = print_records(engine, card_ids)
    count = index.upsert(embedder, faces(settings, changed))
    staged = settings.index_dir.with_name(settings.index_dir.name + ".new")
    shutil.rmtree(staged, ignore_errors=True)
    index.save(staged)
    _write_table(staged, print_records(engine))
    swap_dir(staged, settings.index_dir)
    return count


def _write_table(directory: Path, records: list[dict[str, Any]]) -> None:
    """cards.json beside the index, then the whole staged directory made private (FAISS writes its file
    with the umask's mode) before it is swapped in: the data dir's files are 0600 (kit.private_files)."""
    table = [{k: v for k, v in record.items() if k != "image_key"} for record in records]
    (directory / "cards.json").write_text(json.dumps(table, separators=(",", ":")))
    tighten_tree(directory)
