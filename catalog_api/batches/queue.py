"""The batch queue: every SQL statement on the batches room's tables.

Why a table in our own database and not a broker: the photos' answers must be written exactly once and
survive a worker's death, a database restart and a scanner's loss, and they live in the database the
API reads them from. A lease in the same row as the answer makes that one transaction: a worker takes
photos by setting `lease_owner`/`lease_until` (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so workers never
wait on each other's photos; SQLite: one statement, which SQLite serialises), and answers a photo only
while the lease is still its own, in the transaction that ends it. A worker that dies holds its photos
until `lease_until`, then any worker takes them again. Nothing is acknowledged anywhere else, so there
is nothing to lose between two systems (docs/batches.md has the comparison with Redis and the
PostgreSQL queue libraries).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, case, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from catalog_api.access.tables import ApiKey
from catalog_api.batches.tables import BatchPhoto, ScanBatch
from catalog_api.events import outbox
from core.errors import Conflict, NotFound

# Batch states. A batch takes photos while `open`; its photos are scanned as soon as they arrive.
OPEN, QUEUED, RUNNING, DONE, CANCELLED, EXPIRED = "open", "queued", "running", "done", "cancelled", "expired"
STATUSES = (OPEN, QUEUED, RUNNING, DONE, CANCELLED, EXPIRED)
ACTIVE = (OPEN, QUEUED, RUNNING)
FINISHED = (DONE, CANCELLED, EXPIRED)
# Photo states.
PENDING, LEASED, ANSWERED = "pending", "leased", "done"
# Events (docs/events.md): the batch finished, the batch expired unfinished, a photo answered (when the
# batch asked for `events: "per_photo"`).
COMPLETED_EVENT, FAILED_EVENT, RESULT_EVENT = "scan.batch.completed", "scan.batch.failed", "scan.result"
PER_PHOTO = "per_photo"
EVENT_MODES = ("batch", PER_PHOTO)
# A photo whose scan took its worker down this many times is answered `internal` instead of a fourth try.
MAX_ATTEMPTS = 3
# The outcomes a batch counts its answers by (`match`, `race`, the unidentified reasons, `error`).
OUTCOMES = ("match", "race", "print_unreadable", "no_confident_match", "error")
# ...and by confidence tier (`analysis.tier`; an error is `review`).
TIERS = ("certain", "likely", "review")


def now() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """SQLite hands timestamps back without their zone; they were written in UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def select_batch(batch_id: str) -> Any:
    return select(ScanBatch).where(ScanBatch.id == batch_id)


# What `new_batch_id` makes; any other id names no batch (refused before it reaches SQL or a path).
BATCH_ID = re.compile(r"bat_[0-9a-f]{24}")


def new_batch_id() -> str:
    """Unguessable, though a key sees only its own batches anyway."""
    return "bat_" + secrets.token_hex(12)


@dataclass(frozen=True)
class NewPhoto:
    """A photo to add: its name (the upload's file name, or the URL), and its URL when fetched later."""

    name: str
    url: str | None = None


@dataclass(frozen=True)
class Claimed:
    """A photo a worker holds the lease on."""

    id: int
    batch_id: str
    position: int
    name: str
    url: str | None
    attempts: int


async def create_batch(
    conn: AsyncConnection,
    key_id: int,
    *,
    page: bool,
    ttl_s: int,
    photos: list[NewPhoto],
    close: bool,
    events: str = "batch",
) -> str:
    """A new batch holding `photos` (positions 0..n-1), closed at once when `close` (a URL batch)."""
    batch_id, moment = new_batch_id(), now()
    await conn.execute(
        insert(ScanBatch).values(
            id=batch_id,
            key_id=key_id,
            status=(QUEUED if photos else DONE) if close else OPEN,
            page=page,
            events=events,
            photo_count=0,
            answered=0,
            created_at=moment,
            closed_at=moment if close else None,
            finished_at=moment if close and not photos else None,
            expires_at=moment + timedelta(seconds=ttl_s),
        )
    )
    await append_photos(conn, batch_id, photos)
    return batch_id


async def append_photos(conn: AsyncConnection, batch_id: str, photos: list[NewPhoto]) -> list[int]:
    """Adds `photos` after the batch's last one; returns their positions. The batch row is updated first,
    so two uploads to one batch at once are given positions one after the other (its row lock)."""
    if not photos:
        return []
    row = (
        await conn.execute(
            update(ScanBatch)
            .where(ScanBatch.id == batch_id)
            .values(photo_count=ScanBatch.photo_count + len(photos))
            .returning(ScanBatch.photo_count)
        )
    ).one()
    first = int(row.photo_count) - len(photos)
    positions = list(range(first, first + len(photos)))
    await conn.execute(
        insert(BatchPhoto),
        [
            {"batch_id": batch_id, "position": position, "name": photo.name, "url": photo.url,
             "state": PENDING, "attempts": 0}
            for position, photo in zip(positions, photos, strict=True)
        ],
    )  # fmt: skip
    return positions


