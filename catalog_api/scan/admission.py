"""How many scans one worker holds at once (`CARDCAT_SCAN_MAX_IN_FLIGHT`), and what the next one hears.

A scan in flight holds up to a 10 MB body, a 10 s URL fetch and a 60 s wait on the scanner, and its photo
sits in Ray's object store while the scanner has it. Without a cap, slow uploads or a stalled scanner let
anyone with a key grow a worker (and the object store, which then spills to disk) without bound.

A slot is taken before the body is read, so a flood of slow uploads holds at most the cap's worth of
memory; the scan past the cap is answered `503 scan_unavailable` with `Retry-After` at once, without
reading its body (and `Connection: close`, so uvicorn does not drain an upload nobody will read).

Refused at once rather than queued: the scanner on two cores finishes ~11 scans a second
(docs/scanner-performance.md), so 32 scans in flight per worker are already ~3 s of work queued inside
Ray Serve; a request queued here on top would wait in two queues, hold its connection and its rate-limit
budget, and still be answered late. The client's `Retry-After` (the same as for a scanner that failed)
spreads a burst out instead. The default 32 is the benchmark's highest concurrency
(`benchmarks/scan_load.py --concurrency 1,4,16,32`), so a closed loop that size is never refused on one
worker. `cardcat serve` sizes Ray's object store for this cap (`serve_app.local.object_store_bytes`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from core.errors import ScanUnavailable
from core.scan_contract import RETRY_AFTER_S


class ScanSlots:
    """At most `limit` scans at once in this worker (one event loop: a plain counter is enough)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.taken = 0

    @contextmanager
    def hold(self) -> Iterator[None]:
        """A slot for the length of the block; `ScanUnavailable` (503, `Retry-After`) when all are taken."""
        if self.taken >= self.limit:
            raise ScanUnavailable(
                "Too many scans are in progress on this server; please retry shortly.",
                headers={"Retry-After": str(RETRY_AFTER_S), "Connection": "close"},
            )
        self.taken += 1
        try:
            yield
        finally:
            self.taken -= 1
