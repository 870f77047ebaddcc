"""Webhook signing secrets are stored encrypted: whoever reads the database (a backup, a stray copy of
`cardcat.db`, a read-only SQL role) cannot sign events as us.

A stored secret is `v1:<key id>:<base64url(nonce | AES-256-GCM ciphertext and tag)>`. The AES key is
derived (HKDF-SHA256) from `CARDCAT_WEBHOOK_SECRETS_KEY`, else from the random key kept in the data dir's
`secrets.json` (catalog_api.kit.secret_store); the key id (a hash of the derived key) says which key
sealed a row, so a rotated-out key is named instead of failing as a bad tag.

Rows written by older versions hold the plain `whsec_...` secret: `open` reads them as they are, and
`endpoints.reseal_secrets` (run by the deliverer when it starts, by `cardcat db upgrade` and by
`cardcat webhooks rekey`) encrypts them. Rotation: the new key in `CARDCAT_WEBHOOK_SECRETS_KEY`, the
old one in `CARDCAT_WEBHOOK_SECRETS_OLD_KEYS` (read, never written), then `cardcat webhooks rekey`;
once it reports every secret current, drop the old key.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from catalog_api.kit.secret_store import stored_webhook_key
from catalog_api.kit.settings import Settings

PREFIX = "v1:"
MIN_KEY_CHARS = 32
_INFO = b"cardcat webhook secrets v1"
_AAD = b"cardcat webhook signing secret"
_NONCE_BYTES = 12


class SealError(ValueError):
    """A stored secret that cannot be decrypted: sealed under a key we no longer have, or altered."""


def _derive(key: str) -> bytes:
    if len(key) < MIN_KEY_CHARS:
        raise ValueError(f"a webhook secrets key must be at least {MIN_KEY_CHARS} random characters")
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(key.encode())


def _key_id(derived: bytes) -> str:
    return hashlib.sha256(b"cardcat key id:" + derived).hexdigest()[:8]


class SecretBox:
    """Seals with the current key; opens with it, any old key, or (legacy rows) not at all."""

    def __init__(self, key: str, old_keys: Sequence[str] = ()) -> None:
        current = _derive(key)
        self.key_id = _key_id(current)
        self._ciphers = {self.key_id: AESGCM(current)}
        for old in old_keys:
            derived = _derive(old)
            self._ciphers.setdefault(_key_id(derived), AESGCM(derived))

    def seal(self, secret: str) -> str:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._ciphers[self.key_id].encrypt(nonce, secret.encode(), _AAD)
        return f"{PREFIX}{self.key_id}:{base64.urlsafe_b64encode(nonce + sealed).decode()}"

    def open(self, stored: str) -> str:
        """The plain secret; a row an older version wrote in plain text comes back as it is."""
        if not is_sealed(stored):
            return stored
        key_id, _, blob = stored[len(PREFIX) :].partition(":")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise SealError(
                f"the webhook secret was encrypted with key {key_id}, which is neither the current "
                "webhook secrets key nor one of CARDCAT_WEBHOOK_SECRETS_OLD_KEYS"
            )
        try:
            raw = base64.urlsafe_b64decode(blob)
            return cipher.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _AAD).decode()
        except (InvalidTag, ValueError):
            raise SealError(f"the webhook secret sealed with key {key_id} is damaged") from None

    def is_current(self, stored: str) -> bool:
        """Whether `stored` is sealed with the current key (nothing to re-encrypt)."""
        return stored.startswith(f"{PREFIX}{self.key_id}:")


def is_sealed(stored: str) -> bool:
    return stored.startswith(PREFIX)


def webhook_box(settings: Settings) -> SecretBox:
    """The box for these settings: the configured key, else the data dir's (generated on first use)."""
    key = settings.webhook_secrets_key or stored_webhook_key(settings.data_dir)
    old = [k.strip() for k in settings.webhook_secrets_old_keys.split(",") if k.strip()]
    return SecretBox(key, old)
