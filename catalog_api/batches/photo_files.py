"""Where a batch's photos wait for their scan: `<data dir>/batches/<batch id>/<position>`, private to the
server's user (0700 directories, 0600 files), never served, deleted as soon as the photo is answered,
and with the whole directory when the batch is done, cancelled or expired. An upload is first written
to `.upload-*` files in the batch's directory and renamed to its positions inside the transaction that
records them, just before it commits (a worker that takes a photo finds its file); a transaction that
fails removes what it renamed, and the sweep removes what a killed request left."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from catalog_api.batches.queue import BATCH_ID
from catalog_api.kit.private_files import private_dir
from catalog_api.kit.settings import Settings

STAGED_PREFIX = ".upload-"
# An upload's staged files older than this belong to a request that died mid-way; a photo file this old
# whose photo is answered belongs to a worker that died between the answer and the delete. (An upload
# renames its files into place just before its transaction commits: younger files may be that.)
STALE_UPLOAD_S = 3600
STALE_PHOTO_S = 600


def batch_dir(settings: Settings, batch_id: str) -> Path:
    if not BATCH_ID.fullmatch(batch_id):  # ids come from our database; never a path from a request
        raise ValueError(f"not a batch id: {batch_id!r}")
    return settings.batch_photo_dir / batch_id


def photo_path(settings: Settings, batch_id: str, position: int) -> Path:
    return batch_dir(settings, batch_id) / str(int(position))


def staging_dir(settings: Settings, batch_id: str) -> Path:
    """The batch's directory, made private if new: uploads are staged in it."""
    private_dir(settings.batch_photo_dir)
    return private_dir(batch_dir(settings, batch_id))


def remove_photo(settings: Settings, batch_id: str, position: int) -> None:
    photo_path(settings, batch_id, position).unlink(missing_ok=True)


def remove_batch(settings: Settings, batch_id: str) -> None:
    shutil.rmtree(batch_dir(settings, batch_id), ignore_errors=True)


def batch_ids_on_disk(settings: Settings) -> list[str]:
    root = settings.batch_photo_dir
    if not root.is_dir():
        return []
    return sorted(entry.name for entry in root.iterdir() if BATCH_ID.fullmatch(entry.name))


def remove_stale_uploads(settings: Settings, batch_id: str) -> None:
    """Staged files of uploads that never finished (a worker killed mid-request)."""
    cutoff = time.time() - STALE_UPLOAD_S
    for path in batch_dir(settings, batch_id).glob(STAGED_PREFIX + "*"):  # none when the dir is gone
        _remove_if_older(path, cutoff)


def remove_answered(settings: Settings, batch_id: str, waiting: set[int]) -> None:
    """Photo files of the batch whose photos are no longer `waiting` (answered or dropped)."""
    cutoff = time.time() - STALE_PHOTO_S
    directory = batch_dir(settings, batch_id)
    for path in directory.iterdir() if directory.is_dir() else ():
        if path.name.isdigit() and int(path.name) not in waiting:
            _remove_if_older(path, cutoff)


def _remove_if_older(path: Path, cutoff: float) -> None:
    """Deletes `path` when it was last written before `cutoff` (gone already: nothing to do)."""
    try:
        if path.stat().st_mtime < cutoff:
            path.unlink(missing_ok=True)
    except FileNotFoundError:
        pass
