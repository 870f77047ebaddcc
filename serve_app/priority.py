"""Interactive scans first: how a Detector replica lets batch photos in beside a user's scans (#44).

Every ingress process sends its scans and its batch lanes' photos to the same Detector replicas, so the
replica is the one place that sees all of them: a rule in one uvicorn worker cannot see another's users
(measured: with 2 workers x 8 lanes, an interactive p50 of 140 ms became 1,575 ms). The Detector is the
first and costliest stage, and a photo it holds back holds back that photo's embedder and reader work
as well.

`InteractiveFirst` admits background (batch) calls into the replica's batching queue up to a number of
slots: `idle_slots` while no interactive call has been seen for `quiet_s`, else `busy_slots`. So a
user's scan waits behind at most `busy_slots` batch photos at this stage rather than behind every lane,
and a steady stream of user scans still leaves batches `busy_slots` photos at a time: they slow down,
they never stop. An interactive call is never held.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Traffic:
    """What a replica's gate has let through since it started."""

    interactive: int
    background: int
    background_waiting: int


class InteractiveFirst:
    def __init__(
        self,
        busy_slots: int = 1,
        idle_slots: int = 8,
        quiet_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`quiet_s` spans the gap between one user's scans (the client's turnaround) so a user scanning
        card after card keeps batches at `busy_slots` between their scans too."""
        if busy_slots < 1 or idle_slots < busy_slots:
            raise ValueError("need 1 <= busy_slots <= idle_slots")
        self.busy_slots, self.idle_slots, self.quiet_s, self.clock = busy_slots, idle_slots, quiet_s, clock
        self.interactive_now = 0
        self.background_now = 0
        self.last_interactive = float("-inf")
        self.changed = asyncio.Event()
        self.counts = {"interactive": 0, "background": 0, "waiting": 0}

    def _slots(self) -> tuple[int, float | None]:
        """The background slots open now, and how long until that number grows (None: it will not by
        itself)."""
        if self.interactive_now:
            return self.busy_slots, None
        quiet_for = self.clock() - self.last_interactive
        if quiet_for < self.quiet_s:
            return self.busy_slots, self.quiet_s - quiet_for
        return self.idle_slots, None

    @contextlib.asynccontextmanager
    async def interactive(self) -> AsyncIterator[None]:
        """Around a user's call: it goes straight in."""
        self.interactive_now += 1
        self.counts["interactive"] += 1
        try:
            yield
        finally:
            self.interactive_now -= 1
            self.last_interactive = self.clock()
            self.changed.set()

    @contextlib.asynccontextmanager
    async def background(self) -> AsyncIterator[None]:
        """Around a batch photo's call: it waits for a slot."""
        self.counts["waiting"] += 1
        try:
            while True:
                slots, grows_in = self._slots()
                if self.background_now < slots:
                    break
                self.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), grows_in)
        finally:
            self.counts["waiting"] -= 1
        self.background_now += 1
        self.counts["background"] += 1
        try:
            yield
        finally:
            self.background_now -= 1
            self.changed.set()

    def traffic(self) -> Traffic:
        return Traffic(self.counts["interactive"], self.counts["background"], self.counts["waiting"])
