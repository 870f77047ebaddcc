"""The data dir is private to the service's user: directories 0700, files 0600, whatever the umask.

It holds the SQLite database (API key digests, webhook endpoints), `secrets.json` (the keys that sign
cursors and file URLs and that encrypt webhook secrets), the image store, price snapshots, bulk files and
the scanner's index. Under the usual umask 022 plain `open()` / `mkdir()` would make all of that world-
readable, so every place that creates something there goes through this module: directories are made
0700 and files opened 0600 (`os.open` with an explicit mode can only lose bits to the umask, and an
explicit chmod follows), then renamed into place. SQLite creates `-wal` and `-shm` with the database
file's own mode, so the database file is created 0600 before SQLAlchemy first opens it.

A data dir made by an older version (0755, files 0644) is tightened the first time a process of this
version opens it (`secure_data_dir`): group and other permission bits are removed from everything in it.
Where that is not possible (a read-only volume, a directory owned by someone else) it logs a warning and
carries on: permissions are then the deployment's to set.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import threading
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
_OPEN_TO_OTHERS = stat.S_IRWXG | stat.S_IRWXO

_secured: set[str] = set()
_secured_lock = threading.Lock()


def _tighten(path: Path) -> bool:
    """Remove group and other bits from one file or directory (never following a link); True if it was
    open to others. Owner bits are kept, so nothing stops working for the service itself. Raises
    OSError when the mode cannot be changed (read-only volume, someone else's file)."""
    st = path.lstat()
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode) or not mode & _OPEN_TO_OTHERS:
        return False
    os.chmod(path, mode & ~_OPEN_TO_OTHERS)
    return True


def tighten(path: Path) -> bool:
    """Remove group and other bits from an existing file or directory; True if it was open to others.
    A path that is gone is nothing to do; one whose mode cannot be changed is logged, not raised."""
    try:
        return _tighten(Path(path))
    except FileNotFoundError:
        return False
    except OSError as exc:
        log.warning("cannot make %s private: %s", path, exc.strerror)
        return True


def private_dir(path: Path) -> Path:
    """`path` as a directory that only its owner can enter: missing ones (and missing parents) created
    0700, the directory itself tightened if it is open to others. Returns `path`."""
    path = Path(path)
    if not path.is_dir():
        missing = [path, *(p for p in path.parents if not p.exists())]
        for directory in reversed(missing):
            try:
                directory.mkdir(mode=DIR_MODE)
            except FileExistsError:
                continue  # made by a concurrent process
            os.chmod(directory, DIR_MODE)  # mkdir's mode is masked by the umask, never widened by it
    tighten(path)
    return path


def open_private(path: Path, exclusive: bool = True) -> BinaryIO:
    """A new file opened for writing with mode 0600 (O_EXCL unless `exclusive` is off, which truncates
    an existing file and tightens its mode)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` (mode 0600) all at once: a private temporary file renamed into place, so a
    reader sees the old file or the new one, never part of one. The directory must exist."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open_private(tmp) as handle:
            handle.write(data)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def private_file(path: Path) -> Path:
    """Make sure `path` exists as a file only its owner can read (created empty, 0600, if missing; an
    existing one tightened). Used for the SQLite database before SQLite first opens it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    except FileExistsError:
        tighten(path)
    else:
        os.fchmod(fd, FILE_MODE)
        os.close(fd)
    return path


def tighten_tree(root: Path) -> int:
    """Remove group and other bits from `root` and everything under it (links are not followed); returns
    how many entries were open to others. Raises OSError when `root` itself cannot be changed; entries
    below that cannot are counted and logged once."""
    root = Path(root)
    count = int(_tighten(root))
    failed: list[str] = []
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            try:
                count += _tighten(Path(folder) / name)
            except FileNotFoundError:
                continue  # removed while we walked (a pruned bulk file, a swapped index)
            except OSError:
                failed.append(str(Path(folder) / name))
    if failed:
        log.warning("cannot make %d entries under %s private, e.g. %s", len(failed), root, failed[0])
    return count


def secure_data_dir(data_dir: Path, create: bool = False) -> None:
    """Once per process and directory: the data dir made 0700 (created when `create`), and when it was
    open to others (made by an older version, or under a lax umask) everything already in it tightened.
    A missing data dir is left alone unless `create`."""
    path = Path(data_dir)
    key = str(path.resolve())
    with _secured_lock:
        if key in _secured:
            return
        if not path.exists():
            if not create:
                return
            private_dir(path)
        elif path.stat().st_mode & _OPEN_TO_OTHERS:
            try:
                changed = tighten_tree(path)
            except OSError as exc:
                log.warning(
                    "data dir %s is open to other users and cannot be changed: %s", path, exc.strerror
                )
            else:
                log.warning("data dir %s was open to other users: made %d entries private", path, changed)
        _secured.add(key)
