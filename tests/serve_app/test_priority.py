"""The Detector's gate between users' scans and batch photos (`serve_app.priority`), on a clock the test
moves, so each check says exactly when a batch photo gets in."""

from __future__ import annotations

import asyncio

import pytest

from serve_app.priority import InteractiveFirst


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def _hold(gate: InteractiveFirst, entered: list[int], name: int, release: asyncio.Event) -> None:
    async with gate.background():
        entered.append(name)
        await release.wait()


def test_with_no_users_batch_photos_take_every_idle_slot_and_wait_for_the_next():
    async def run() -> None:
        gate, entered, release = InteractiveFirst(1, 3, 0.5, Clock()), [], asyncio.Event()
        tasks = [asyncio.create_task(_hold(gate, entered, n, release)) for n in range(5)]
        await _settle()
        assert entered == [0, 1, 2] and gate.traffic().background_waiting == 2
        release.set()
        await asyncio.gather(*tasks)
        assert entered == [0, 1, 2, 3, 4] and gate.traffic().background == 5

    asyncio.run(run())


def test_while_a_user_scans_one_batch_photo_gets_in_and_the_rest_wait_out_the_quiet_time():
    async def run() -> None:
        clock = Clock()
        gate, entered, release = InteractiveFirst(1, 4, 0.5, clock), [], asyncio.Event()
        async with gate.interactive():
            tasks = [asyncio.create_task(_hold(gate, entered, n, release)) for n in range(3)]
            await _settle()
            assert entered == [0], "a user's scan in flight leaves one slot"
        # The user's scan is answered; the next may come within quiet_s: still one slot.
        clock.now += 0.2
        await _settle()
        assert entered == [0]
        clock.now += 0.4  # quiet for 0.6 s > 0.5 s: every idle slot opens
        gate.changed.set()  # what the timer in `background` does after quiet_s
        await _settle()
        assert entered == [0, 1, 2]
        release.set()
        await asyncio.gather(*tasks)

    asyncio.run(run())


def test_a_batch_photo_waiting_for_quiet_gets_in_by_itself_when_the_quiet_time_ends():
    """Real time, a short quiet: no event wakes the waiter, its own timeout does."""

    async def run() -> None:
        gate, entered, release = InteractiveFirst(1, 2, 0.05), [], asyncio.Event()
        async with gate.interactive():
            pass
        tasks = [asyncio.create_task(_hold(gate, entered, n, release)) for n in range(2)]
        await _settle()
        assert entered == [0]
        await asyncio.wait_for(_until(lambda: len(entered) == 2), 2.0)
        release.set()
        await asyncio.gather(*tasks)

    asyncio.run(run())


async def _until(condition) -> None:  # type: ignore[no-untyped-def]
    while not condition():
        await asyncio.sleep(0.005)


def test_a_users_scan_is_never_held_even_with_every_slot_taken():
    async def run() -> None:
        gate, entered, release = InteractiveFirst(1, 1, 0.5, Clock()), [], asyncio.Event()
        task = asyncio.create_task(_hold(gate, entered, 0, release))
        await _settle()
        async with asyncio.timeout(0.5), gate.interactive():
            assert gate.traffic().interactive == 1
        release.set()
        await task

    asyncio.run(run())


def test_a_cancelled_batch_photo_gives_its_slot_back():
    async def run() -> None:
        gate, entered, release = InteractiveFirst(1, 1, 0.5, Clock()), [], asyncio.Event()
        first = asyncio.create_task(_hold(gate, entered, 0, release))
        second = asyncio.create_task(_hold(gate, entered, 1, release))
        await _settle()
        second.cancel()
        first.cancel()
        await asyncio.gather(first, second, return_exceptions=True)
        assert gate.background_now == 0 and gate.traffic().background_waiting == 0
        third = asyncio.create_task(_hold(gate, entered, 2, release))
        await _settle()
        assert entered == [0, 2]
        release.set()
        await third

    asyncio.run(run())


def test_slots_must_make_sense():
    with pytest.raises(ValueError):
        InteractiveFirst(0, 4)
    with pytest.raises(ValueError):
        InteractiveFirst(3, 2)
