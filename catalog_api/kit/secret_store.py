"""Signing secrets that nobody configured: random, made once, kept in the data dir.

Cursors and snapshot download URLs are HMAC-signed. A key derived from something an attacker can guess
(the database URL, say) lets anyone forge a snapshot URL that never expires, so when
`CARDCAT_CURSOR_SECRET` / `CARDCAT_FILE_SECRET` are unset the first process to start generates 256
random bits for each and writes them to `<data_dir>/secrets.json` (mode 0600). Every worker, replica
and CLI run that shares the data dir reads the same file, so they accept each other's signatures.

The file is written to a private temporary name and hard-linked into place, which cannot overwrite: when
two processes start at once exactly one file wins and both read it back. Deployments whose data dir is
read-only or not shared (Kubernetes, several hosts) must set both variables instead (deploy/k8s does,
from a Secret); then this file is never read or written.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

log = logging.getLogger(__name__)

FILE_NAME = "secrets.json"


@dataclass(frozen=True)
class StoredSecrets:
    cursor: str
    file: str


class SecretStoreError(RuntimeError):
    """The data dir holds no usable secrets file and none could be written."""


def stored_secrets(data_dir: Path) -> StoredSecrets:
    """The data dir's secrets, generated and stored on first use (cached per process and directory)."""
    return _load_or_create(str(Path(data_dir).resolve()))


@lru_cache(maxsize=8)
def _load_or_create(data_dir: str) -> StoredSecrets:
    path = Path(data_dir) / FILE_NAME
    if not path.exists():
        _create(path)
    return _read(path)


def _create(path: Path) -> None:
    fresh = {"cursor_secret": secrets.token_urlsafe(32), "file_secret": secrets.token_urlsafe(32)}
    tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(fresh, handle)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)  # never replaces a file another process linked first
            log.warning(
                "generated signing secrets in %s (set CARDCAT_CURSOR_SECRET and CARDCAT_FILE_SECRET "
                "to use your own)",
                path,
            )
        except FileExistsError:
            pass  # another process won the race; read theirs
    except OSError as exc:
        raise SecretStoreError(
            f"cannot create {path} ({exc.strerror}): set CARDCAT_CURSOR_SECRET and CARDCAT_FILE_SECRET, "
            "or make the data dir writable"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)


def _read(path: Path) -> StoredSecrets:
    try:
        mode = path.stat().st_mode
        raw = json.loads(path.read_text())
        cursor, file = raw["cursor_secret"], raw["file_secret"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SecretStoreError(f"{path} is unreadable or malformed ({exc!r}); fix or remove it") from None
    if not (isinstance(cursor, str) and isinstance(file, str) and len(cursor) >= 32 and len(file) >= 32):
        raise SecretStoreError(f"{path} must hold two random strings of at least 32 characters")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("%s is readable by other users (mode %o); it should be 0600", path, stat.S_IMODE(mode))
    return StoredSecrets(cursor=cursor, file=file)
