"""The deliverer that drains the outbox to the webhook endpoints (`endpoints.py`), signed (`signing.py`).

Delivery is at least once: a delivery is marked delivered only after the receiver's 2xx, so a crash
mid-flight sends it again (receivers dedupe by `webhook-id`, the event id). Each endpoint gets its events
in `seq` order: only the oldest undelivered event of an endpoint is ever in flight, and while it waits
for a retry the endpoint's later events wait behind it. That also backs off a whole endpoint that is
down instead of hammering it once per event.

- 2xx: delivered. 410 Gone: the endpoint is disabled (reason stored) and its pending events stop.
- Anything else (other status, 3xx included since redirects are never followed, timeout, refused
  connection, an answer we cannot read, any unexpected error while posting): retried after
  min(cap, base * 2**(attempts-1)) seconds, jittered ±20%, or later when the receiver's `Retry-After`
  asks for more. After `webhooks_max_attempts` failures of one event (about a day with the defaults)
  the endpoint is disabled; nothing is dropped: `cardcat webhooks enable ID` resumes it from that event.
  Every attempt is recorded, whatever the receiver sent back, so one odd receiver is backed off like any
  failing one and never holds up another endpoint's deliveries.
- Deadline: each post has one overall deadline, `webhooks_timeout_s` (10 s by default), from the
  connection attempt to the last byte of the answer that we read. Per-read timeouts alone would let a
  receiver that drips its answer a byte at a time hold a deliverer indefinitely; past the deadline the
  connection is dropped and the attempt counts as failed. So a deliverer worker is never held longer
  than the deadline (plus the DNS lookup) by one endpoint, and `cardcat serve` waits that long for the
  post in flight when it stops.
- `Retry-After` is read strictly: ASCII delay-seconds or an HTTP-date; anything else is ignored (the
  usual backoff applies), never an error.
- Several deliverers may run on PostgreSQL: each claims an endpoint's head delivery with
  `FOR UPDATE SKIP LOCKED` and holds the lock while it posts (a killed deliverer's lock dies with its
  connection). SQLite has no row locks: run a single deliverer there.
- URLs must be http(s) and resolve only to public addresses unless `webhooks_allow_private` is set;
  the check is repeated before every post, which connects to the address it checked (no second lookup).
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import ssl
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import certifi
import httpx
from sqlalchemy import Connection, Engine, func, select, tuple_, update
from sqlalchemy.exc import SQLAlchemyError

from catalog_api.events.endpoints import URLRefused, endpoint_target, reseal_secrets, resolve
from catalog_api.events.secret_box import SealError, webhook_box
from catalog_api.events.signing import signed_headers
from catalog_api.events.tables import Delivery, Event, WebhookEndpoint
from catalog_api.kit.log_text import loggable
from catalog_api.kit.metrics import WEBHOOK_DELIVERIES, WEBHOOK_FAILURES, WEBHOOK_POST_LATENCY
from catalog_api.kit.netguard import IPAddress, Target
from catalog_api.kit.settings import Settings

log = logging.getLogger("cardcat.webhooks")

# A receiver's Retry-After is honoured up to this long (a larger value is taken as this).
MAX_RETRY_AFTER_S = 24 * 3600.0
# An error text is stored with the attempt: this long at most, without control characters or lone
# surrogates (PostgreSQL text cannot hold NUL, and a receiver's error page may contain anything).
MAX_ERROR_CHARS = 500
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]")
_DELAY_SECONDS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Job:
    delivery_id: int
    endpoint_id: int
    attempts: int
    url: str
    secret: str
    event_id: str
    body: str


@dataclass(frozen=True)
class Outcome:
    status: int | None
    error: str | None = None
    retry_after: float | None = None

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def backoff_s(attempts: int, settings: Settings, retry_after: float | None = None) -> float:
    """Seconds before the next try after `attempts` failures."""
    exponent = min(attempts - 1, 60)
    delay = min(settings.webhooks_backoff_cap_s, settings.webhooks_backoff_base_s * 2**exponent)
    delay *= random.uniform(0.8, 1.2)
    if retry_after is not None:
        delay = max(delay, min(retry_after, MAX_RETRY_AFTER_S))
    return delay


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """`Retry-After` as seconds from now, at most MAX_RETRY_AFTER_S: delay-seconds or an HTTP-date; None
    when absent or unreadable.

    Total on any text, because the receiver chooses it: delay-seconds are ASCII digits only (`str.isdigit`
    also accepts `²` and other scripts' digits, which `float` then refuses), and anything the date parser
    cannot read is ignored rather than raised."""
    if not value:
        return None
    value = value.strip()
    if not value.isascii():
        return None
    if _DELAY_SECONDS.fullmatch(value):
        digits = value.lstrip("0") or "0"
        # Longer than 9 digits is more than the cap anyway (and int() refuses thousands of digits).
        return MAX_RETRY_AFTER_S if len(digits) > 9 else min(float(digits), MAX_RETRY_AFTER_S)
    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - now).total_seconds()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return min(max(0.0, seconds), MAX_RETRY_AFTER_S)


def _clean(text: str) -> str:
    """An error text fit to store: control characters replaced, length capped."""
    return _CONTROL.sub("?", text[:MAX_ERROR_CHARS])


def _claim(conn: Connection, cutoff: datetime, lock: bool) -> Job | None:
    """The most overdue head delivery (the oldest undelivered event of an active endpoint), if due."""
    pending = Delivery.delivered_at.is_(None)
    active = WebhookEndpoint.disabled_at.is_(None)
    heads = (
        select(Delivery.endpoint_id, func.min(Delivery.event_seq))
        .join(WebhookEndpoint, WebhookEndpoint.id == Delivery.endpoint_id)
        .where(pending, active)
        .group_by(Delivery.endpoint_id)
    )
    stmt = (
        select(
            Delivery.id,
            Delivery.endpoint_id,
            Delivery.attempts,
            WebhookEndpoint.url,
            WebhookEndpoint.secret,
            Event.id.label("event_id"),
            Event.body,
        )
        .join(Event, Event.seq == Delivery.event_seq)
        .join(WebhookEndpoint, WebhookEndpoint.id == Delivery.endpoint_id)
        .where(
            tuple_(Delivery.endpoint_id, Delivery.event_seq).in_(heads),
            pending,
            active,
            Delivery.next_attempt_at <= cutoff,
        )
        .order_by(Delivery.next_attempt_at, Delivery.event_seq)
        .limit(1)
    )
    if lock:
        stmt = stmt.with_for_update(of=Delivery, skip_locked=True)
    row = conn.execute(stmt).first()
    return None if row is None else Job(*row)


class Poster(AbstractContextManager["Poster"]):
    """Posts jobs for one deliverer thread: its own event loop and HTTP client, so that a whole post
    (connect, send, read the answer) can be put under one deadline and cancelled when it is missed."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._runner = asyncio.Runner()
        timeout = httpx.Timeout(settings.webhooks_timeout_s)
        self._client = httpx.AsyncClient(
            timeout=timeout, follow_redirects=False, trust_env=False, verify=tls_context(settings)
        )

    def post(self, job: Job) -> Outcome:
        """The attempt's outcome; never raises (an unexpected error is a failed attempt like any other,
        so it is recorded and backed off instead of retried at once, ahead of every other endpoint)."""
        try:
            return self._runner.run(_post(self._client, job, self.settings))
        except Exception as exc:
            log.exception("unexpected error posting %s to endpoint %d", job.event_id, job.endpoint_id)
            return Outcome(None, f"unexpected error: {type(exc).__name__}: {exc}")

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._runner.run(self._client.aclose())
        finally:
            self._runner.close()


def tls_context(settings: Settings) -> ssl.SSLContext:
    """How https receivers are checked: certificate chain to a trusted CA (certifi's, plus
    `CARDCAT_WEBHOOKS_CA_FILE`) and the certificate's name against the endpoint's host name, which is
    also the SNI sent, although the connection goes to the address that was checked, not re-resolved."""
    context = ssl.create_default_context(cafile=certifi.where())
    if settings.webhooks_ca_file:
        context.load_verify_locations(cafile=settings.webhooks_ca_file)
    return context


async def _post(client: httpx.AsyncClient, job: Job, settings: Settings) -> Outcome:
    try:
        target = endpoint_target(job.url)
        addresses = resolve(target, settings.webhooks_allow_private)
    except URLRefused as exc:
        return Outcome(None, str(exc))
    deadline = settings.webhooks_timeout_s
    try:
        async with asyncio.timeout(deadline):
            return await _send(client, job, target, addresses)
    except TimeoutError:
        return Outcome(None, f"no complete answer within the {deadline:g} s deadline")


async def _send(client: httpx.AsyncClient, job: Job, target: Target, addresses: list[IPAddress]) -> Outcome:
    # identity: the error page snippet we keep is read raw, so a compressed reply is never inflated.
    headers = {
        **signed_headers(job.secret, job.event_id, job.body),
        "host": target.host_header,
        "accept-encoding": "identity",
    }
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    last_error = "no address to connect to"
    for ip in addresses:
        request = client.build_request(
            "POST", target.url_for(ip), content=job.body.encode(), headers=headers, extensions=extensions
        )
        try:
            response = await client.send(request, stream=True)
        except httpx.ConnectError as exc:
            last_error = f"connection failed: {exc}"
            continue  # the next checked address
        except httpx.HTTPError as exc:
            return Outcome(None, f"{type(exc).__name__}: {exc}")
        try:
            return await _outcome(response)
        finally:
            await response.aclose()
    return Outcome(None, last_error)


async def _outcome(response: httpx.Response) -> Outcome:
    status = response.status_code
    if 200 <= status < 300:
        return Outcome(status)
    if 300 <= status < 400:
        location = response.headers.get("location", "")
        return Outcome(status, f"HTTP {status} redirect to {location[:200]!r} not followed")
    snippet = b""
    try:
        async for part in response.aiter_raw():
            snippet += part
            if len(snippet) >= 200:
                break
    except httpx.HTTPError:
        pass
    text = snippet[:200].decode("utf-8", "replace").strip()
    retry_after = parse_retry_after(response.headers.get("retry-after"), datetime.now(UTC))
    return Outcome(status, f"HTTP {status}" + (f": {text}" if text else ""), retry_after)


def _record(conn: Connection, job: Job, outcome: Outcome, settings: Settings) -> str:
    """Store the attempt's result; returns what became of it (delivered, retry, disabled)."""
    now = datetime.now(UTC)
    attempts = job.attempts + 1
    error = None if outcome.error is None else _clean(outcome.error)
    values: dict[str, Any] = {"attempts": attempts, "last_status": outcome.status, "last_error": error}
    reason = None
    if outcome.delivered:
        values["delivered_at"] = now
        result = "delivered"
    elif outcome.status == 410:
        reason = f"the receiver answered 410 Gone to {job.event_id} at {now.isoformat(timespec='seconds')}"
        result = "disabled"
    elif attempts >= settings.webhooks_max_attempts:
        reason = f"gave up on {job.event_id} after {attempts} failed attempts (last: {error})"
        result = "disabled"
    else:
        delay = backoff_s(attempts, settings, outcome.retry_after)
        values["next_attempt_at"] = now + timedelta(seconds=delay)
        result = "retry"
    conn.execute(update(Delivery).where(Delivery.id == job.delivery_id).values(**values))
    if reason is not None:
        conn.execute(
            update(WebhookEndpoint)
            .where(WebhookEndpoint.id == job.endpoint_id, WebhookEndpoint.disabled_at.is_(None))
            .values(disabled_at=now, disabled_reason=reason)
        )
    return result


class Deliverer:
    """Drains due deliveries: `run(once=True)` what is due when it starts, else until `stop` is set."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings
        # Row locks are what make several workers safe; SQLite has none, so it gets one worker.
        self.locking = engine.dialect.name == "postgresql"
        self.workers = max(1, settings.webhooks_concurrency) if self.locking else 1
        self.counts = {"delivered": 0, "retry": 0, "disabled": 0}
        self._lock = threading.Lock()
        # Secrets are stored sealed (secret_box); a missing key fails here, at start, not per post.
        self.box = webhook_box(settings)

    def deliver_one(self, poster: Poster, cutoff: datetime) -> bool:
        """Claim, post and record one delivery; False when none is due."""
        with self.engine.connect() as conn:
            job = _claim(conn, cutoff, self.locking)
            if job is None:
                conn.rollback()
                return False
            if not self.locking:
                conn.rollback()  # SQLite: hold no read snapshot (and so no writer out) across the post
            started = time.perf_counter()
            try:
                job = replace(job, secret=self.box.open(job.secret))
            except SealError as exc:
                outcome = Outcome(None, str(exc))  # never posted unsigned; retried like any failure
            else:
                outcome = poster.post(job)
            WEBHOOK_POST_LATENCY.observe(time.perf_counter() - started)
            result = _record(conn, job, outcome, self.settings)
            conn.commit()
        # Counted once recorded: `/metrics` (through PROMETHEUS_MULTIPROC_DIR when `cardcat serve` runs
        # this deliverer, or `cardcat events deliver --metrics-port`) agrees with the table.
        WEBHOOK_DELIVERIES.labels(result).inc()
        if not outcome.delivered:
            WEBHOOK_FAILURES.labels("no_answer" if outcome.status is None else "http_status").inc()
        with self._lock:
            self.counts[result] += 1
        log.info(
            "%s to endpoint %d: %s (%s)",
            job.event_id,
            job.endpoint_id,
            result,
            # The receiver's reply is in the error: escaped and cut, so it cannot forge or flood lines.
            outcome.status if outcome.error is None else loggable(outcome.error),
        )
        return True

    def _work(
        self, once: bool, stop: threading.Event, alive: Callable[[], bool], errors: list[BaseException]
    ) -> None:
        started = datetime.now(UTC)
        with Poster(self.settings) as poster:
            while not stop.is_set() and alive():
                try:
                    busy = self.deliver_one(poster, started if once else datetime.now(UTC))
                except Exception as exc:
                    if once:
                        errors.append(exc)
                        return
                    # A database error (e.g. SQLite busy behind a long sync; posting never raises):
                    # nothing was recorded, so the delivery is simply claimed (and, if it was posted,
                    # sent) again.
                    unexpected = not isinstance(exc, SQLAlchemyError)
                    log.warning("delivery failed, retrying: %s", exc, exc_info=unexpected)
                    busy = False
                if not busy:
                    if once:
                        return
                    stop.wait(self.settings.webhooks_poll_s)

    def _reseal(self) -> None:
        """Seal secrets an older version stored in plain text (or an old key sealed) before posting."""
        try:
            resealed = reseal_secrets(self.engine, self.box)
        except SQLAlchemyError as exc:
            log.warning("could not re-encrypt webhook secrets now (the next start will): %s", exc)
            return
        if resealed.changed:
            log.info("encrypted %d webhook secrets with the current key", resealed.changed)
        if resealed.unreadable:
            log.error("webhook secrets of endpoints %s open with no key configured", resealed.unreadable)

    def run(
        self,
        once: bool = False,
        stop: threading.Event | None = None,
        alive: Callable[[], bool] = lambda: True,
    ) -> dict[str, int]:
        stop = stop or threading.Event()
        self._reseal()
        errors: list[BaseException] = []
        threads = [
            threading.Thread(target=self._work, args=(once, stop, alive, errors), name=f"deliver-{i}")
            for i in range(self.workers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        return dict(self.counts)