async def owned_batch(conn: AsyncConnection, batch_id: str, key_id: int, *, lock: bool = False) -> Any:
    """The batch row when it is `key_id`'s; `NotFound` otherwise (another key's batch does not exist
    for this one). `lock`: the row locked for the transaction (PostgreSQL), as changes to it need."""
    if not BATCH_ID.fullmatch(batch_id):
        raise NotFound(f"No scan batch '{batch_id[:40]}'.")
    query = select(ScanBatch).where(ScanBatch.id == batch_id, ScanBatch.key_id == key_id)
    row = (await conn.execute(query.with_for_update() if lock else query)).first()
    if row is None:
        raise NotFound(f"No scan batch '{batch_id}'.")
    return row


async def any_batch(conn: AsyncConnection, batch_id: str, *, lock: bool = False) -> Any:
    """The batch row whoever owns it (the operator's CLI); `NotFound` when there is none."""
    if not BATCH_ID.fullmatch(batch_id):
        raise NotFound(f"No scan batch '{batch_id[:40]}'.")
    query = select_batch(batch_id)
    row = (await conn.execute(query.with_for_update() if lock else query)).first()
    if row is None:
        raise NotFound(f"No scan batch '{batch_id}'.")
    return row


async def list_batches(conn: AsyncConnection, status: str | None, limit: int) -> list[Any]:
    """The newest batches (rows of the batch's columns and its key's public `prefix`), optionally of one
    status."""
    query = (
        select(*ScanBatch.__table__.c, ApiKey.prefix)
        .join(ApiKey, ApiKey.id == ScanBatch.key_id)
        .order_by(ScanBatch.created_at.desc(), ScanBatch.id)
        .limit(limit)
    )
    if status is not None:
        query = query.where(ScanBatch.status == status)
    return list((await conn.execute(query)).all())


def require_open(batch: Any) -> None:
    if batch.status != OPEN:
        raise Conflict(f"Scan batch '{batch.id}' is {batch.status}: it takes no more photos.")


async def close_batch(conn: AsyncConnection, batch: Any) -> None:
    """No more photos; `done` at once when every photo is answered already (or there are none)."""
    if batch.status != OPEN:
        return  # closing twice, or a finished batch: nothing changes
    moment = now()
    finished = batch.answered >= batch.photo_count
    await conn.execute(
        update(ScanBatch)
        .where(ScanBatch.id == batch.id)
        .values(
            status=DONE if finished else (RUNNING if batch.answered or batch.started_at else QUEUED),
            closed_at=moment,
            finished_at=moment if finished else None,
        )
    )


async def cancel_batch(conn: AsyncConnection, batch: Any) -> bool:
    """Stops a batch that has not finished: its unanswered photos are dropped (a worker still scanning
    one finds its lease gone and discards the answer). False when it had finished already."""
    if batch.status in FINISHED:
        return False
    moment = now()
    await conn.execute(
        update(ScanBatch)
        .where(ScanBatch.id == batch.id)
        .values(status=CANCELLED, finished_at=moment, closed_at=batch.closed_at or moment)
    )
    await conn.execute(
        update(BatchPhoto)
        .where(BatchPhoto.batch_id == batch.id, BatchPhoto.state.in_((PENDING, LEASED)))
        .values(state=CANCELLED, lease_owner=None, lease_until=None)
    )
    return True


async def outcome_counts(conn: AsyncConnection, batch_id: str) -> dict[str, int]:
    query = (
        select(BatchPhoto.outcome, func.count())
        .where(BatchPhoto.batch_id == batch_id, BatchPhoto.state == ANSWERED)
        .group_by(BatchPhoto.outcome)
    )
    counts = dict.fromkeys(OUTCOMES, 0)
    for outcome, count in (await conn.execute(query)).all():
        counts[str(outcome)] = counts.get(str(outcome), 0) + int(count)
    return counts


async def tier_counts(conn: AsyncConnection, batch_id: str) -> dict[str, int]:
    """Answered photos by confidence tier (`analysis.tier`): what goes to inventory, what to a person."""
    query = (
        select(BatchPhoto.tier, func.count())
        .where(BatchPhoto.batch_id == batch_id, BatchPhoto.state == ANSWERED)
        .group_by(BatchPhoto.tier)
    )
    counts = dict.fromkeys(TIERS, 0)
    for tier, count in (await conn.execute(query)).all():
        counts[str(tier or "review")] += int(count)
    return counts


