"""Directories replaced whole: readers (the Embedder replica's index watcher) see the old tree or the new
one, never a half-written one. Both the index writer (`models.index`) and the scanner's index build
(`catalog_api.scan.indexing`) swap through here."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path


def swap_dir(built: Path, directory: Path) -> None:
    """Put the finished tree `built` where `directory` is (two renames on one filesystem), then drop the old.

    The old tree's name is unique to this process and moment, so two writers never collide on it."""
    old = directory.parent / f".{directory.name}.old-{os.getpid()}-{time.monotonic_ns()}"
    if directory.exists():
        directory.rename(old)
    built.rename(directory)
    shutil.rmtree(old, ignore_errors=True)
