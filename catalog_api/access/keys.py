"""API keys: `cc_` + 43 url-safe characters (256 random bits), shown once, stored as a SHA-256 digest."""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, select, update
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import Session

from catalog_api.access.tables import ApiKey
from catalog_api.access.unknown_keys import UnknownKeys
from catalog_api.kit.http_errors import is_database_down

KEY_PATTERN = re.compile(r"cc_[A-Za-z0-9_-]{43}")


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def bearer_token(authorization: str | None) -> str | None:
    """The key from `Authorization: Bearer <key>`, or None when missing or malformed."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not KEY_PATTERN.fullmatch(token):
        return None
    return token


@dataclass(frozen=True)
class KeyInfo:
    id: int
    name: str
    prefix: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None

    @property
    def status(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if is_expired(self.expires_at):
            return "expired"
        return "active"


def _aware(moment: datetime) -> datetime:
    # SQLite hands datetimes back without a zone; everything is stored in UTC.
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def create_key(engine: Engine, name: str, expires_in_s: int | None = None) -> tuple[str, KeyInfo]:
    key = "cc_" + secrets.token_urlsafe(32)
    now = datetime.now(UTC)
    row = ApiKey(
        name=name,
        prefix=key[:10],
        key_hash=hash_key(key),
        created_at=now,
        expires_at=now + timedelta(seconds=expires_in_s) if expires_in_s is not None else None,
        revoked_at=None,
    )
    with Session(engine) as session, session.begin():
        session.add(row)
        session.flush()
        info = _info(row)
    return key, info


def revoke_key(engine: Engine, key_or_prefix: str) -> int:
    """Revoke by full key or by the prefix `keys list` shows; returns how many keys were revoked."""
    with Session(engine) as session, session.begin():
        condition = (
            ApiKey.key_hash == hash_key(key_or_prefix)
            if KEY_PATTERN.fullmatch(key_or_prefix)
            else ApiKey.prefix == key_or_prefix
        )
        result = session.execute(
            update(ApiKey).where(condition, ApiKey.revoked_at.is_(None)).values(revoked_at=datetime.now(UTC))
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]


def list_keys(engine: Engine) -> list[KeyInfo]:
    with Session(engine) as session:
        return [_info(row) for row in session.scalars(select(ApiKey).order_by(ApiKey.id))]


def _info(row: ApiKey) -> KeyInfo:
    return KeyInfo(row.id, row.name, row.prefix, row.created_at, row.expires_at, row.revoked_at)


class KeyVerifier:
    """Looks every presented key up by digest, so a revocation takes effect on the next request.

    While the database cannot be reached, a key this process verified within `outage_grace_s` is still
    let through (its reads may be served from memory: reference tables, the response cache): a
    database restart then costs those clients nothing, and a revocation made during the outage takes
    effect when the database is back. Any other key gets `500 internal` with `Retry-After`.

    A digest the database refused is not looked up again for a few seconds (`UnknownKeys`), so a client
    repeating a bad key costs one lookup per interval, not one per request."""

    def __init__(
        self,
        engine: AsyncEngine,
        unknown: UnknownKeys | None = None,
        outage_grace_s: float = 300.0,
        max_remembered: int = 100_000,
    ) -> None:
        self._engine = engine
        self.unknown = unknown or UnknownKeys()
        self.outage_grace_s, self.max_remembered = outage_grace_s, max_remembered
        self._verified: OrderedDict[str, float] = OrderedDict()  # digest -> monotonic time last verified

    async def verify(self, key: str) -> str | None:
        """The key's rate-limit bucket when it is known, not revoked and not expired; otherwise None.

        The bucket is named by the key's digest, not its row id, so two databases sharing one Redis
        (staging and production, or test runs) never share a budget."""
        digest = hash_key(key)
        if await self.unknown.contains(digest):
            return None
        stmt = select(ApiKey.id, ApiKey.expires_at, ApiKey.revoked_at).where(ApiKey.key_hash == digest)
        try:
            async with self._engine.connect() as conn:
                row = (await conn.execute(stmt)).first()
        except Exception as exc:
            verified_at = self._verified.get(digest)
            recent = verified_at is not None and time.monotonic() - verified_at < self.outage_grace_s
            if recent and is_database_down(exc):
                return key_bucket(digest)
            raise
        self._verified.pop(digest, None)
        if row is None or row.revoked_at is not None or is_expired(row.expires_at):
            await self.unknown.add(digest)
            return None
        self._verified[digest] = time.monotonic()
        if len(self._verified) > self.max_remembered:
            self._verified.popitem(last=False)
        return key_bucket(digest)


def is_expired(expires_at: datetime | None) -> bool:
    return expires_at is not None and _aware(expires_at) <= datetime.now(UTC)


def key_bucket(digest: str) -> str:
    """The rate-limit bucket of the key with this digest (the gate's, and `/files` downloads')."""
    return "key:" + digest[:32]
