"""`Idempotency-Key` on the batches' POSTs: a client that lost the answer to a POST sends it again with
the same key and gets the first answer back, and nothing happens twice (no second batch, no photo added
twice). The reply is stored in the transaction that made the change, so a change without its reply (or
the reverse) cannot exist; two requests racing with one key meet at the reply table's primary key, and
the one that loses answers with the winner's reply."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog_api.batches.tables import IdempotentReply
from core.errors import BadRequest, Conflict

HEADER = "idempotency-key"
MAX_KEY_CHARS = 255


def idempotency_key(raw: str | None) -> str | None:
    """The header's value, or None without one; printable ASCII of 1-255 characters, else 400."""
    if raw is None:
        return None
    if not (0 < len(raw) <= MAX_KEY_CHARS and raw.isascii() and raw.isprintable()):
        raise BadRequest(f"Idempotency-Key must be 1 to {MAX_KEY_CHARS} printable ASCII characters.")
    return raw


def fingerprint(method: str, path: str, body_digest: str) -> str:
    """What makes two requests the same request: method, path and the body's sha256."""
    return hashlib.sha256(f"{method} {path} {body_digest}".encode()).hexdigest()


async def replay(conn: AsyncConnection, key_id: int, key: str, print_: str) -> tuple[int, Any] | None:
    """The stored reply to this request, None if there is none; `Conflict` when the key was used for
    another request."""
    row = (
        await conn.execute(
            select(IdempotentReply.fingerprint, IdempotentReply.status, IdempotentReply.body).where(
                IdempotentReply.key_id == key_id, IdempotentReply.idempotency_key == key
            )
        )
    ).first()
    if row is None:
        return None
    if row.fingerprint != print_:
        raise Conflict("This Idempotency-Key was used for a different request; use a new key for this one.")
    return int(row.status), row.body


async def remember(conn: AsyncConnection, key_id: int, key: str, print_: str, status: int, body: Any) -> None:
    await conn.execute(
        insert(IdempotentReply).values(
            key_id=key_id,
            idempotency_key=key,
            fingerprint=print_,
            status=status,
            body=body,
            created_at=datetime.now(UTC),
        )
    )
