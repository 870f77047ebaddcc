"""The batch queue's guarantees on both real databases (catalog_api.batches.queue, #44 item 2): a photo
is leased to one worker at a time, answered exactly once, taken again when its worker dies, and batches
take turns. The scanner is not needed for these; tests/serve_app/test_batches.py runs batches through
the real server and scanner."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from cardcat.stack import Database, create_database
from catalog_api.access.keys import create_key
from catalog_api.batches import queue
from catalog_api.batches.tables import BatchPhoto, ScanBatch
from catalog_api.kit.db import make_async_engine, make_engine
from catalog_api.kit.settings import Settings
from catalog_api.migrate import alembic_config

LEASE_S = 60.0


@dataclass
class QueueDatabase:
    settings: Settings
    key_id: int  # the API key the tests' batches belong to


@pytest.fixture(scope="module", params=["postgresql", "sqlite"])
def database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[QueueDatabase]:
    """A database of its own (so no other test's batch is in the queue), migrated in this process."""
    tmp = tmp_path_factory.mktemp(f"queue-{request.param}")
    db: Database = create_database(request.param, tmp)
    settings = Settings(database_url=db.url, data_dir=tmp / "data")
    engine = make_engine(settings)
    with engine.begin() as conn:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
    key = create_key(engine, "queue-test")[1]
    engine.dispose()
    yield QueueDatabase(settings, key.id)
    if db.drop:
        db.drop()


def run(database: QueueDatabase, work: Any) -> Any:
    """`work(engine)` on a new async engine; the queue is empty again afterwards (every batch left
    active is cancelled), so each test sees only its own photos."""

    async def main() -> Any:
        engine = make_async_engine(database.settings)
        try:
            return await work(engine)
        finally:
            async with engine.begin() as conn:
                for row in (
                    await conn.execute(select(ScanBatch).where(ScanBatch.status.in_(queue.ACTIVE)))
                ).all():
                    await queue.cancel_batch(conn, row)
            await engine.dispose()

    return asyncio.run(main())


async def new_batch(engine: AsyncEngine, database: QueueDatabase, photos: int, *, close: bool = True) -> str:
    urls = [f"https://example.com/{index}.jpg" for index in range(photos)]
    async with engine.begin() as conn:
        return await queue.create_batch(
            conn,
            database.key_id,
            page=False,
            ttl_s=3600,
            photos=[queue.NewPhoto(u, u) for u in urls],
            close=close,
        )


async def batch_row(engine: AsyncEngine, batch_id: str) -> Any:
    async with engine.connect() as conn:
        return (await conn.execute(queue.select_batch(batch_id))).one()


def answer_body(photo: queue.Claimed) -> dict[str, Any]:
    return {"index": photo.position, "name": photo.name, "matches": [], "error": None}


def test_each_photo_goes_to_one_worker_and_answers_number_in_the_order_given(database: QueueDatabase) -> None:
    async def work(engine: AsyncEngine) -> None:
        batch_id = await new_batch(engine, database, 3)
        first = await queue.claim(engine, "worker-a", LEASE_S, 2)
        second = await queue.claim(engine, "worker-b", LEASE_S, 2)
        assert [p.position for p in first] == [0, 1] and [p.position for p in second] == [2]
        assert await queue.claim(engine, "worker-c", LEASE_S, 2) == []
        assert (await batch_row(engine, batch_id)).status == queue.RUNNING
        # Answered out of order: results come in the order of the answers, each once.
        for photo, owner in ((first[1], "worker-a"), (second[0], "worker-b"), (first[0], "worker-a")):
            assert await queue.answer(engine, photo, owner, "match", answer_body(photo))
        async with engine.connect() as conn:
            answers = await queue.answers_after(conn, batch_id, 0, 10)
            assert [sequence for sequence, _ in answers] == [1, 2, 3]
            assert [body["index"] for _, body in answers] == [1, 2, 0]
            assert [body["index"] for _, body in await queue.answers_after(conn, batch_id, 2, 10)] == [0]
            assert (await queue.outcome_counts(conn, batch_id))["match"] == 3
        finished = await batch_row(engine, batch_id)
        assert finished.status == queue.DONE and finished.answered == 3 and finished.finished_at is not None

    run(database, work)


def test_a_dead_workers_photo_is_taken_again_and_answered_once(database: QueueDatabase) -> None:
    async def work(engine: AsyncEngine) -> None:
        batch_id = await new_batch(engine, database, 1)
        [lost] = await queue.claim(engine, "dies", 0.2, 1)
        assert await queue.claim(engine, "waits", LEASE_S, 1) == []  # the lease still holds
        time.sleep(0.3)
        [taken] = await queue.claim(engine, "survives", LEASE_S, 1)
        assert (taken.id, taken.attempts) == (lost.id, 2)
        # The worker that was thought dead answers late: refused, nothing written.
        assert not await queue.answer(engine, lost, "dies", "match", answer_body(lost))
        assert await queue.answer(engine, taken, "survives", "race", answer_body(taken))
        assert not await queue.answer(engine, taken, "survives", "race", answer_body(taken))  # not twice
        async with engine.connect() as conn:
            assert len(await queue.answers_after(conn, batch_id, 0, 10)) == 1
            assert (await queue.outcome_counts(conn, batch_id))["race"] == 1
        assert (await batch_row(engine, batch_id)).status == queue.DONE

    run(database, work)


def test_a_photo_given_back_is_taken_again_without_counting_a_try(database: QueueDatabase) -> None:
    async def work(engine: AsyncEngine) -> None:
        await new_batch(engine, database, 1)
        [photo] = await queue.claim(engine, "a", LEASE_S, 1)
        await queue.release(engine, photo, "a")
        [again] = await queue.claim(engine, "b", LEASE_S, 1)
        assert (again.id, again.attempts) == (photo.id, 1)

    run(database, work)


def test_batches_take_turns(database: QueueDatabase) -> None:
    async def work(engine: AsyncEngine) -> None:
        first = await new_batch(engine, database, 3)
        second = await new_batch(engine, database, 3)
        taken = []
        for _ in range(6):
            [photo] = await queue.claim(engine, "w", LEASE_S, 1)
            taken.append(photo.batch_id)
            assert await queue.answer(engine, photo, "w", "match", answer_body(photo))
        assert taken == [first, second] * 3

    run(database, work)


def test_an_open_batch_is_scanned_as_photos_arrive_and_done_when_closed(database: QueueDatabase) -> None:
    async def work(engine: AsyncEngine) -> None:
        batch_id = await new_batch(engine, database, 0, close=False)
        async with engine.begin() as conn:
            assert await queue.append_photos(conn, batch_id, [queue.NewPhoto("a.jpg")]) == [0]
            assert await queue.append_photos(
                conn, batch_id, [queue.NewPhoto("b.jpg"), queue.NewPhoto("c.jpg")]
            ) == [1, 2]
        for _ in range(3):
            [photo] = await queue.claim(engine, "w", LEASE_S, 1)
            assert await queue.answer(engine, photo, "w", "match", answer_body(photo))
        assert (await batch_row(engine, batch_id)).status == queue.OPEN  # more photos may come
        async with engine.begin() as conn:
            await queue.close_batch(conn, await batch_row(engine, batch_id))
        assert (await batch_row(engine, batch_id)).status == queue.DONE

    run(database, work)


def test_a_cancelled_batch_drops_its_photos_and_refuses_late_answers(database: QueueDatabase) -> None:
    async def work(engine: AsyncEngine) -> None:
        batch_id = await new_batch(engine, database, 2)
        [photo] = await queue.claim(engine, "w", LEASE_S, 1)
        for cancelled in (True, False):  # a second cancel changes nothing
            async with engine.begin() as conn:
                assert await queue.cancel_batch(conn, await batch_row(engine, batch_id)) is cancelled
        assert not await queue.answer(engine, photo, "w", "match", answer_body(photo))
        assert await queue.claim(engine, "w", LEASE_S, 1) == []
        async with engine.connect() as conn:
            states = (
                await conn.execute(select(BatchPhoto.state).where(BatchPhoto.batch_id == batch_id))
            ).scalars()
            assert sorted(states) == [queue.CANCELLED, queue.CANCELLED]
        assert (await batch_row(engine, batch_id)).status == queue.CANCELLED

    run(database, work)


def test_an_old_batch_expires_with_its_photos(database: QueueDatabase) -> None:
    async def work(engine: AsyncEngine) -> None:
        async with engine.begin() as conn:
            batch_id = await queue.create_batch(
                conn, database.key_id, page=False, ttl_s=0, photos=[queue.NewPhoto("a.jpg")], close=False
            )
        assert batch_id in await queue.expire(engine)
        assert (await batch_row(engine, batch_id)).status == queue.EXPIRED
        assert await queue.claim(engine, "w", LEASE_S, 1) == []
        assert await queue.finished_among(engine, [batch_id, "bat_" + "0" * 24]) == {
            batch_id,
            "bat_" + "0" * 24,
        }

    run(database, work)


def test_workers_claiming_at_once_never_share_a_photo(database: QueueDatabase) -> None:
    async def work(engine: AsyncEngine) -> None:
        await new_batch(engine, database, 24)

        async def worker(name: str) -> list[int]:
            ids = []
            while photos := await queue.claim(engine, name, LEASE_S, 2):
                for photo in photos:
                    ids.append(photo.id)
                    assert await queue.answer(engine, photo, name, "match", answer_body(photo))
            return ids

        taken = await asyncio.gather(*(worker(f"w{n}") for n in range(4)))
        every = [photo for ids in taken for photo in ids]
        assert len(every) == 24 and len(set(every)) == 24

    run(database, work)


def test_the_photo_budget_counts_a_keys_recent_batches(database: QueueDatabase) -> None:
    async def work(engine: AsyncEngine) -> None:
        since = queue.now()
        await new_batch(engine, database, 5)
        await new_batch(engine, database, 2, close=False)
        async with engine.connect() as conn:
            assert await queue.photos_added_since(conn, database.key_id, since) == 7
            assert await queue.photos_added_since(conn, -1, since) == 0

    run(database, work)


def test_photo_files_are_named_by_batch_id_only(tmp_path: Path) -> None:
    """A batch id reaches the file system only in our own format: anything else is refused."""
    from catalog_api.batches import photo_files

    settings = Settings(data_dir=tmp_path)
    assert (
        photo_files.photo_path(settings, "bat_" + "a" * 24, 7)
        == tmp_path / "batches" / ("bat_" + "a" * 24) / "7"
    )
    for bad in ("../x", "bat_" + "a" * 23, "bat_" + "A" * 24, "bat_" + "a" * 24 + "/..", ""):
        with pytest.raises(ValueError):
            photo_files.batch_dir(settings, bad)
