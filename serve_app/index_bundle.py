"""The scanner's index bundle: the FAISS index and the print table of one build, and the one watcher.

An index directory holds `index.faiss` + `meta.json` (the embeddings) and `cards.json` (each card's
print, which fusion compares OCR reads with). A rebuild is written beside the live directory and swapped
in by rename (`catalog_api.scan.indexing`). Reading the three files by path could mix two builds when a swap
lands between two reads, so a bundle is read through one open handle on the directory: whatever is
renamed meanwhile, the handle still names the build it was opened on. A build whose files vanish under
the handle (the old directory deleted after a swap) is simply read again.

Only the Embedder watches the directory. The scan pipeline (serve_app.pipeline) asks the Embedder for
the table of the build its hits came from (by `stamp`), so the scanner never fuses hits of one build
with the table of another.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from models.index import CardIndex
from serve_app.fusion import PrintTable

log = logging.getLogger("cardcat.scan")
RECHECK_S = 2.0
_ATTEMPTS = 3


@dataclass(frozen=True)
class IndexBundle:
    """One build: its FAISS index, its print table, and `stamp`, which names the build."""

    stamp: str
    index: CardIndex
    table: PrintTable


def read_stamp(directory: Path) -> str | None:
    """The live build's stamp (a digest of its meta.json), or None while there is no index."""
    try:
        return _stamp((Path(directory) / "meta.json").read_bytes())
    except OSError:
        return None


def _stamp(meta: bytes) -> str:
    return hashlib.sha256(meta).hexdigest()[:16]


def _read(dir_fd: int, name: str) -> bytes:
    fd = os.open(name, os.O_RDONLY, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as file:
        return file.read()


def load_bundle(directory: Path) -> IndexBundle | None:
    """The build now live in `directory`, all three files from that one build; None if there is none."""
    for _ in range(_ATTEMPTS):
        try:
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            return None
        try:
            meta, blob, cards = (_read(dir_fd, name) for name in ("meta.json", "index.faiss", "cards.json"))
        except FileNotFoundError:
            continue  # swapped out and deleted while we read it: read the new one
        finally:
            os.close(dir_fd)
        index = CardIndex.from_bytes(json.loads(meta), blob)
        return IndexBundle(_stamp(meta), index, PrintTable.from_records(json.loads(cards)))
    raise RuntimeError(f"{directory} kept changing while it was read ({_ATTEMPTS} attempts)")


class BundleWatcher:
    """The current bundle of a directory, re-read when its build changes (checked every `RECHECK_S`)."""

    def __init__(self, directory: Path, recheck_s: float = RECHECK_S) -> None:
        self.directory = Path(directory)
        self.recheck_s = recheck_s
        self.bundle: IndexBundle | None = None
        self.checked = 0.0
        self.refresh()

    def due(self) -> bool:
        """Whether it is time to look at the directory again (cheap; call `refresh` off the event loop)."""
        return time.monotonic() - self.checked > self.recheck_s

    def refresh(self) -> IndexBundle | None:
        """Load the live build if it is not the one held; the held bundle changes in one assignment."""
        self.checked = time.monotonic()
        stamp = read_stamp(self.directory)
        if stamp is not None and (self.bundle is None or stamp != self.bundle.stamp):
            bundle = load_bundle(self.directory)
            if bundle is not None:
                self.bundle = bundle
                log.info("index %s loaded: %d cards", bundle.stamp, len(bundle.index.card_ids))
        return self.bundle

    def move_to(self, directory: Path) -> None:
        """Watch another directory (a `serve deploy` that names a new `index_dir`)."""
        self.directory = Path(directory)
        self.refresh()
