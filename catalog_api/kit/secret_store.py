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

The same file holds the key that encrypts webhook signing secrets in the database
(`catalog_api.events.secret_box`, unless `CARDCAT_WEBHOOK_SECRETS_KEY` is set). A file written by an
older version has no such key: the first process that needs it adds one, under an exclusive lock and by
rename, so concurrent processes agree on it and readers never see a half-written file.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from catalog_api.kit.private_files import private_dir, private_file, tighten, write_private

log = logging.getLogger(__name__)

FILE_NAME = "secrets.json"
WEBHOOK_KEY = "webhook_secrets_key"


@dataclass(frozen=True)
class StoredSecrets:
    cursor: str
    file: str
    # None in a file written before webhook secrets were encrypted (see `stored_webhook_key`).
    webhook: str | None = None


class SecretStoreError(RuntimeError):
    """The data dir holds no usable secrets file and none could be written."""


def stored_secrets(data_dir: Path) -> StoredSecrets:
    """The data dir's secrets, generated and stored on first use (cached per process and directory)."""
    return _load_or_create(str(Path(data_dir).resolve()))


def stored_webhook_key(data_dir: Path) -> str:
    """The data dir's webhook secrets key, added to an older secrets.json on first use."""
    held = stored_secrets(data_dir).webhook
    if held is not None:
        return held
    path = Path(data_dir).resolve() / FILE_NAME
    try:
        _add_webhook_key(path)
    except OSError as exc:
        raise SecretStoreError(
            f"cannot add a webhook secrets key to {path} ({exc.strerror}): set "
            "CARDCAT_WEBHOOK_SECRETS_KEY, or make the data dir writable"
        ) from None
    _load_or_create.cache_clear()
    key = stored_secrets(data_dir).webhook
    assert key is not None
    return key


def _add_webhook_key(path: Path) -> None:
    """Add the key to an existing file, once: under an exclusive lock, so a second process waits and
    then finds the first one's key; the file is replaced by rename, so readers see it whole."""
    with open(private_file(path.with_name(f".{FILE_NAME}.lock")), "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        raw = json.loads(path.read_text())
        if not isinstance(raw.get(WEBHOOK_KEY), str):
            raw[WEBHOOK_KEY] = secrets.token_urlsafe(32)
            write_private(path, json.dumps(raw).encode())
            log.warning("added a webhook secrets key to %s (or set CARDCAT_WEBHOOK_SECRETS_KEY)", path)


@lru_cache(maxsize=8)
def _load_or_create(data_dir: str) -> StoredSecrets:
    path = Path(data_dir) / FILE_NAME
    if not path.exists():
        _create(path)
    return _read(path)


def _create(path: Path) -> None:
    fresh = {
        "cursor_secret": secrets.token_urlsafe(32),
        "file_secret": secrets.token_urlsafe(32),
        WEBHOOK_KEY: secrets.token_urlsafe(32),
    }
    tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        private_dir(path.parent)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.fchmod(fd, 0o600)
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
        tighten(path)  # one written by an older version, or copied in under a lax umask
        raw = json.loads(path.read_text())
        cursor, file, webhook = raw["cursor_secret"], raw["file_secret"], raw.get(WEBHOOK_KEY)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SecretStoreError(f"{path} is unreadable or malformed ({exc!r}); fix or remove it") from None
    if not (isinstance(cursor, str) and isinstance(file, str) and len(cursor) >= 32 and len(file) >= 32):
        raise SecretStoreError(f"{path} must hold two random strings of at least 32 characters")
    if webhook is not None and not (isinstance(webhook, str) and len(webhook) >= 32):
        raise SecretStoreError(f"{path}: {WEBHOOK_KEY} must be a random string of at least 32 characters")
    return StoredSecrets(cursor=cursor, file=file, webhook=webhook)