async def answers_after(
    conn: AsyncConnection, batch_id: str, after: int, limit: int
) -> list[tuple[int, dict[str, Any]]]:
    """Up to `limit` answers numbered after `after`, in the order they were given: `(sequence, answer)`."""
    query = (
        select(BatchPhoto.sequence, BatchPhoto.answer)
        .where(BatchPhoto.batch_id == batch_id, BatchPhoto.sequence > after)
        .order_by(BatchPhoto.sequence)
        .limit(limit)
    )
    return [(int(sequence), dict(answer)) for sequence, answer in (await conn.execute(query)).all()]


async def photos_added_since(conn: AsyncConnection, key_id: int, since: datetime) -> int:
    """Photos in the key's batches opened since `since`: what its daily photo budget counts."""
    query = select(func.coalesce(func.sum(ScanBatch.photo_count), 0)).where(
        ScanBatch.key_id == key_id, ScanBatch.created_at >= since
    )
    return int((await conn.execute(query)).scalar_one())


def _claimable(moment: datetime) -> Any:
    return or_(
        BatchPhoto.state == PENDING,
        and_(BatchPhoto.state == LEASED, BatchPhoto.lease_until < moment),
    )


async def claim(engine: AsyncEngine, owner: str, lease_s: float, count: int) -> list[Claimed]:
    """Leases up to `count` photos of one batch to `owner`: the active batch served longest ago (so
    batches, and the keys behind them, take turns), in the order its photos were added."""
    moment = now()
    async with engine.begin() as conn:
        waiting = select(BatchPhoto.id).where(BatchPhoto.batch_id == ScanBatch.id, _claimable(moment))
        batch_id = (
            await conn.execute(
                select(ScanBatch.id)
                .where(ScanBatch.status.in_(ACTIVE), waiting.exists())
                .order_by(ScanBatch.served_at.asc().nulls_first(), ScanBatch.created_at, ScanBatch.id)
                .limit(1)
            )
        ).scalar()
        if batch_id is None:
            return []
        # Locked here (PostgreSQL; skipping photos another worker is taking) and updated by id: as one
        # `UPDATE ... WHERE id IN (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED)` PostgreSQL may run the
        # subquery again for each row and take more than n. The update checks again that each photo is
        # free, so on SQLite, which has no row locks, a photo two workers chose goes to the first.
        chosen = list(
            (
                await conn.execute(
                    select(BatchPhoto.id)
                    .where(BatchPhoto.batch_id == batch_id, _claimable(moment))
                    .order_by(BatchPhoto.position)
                    .limit(count)
                    .with_for_update(skip_locked=True)
                )
            ).scalars()
        )
        if not chosen:
            return []
        rows = (
            await conn.execute(
                update(BatchPhoto)
                .where(BatchPhoto.id.in_(chosen), _claimable(moment))
                .values(
                    state=LEASED,
                    lease_owner=owner,
                    lease_until=moment + timedelta(seconds=lease_s),
                    attempts=BatchPhoto.attempts + 1,
                )
                .returning(
                    BatchPhoto.id, BatchPhoto.batch_id, BatchPhoto.position, BatchPhoto.name,
                    BatchPhoto.url, BatchPhoto.attempts,
                )
            )
        ).all()  # fmt: skip
        if rows:
            await conn.execute(
                update(ScanBatch)
                .where(ScanBatch.id == batch_id)
                .values(
                    served_at=moment,
                    started_at=func.coalesce(ScanBatch.started_at, moment),
                    status=_started_status(),
                )
            )
    claimed = [Claimed(row.id, row.batch_id, row.position, row.name, row.url, row.attempts) for row in rows]
    return sorted(claimed, key=lambda photo: photo.position)


def _started_status() -> Any:
    """`queued` becomes `running` once a photo is taken; `open` stays open until it is closed."""
    return case((ScanBatch.status == QUEUED, RUNNING), else_=ScanBatch.status)


async def release(engine: AsyncEngine, photo: Claimed, owner: str) -> None:
    """Gives a photo back unanswered (the scanner was unavailable): pending again, the try not counted."""
    async with engine.begin() as conn:
        await conn.execute(
            update(BatchPhoto)
            .where(BatchPhoto.id == photo.id, BatchPhoto.state == LEASED, BatchPhoto.lease_owner == owner)
            .values(state=PENDING, lease_owner=None, lease_until=None, attempts=BatchPhoto.attempts - 1)
        )


