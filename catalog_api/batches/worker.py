"""The batch worker: runs inside every API worker process that has a scanner, beside its requests.

It uses that process's scanner client, so a batch photo goes through exactly what `POST /v1/scan` does
(the same Ray Serve deployments, batched with the interactive scans) and is answered through the same
code (`scan.answers`). `CARDCAT_BATCH_LANES` lanes each take one photo at a time from the queue
(`batches.queue`: a lease, round-robin between batches); while interactive scans are in flight in this
process only `CARDCAT_BATCH_LANES_WHEN_BUSY` lanes take new photos, so this process's lanes queue at
most that many scans ahead of a user's (another worker process's lanes do not know: docs/batches.md).
A sweeper expires old batches and deletes photo files nobody needs.

Nothing here can take the server down: a failed photo is answered `error` with its code, a scanner
that is away gives the photo back to the queue, and a database that is away is waited out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool

from catalog_api.batches import photo_files, queue
from catalog_api.deps import AppContext
from catalog_api.kit.metrics import BATCH_OUTCOMES, BATCH_PHOTOS
from catalog_api.scan.answers import outcome_of, scan_answer
from catalog_api.scan.scanning import Scanning
from catalog_api.scan.url_fetch import fetch_image_url
from core.errors import APIError, ScanUnavailable
from core.photo import probe_image

log = logging.getLogger("cardcat.batches")
# How long a lane waits after the scanner or the database failed, before it tries again.
BACKOFF_S = 2.0
# How long an idle lane other than the first sleeps before looking itself (the first wakes it sooner
# when it finds photos): an idle server asks the database twice a second, not 16 times.
IDLE_LANE_S = 10.0
# How often the sweeper expires batches and removes leftover files.
SWEEP_S = 30.0
FAILED_PHOTO = "This photo could not be scanned: it stopped the scanner each time it was tried."


class BatchWorker:
    def __init__(
        self, context: AppContext, scanning: Scanning, interactive_in_flight: Callable[[], int]
    ) -> None:
        self.context, self.scanning, self.busy = context, scanning, interactive_in_flight
        self.settings = context.settings
        self.owner = f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.tasks: list[asyncio.Task[None]] = []
        self.found = asyncio.Event()

    def start(self) -> None:
        lanes = self.settings.batch_lanes if self.scanning.scanner is not None else 0
        self.tasks = [asyncio.create_task(self._lane(lane)) for lane in range(lanes)]
        self.tasks.append(asyncio.create_task(self._sweeper()))

    async def stop(self) -> None:
        """Stops taking photos; a photo being scanned is left leased and taken again after its lease."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks = []

    async def _lane(self, lane: int) -> None:
        engine, settings = self.context.engine, self.settings
        while True:
            if lane >= settings.batch_lanes_when_busy and self.busy() > 0:
                await asyncio.sleep(0.05)
                continue
            try:
                photos = await queue.claim(engine, self.owner, settings.batch_lease_s, 1)
                for photo in photos:
                    await self._scan(photo)
            except asyncio.CancelledError:
                raise
            except ScanUnavailable:
                await asyncio.sleep(BACKOFF_S)
                continue
            except Exception:  # the database away (restart, failover): wait and take photos again
                log.warning("batch lane %d: taking or answering photos failed", lane, exc_info=True)
                await asyncio.sleep(BACKOFF_S)
                continue
            if photos:
                self.found.set()  # photos are waiting: wake the idle lanes
            elif lane == 0:
                await asyncio.sleep(settings.batch_poll_s)
            else:  # only lane 0 looks while there is nothing to do; it wakes the rest
                self.found.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.found.wait(), IDLE_LANE_S)

    async def _scan(self, photo: queue.Claimed) -> None:
        engine, settings = self.context.engine, self.settings
        body: dict[str, Any] = {"index": photo.position, "name": photo.name, "url": photo.url}
        if photo.attempts > queue.MAX_ATTEMPTS:
            answer, outcome = _failed("internal", FAILED_PHOTO), "error"
        else:
            try:
                answer = await self._answer(photo)
                outcome = "error" if answer.get("error") else outcome_of(answer)
            except ScanUnavailable:
                await queue.release(engine, photo, self.owner)
                raise
            except APIError as error:
                answer, outcome = _failed(error.code, error.message), "error"
        if await queue.answer(engine, photo, self.owner, outcome, {**body, **answer}):
            BATCH_PHOTOS.labels(outcome if outcome in BATCH_OUTCOMES else "error").inc()
            # Not when the lease was lost: the worker that took the photo over may be reading the file
            # (a cancelled or expired batch's files go with its directory, by its route or the sweep).
            photo_files.remove_photo(settings, photo.batch_id, photo.position)

    async def _answer(self, photo: queue.Claimed) -> dict[str, Any]:
        scanner = self.scanning.scanner
        if scanner is None:
            raise ScanUnavailable("Scanning is not configured on this deployment.")
        if photo.url is not None:
            data = await fetch_image_url(photo.url, self.scanning.fetch_policy)
            await run_in_threadpool(probe_image, data)  # files were checked when they were uploaded
        else:
            path = photo_files.photo_path(self.settings, photo.batch_id, photo.position)
            try:
                data = await run_in_threadpool(path.read_bytes)
            except FileNotFoundError:
                # The batch was cancelled or expired while this photo waited: the answer is not written.
                return _failed("not_found", "The photo was deleted before its scan.")
        decision = await scanner.scan(data, background=True)
        del data
        answer = await scan_answer(self.context, decision, None)
        answer["error"] = None
        return answer

    async def _sweeper(self) -> None:
        while True:
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("batch sweep failed", exc_info=True)
            await asyncio.sleep(SWEEP_S)

    async def sweep(self) -> None:
        """Expires batches past their time, and deletes the photo files of finished batches and of
        answered photos whose worker died before it deleted them, and uploads that never finished."""
        engine, settings = self.context.engine, self.settings
        await queue.expire(engine)
        on_disk = photo_files.batch_ids_on_disk(settings)
        finished = await queue.finished_among(engine, on_disk)
        for batch_id in on_disk:
            if batch_id in finished:
                photo_files.remove_batch(settings, batch_id)
                continue
            photo_files.remove_stale_uploads(settings, batch_id)
            photo_files.remove_answered(
                settings, batch_id, await queue.unanswered_positions(engine, batch_id)
            )


def _failed(code: str, message: str) -> dict[str, Any]:
    """A photo's answer when it could not be scanned: the scan answer's shape with its error."""
    return {
        "analysis": {"game": None, "tier": "review"},
        "matches": [],
        "unidentified": None,
        "error": {"code": code, "message": message},
    }
