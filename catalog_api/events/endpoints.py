"""Webhook endpoints: registering, listing, removing and re-enabling the receivers of the events.

An endpoint URL must be http(s) and resolve only to public addresses unless `webhooks_allow_private`
is set. The URL is read and its addresses judged by the kit's one network guard
(`catalog_api.kit.netguard`, shared with scanning by URL); this module words the refusals for an
operator and resolves with the blocking resolver, since the deliverer checks again before every post
from its own thread.

Each endpoint's signing secret is stored encrypted (`secret_box`): it is shown in plain text once, when
the endpoint is added, and decrypted only by the deliverer to sign a post.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine, delete, func, insert, select, update

from catalog_api.events.secret_box import SealError, SecretBox
from catalog_api.events.signing import new_secret
from catalog_api.events.tables import Delivery, WebhookEndpoint
from catalog_api.kit.netguard import (
    PROBLEMS,
    IPAddress,
    Reason,
    Target,
    URLRejected,
    addresses_of,
    is_public_address,
    parse_url,
)

# The words an operator reads when a URL is refused, by the guard's reason.
REFUSALS: dict[Reason, str] = {
    **PROBLEMS,
    "scheme": "only http and https URLs are accepted",
    "userinfo": "the URL must not carry a user name or password",
}


class URLRefused(ValueError):
    """A webhook URL that may not be used (scheme, form, or the addresses it resolves to)."""


def endpoint_target(url: str) -> Target:
    """The endpoint URL read by the network guard; `URLRefused` in an operator's words otherwise."""
    try:
        return parse_url(url, ("http", "https"))
    except URLRejected as refused:
        raise URLRefused(REFUSALS[refused.reason]) from None


def resolve(target: Target, allow_private: bool) -> list[IPAddress]:
    """The addresses to connect to; every one must be public unless private targets are allowed."""
    if target.literal is not None:
        addresses = [target.literal]
    else:
        try:
            infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            raise URLRefused(f"the host {target.host} could not be resolved") from None
        addresses = addresses_of(infos)
        if not addresses:
            raise URLRefused(f"the host {target.host} could not be resolved")
    if not allow_private and not all(is_public_address(ip) for ip in addresses):
        raise URLRefused(
            f"the host {target.host} resolves to a non-public address "
            "(set CARDCAT_WEBHOOKS_ALLOW_PRIVATE=true to allow private targets)"
        )
    return addresses


@dataclass(frozen=True)
class EndpointInfo:
    id: int
    url: str
    created_at: datetime
    disabled_at: datetime | None
    disabled_reason: str | None
    pending: int
    delivered: int

    @property
    def status(self) -> str:
        return "active" if self.disabled_at is None else f"disabled ({self.disabled_reason})"


def aware(moment: datetime) -> datetime:
    """SQLite hands datetimes back without a zone; everything is stored in UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def add_endpoint(engine: Engine, url: str, allow_private: bool, box: SecretBox) -> tuple[int, str]:
    """Register a receiver for every event emitted from now on; returns its id and signing secret (the
    only time it is seen in plain text: the database keeps it sealed by `box`)."""
    resolve(endpoint_target(url), allow_private)
    secret = new_secret()
    with engine.begin() as conn:
        endpoint_id = conn.execute(
            insert(WebhookEndpoint)
            .values(url=url, secret=box.seal(secret), created_at=datetime.now(UTC))
            .returning(WebhookEndpoint.id)
        ).scalar_one()
    return int(endpoint_id), secret


@dataclass(frozen=True)
class Resealed:
    changed: int  # secrets stored in plain text or under an old key, now sealed with the current key
    unreadable: list[int]  # endpoints whose secret no key we have opens (left as they are)


def reseal_secrets(engine: Engine, box: SecretBox) -> Resealed:
    """Encrypt with the current key every secret an older version stored in plain text or an old key
    sealed. Each row is replaced only if it still holds what was read, so concurrent runs agree."""
    changed, unreadable = 0, []
    with engine.begin() as conn:
        rows = conn.execute(select(WebhookEndpoint.id, WebhookEndpoint.secret).order_by(WebhookEndpoint.id))
        for endpoint_id, stored in rows.all():
            if box.is_current(stored):
                continue
            try:
                sealed = box.seal(box.open(stored))
            except SealError:
                unreadable.append(endpoint_id)
                continue
            changed += conn.execute(
                update(WebhookEndpoint)
                .where(WebhookEndpoint.id == endpoint_id, WebhookEndpoint.secret == stored)
                .values(secret=sealed)
            ).rowcount
    return Resealed(changed, unreadable)


def list_endpoints(engine: Engine) -> list[EndpointInfo]:
    with engine.connect() as conn:
        counts = {
            (endpoint_id, done): n
            for endpoint_id, done, n in conn.execute(
                select(Delivery.endpoint_id, Delivery.delivered_at.is_not(None), func.count()).group_by(
                    Delivery.endpoint_id, Delivery.delivered_at.is_not(None)
                )
            )
        }
        rows = conn.execute(select(*WebhookEndpoint.__table__.c).order_by(WebhookEndpoint.id)).all()
    return [
        EndpointInfo(
            row.id,
            row.url,
            aware(row.created_at),
            row.disabled_at,
            row.disabled_reason,
            counts.get((row.id, False), 0),
            counts.get((row.id, True), 0),
        )
        for row in rows
    ]


def remove_endpoint(engine: Engine, endpoint_id: int) -> bool:
    with engine.begin() as conn:
        conn.execute(delete(Delivery).where(Delivery.endpoint_id == endpoint_id))
        return bool(conn.execute(delete(WebhookEndpoint).where(WebhookEndpoint.id == endpoint_id)).rowcount)


def enable_endpoint(engine: Engine, endpoint_id: int) -> bool:
    """Re-enable a disabled endpoint: its pending events are retried now, with a fresh retry budget."""
    now = datetime.now(UTC)
    with engine.begin() as conn:
        found = conn.execute(
            update(WebhookEndpoint)
            .where(WebhookEndpoint.id == endpoint_id)
            .values(disabled_at=None, disabled_reason=None)
        ).rowcount
        conn.execute(
            update(Delivery)
            .where(Delivery.endpoint_id == endpoint_id, Delivery.delivered_at.is_(None))
            .values(attempts=0, next_attempt_at=now)
        )
    return bool(found)