async def answer(engine: AsyncEngine, photo: Claimed, owner: str, outcome: str, body: dict[str, Any]) -> bool:
    """Writes a photo's answer if `owner` still holds its lease, numbering it in the batch's order of
    answers, and finishes the batch with its last answer. False (nothing written) when the lease was
    lost: the batch was cancelled or expired, or the lease ran out and another worker took the photo."""
    moment = now()
    async with engine.begin() as conn:
        taken = await conn.execute(
            update(BatchPhoto)
            .where(BatchPhoto.id == photo.id, BatchPhoto.state == LEASED, BatchPhoto.lease_owner == owner)
            .values(
                state=ANSWERED,
                lease_owner=None,
                lease_until=None,
                outcome=outcome,
                tier=(body.get("analysis") or {}).get("tier", "review"),
                answered_at=moment,
            )
        )
        if taken.rowcount != 1:
            return False
        # The batch's row lock orders the answers of one batch: each gets the next number, and the last
        # one sees every other and finishes the batch.
        batch = (
            await conn.execute(
                update(ScanBatch)
                .where(ScanBatch.id == photo.batch_id)
                .values(answered=ScanBatch.answered + 1)
                .returning(ScanBatch.answered, ScanBatch.photo_count, ScanBatch.status, ScanBatch.events)
            )
        ).one()
        await conn.execute(
            update(BatchPhoto).where(BatchPhoto.id == photo.id).values(sequence=batch.answered, answer=body)
        )
        if batch.events == PER_PHOTO:  # in the answer's transaction: in the order of the answers
            data = {"batch_id": photo.batch_id, "sequence": batch.answered}
            await _emit(conn, RESULT_EVENT, "result", [body], data)
        if batch.status in (QUEUED, RUNNING) and batch.answered >= batch.photo_count:
            finish = update(ScanBatch).where(ScanBatch.id == photo.batch_id)
            await conn.execute(finish.values(status=DONE, finished_at=moment))
            await _emit(conn, COMPLETED_EVENT, "batch", [await describe(conn, photo.batch_id)])
    return True


async def _emit(
    conn: AsyncConnection, name: str, key: str, records: list[Any], extra: dict[str, Any] | None = None
) -> None:
    """An event through the signed webhook outbox, in this transaction (events.outbox)."""
    await conn.run_sync(lambda sync: outbox.emit(sync, name, key, records, extra))


async def expire(engine: AsyncEngine) -> list[str]:
    """Batches past their `expires_at` and not finished become `expired`, their unanswered photos with
    them; returns their ids (their files are the caller's to delete)."""
    moment = now()
    async with engine.begin() as conn:
        ids = list(
            (
                await conn.execute(
                    update(ScanBatch)
                    .where(ScanBatch.status.in_(ACTIVE), ScanBatch.expires_at < moment)
                    .values(status=EXPIRED, finished_at=moment)
                    .returning(ScanBatch.id)
                )
            ).scalars()
        )
        if ids:
            await conn.execute(
                update(BatchPhoto)
                .where(BatchPhoto.batch_id.in_(ids), BatchPhoto.state.in_((PENDING, LEASED)))
                .values(state=EXPIRED, lease_owner=None, lease_until=None)
            )
            for batch_id in ids:
                await _emit(
                    conn, FAILED_EVENT, "batch", [await describe(conn, batch_id)], {"reason": EXPIRED}
                )
    return ids


async def finished_among(engine: AsyncEngine, batch_ids: list[str]) -> set[str]:
    """Which of `batch_ids` are finished or no longer exist (their photo files can go)."""
    if not batch_ids:
        return set()
    async with engine.connect() as conn:
        rows = (
            await conn.execute(select(ScanBatch.id, ScanBatch.status).where(ScanBatch.id.in_(batch_ids)))
        ).all()
    active = {batch_id for batch_id, status in rows if status in ACTIVE}
    return set(batch_ids) - active


async def unanswered_positions(engine: AsyncEngine, batch_id: str) -> set[int]:
    """Positions of the batch's photos still waiting or being scanned (their files must stay)."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(BatchPhoto.position).where(
                BatchPhoto.batch_id == batch_id, BatchPhoto.state.in_((PENDING, LEASED))
            )
        )
        return {int(position) for position in rows.scalars()}


async def describe(conn: AsyncConnection, batch_id: str) -> dict[str, Any]:
    """A batch as the API (and its events) show it: status, photo counts, outcomes, progress, times."""
    batch = (await conn.execute(select_batch(batch_id))).one()
    waiting = 0 if batch.status in FINISHED else batch.photo_count - batch.answered
    return {
        "id": batch.id,
        "status": batch.status,
        "page": batch.page,
        "events": batch.events,
        "photos": {"total": batch.photo_count, "answered": batch.answered, "waiting": waiting},
        "outcomes": await outcome_counts(conn, batch_id),
        "tiers": await tier_counts(conn, batch_id),
        "progress": _progress(batch),
        "created_at": _iso(batch.created_at),
        "closed_at": _iso(batch.closed_at),
        "started_at": _iso(batch.started_at),
        "finished_at": _iso(batch.finished_at),
        "expires_at": _iso(batch.expires_at),
    }


def _progress(batch: Any) -> float:
    if batch.photo_count:
        return round(batch.answered / batch.photo_count, 4)
    return 1.0 if batch.status in FINISHED else 0.0


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else outbox.timestamp(as_utc(moment))
