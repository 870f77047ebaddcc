"""Directories replaced whole: readers see the old tree or the new one, never a half-written one."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path


def swap_dir(built: Path, directory: Path) -> None:
    old = directory.parent / f".{directory.name}.old-{os.getpid()}-{time.monotonic_ns()}"
    if directory.exists():
        directory.rename(old)
    built.rename(directory)
    shutil.rmtree(old, ignore_errors=True)
