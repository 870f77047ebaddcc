"""The `/v1` ingress's client for a scanner in its own Ray cluster: it composes each scan in the uvicorn
worker (`serve_app.pipeline.ScanPipeline`) from DeploymentHandles to the app's Detector, Embedder and
Reader. It lives in the scanner's layer because it runs the scanner's code; `cardcat serve` (the
composition root) hands it to the app (`catalog_api.scan.client.open_scan_client`); both clients share
their retry rules and errors through the scan contract (`core.scan_contract`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import cast

from core.scan_contract import (
    ATTEMPTS,
    CALL_TIMEOUT_S,
    PageAnswer,
    PageDecision,
    ScanAnswer,
    ScanDecision,
    ScanRefusal,
    refusal_error,
    unavailable,
)
from serve_app.fusion import Thresholds
from serve_app.pipeline import DETECTOR, EMBEDDER, READER, SERVICE, ScanPipeline

log = logging.getLogger("cardcat.scan")
# How often the ingress asks the app's ScanService how it was deployed to compose a scan (fusion
# thresholds, the first look): a new
# user_config reaches the ingress within this, at one small call per worker per period.
THRESHOLDS_REFRESH_S = 30.0


class ServeHandleScanClient:
    """Composes each scan in this process from the Detector, Embedder and Reader of Serve application
    `app_name`, called through DeploymentHandles (`serve_app.pipeline`)."""

    def __init__(self, app_name: str, address: str = "auto") -> None:
        import ray
        from ray import serve

        if not ray.is_initialized():  # a uvicorn worker of its own, or an ingress beside a cluster
            ray.init(address=address or "auto", logging_level=logging.WARNING, log_to_driver=False)
        detector, embedder, reader, service = (
            serve.get_deployment_handle(name, app_name) for name in (DETECTOR, EMBEDDER, READER, SERVICE)
        )
        self.pipeline: ScanPipeline = ScanPipeline(detector, embedder, reader)
        self.service = service
        self.thresholds_due = 0.0

    async def scan(self, photo: bytes, background: bool = False) -> ScanDecision:
        return cast(ScanDecision, await self._answer(lambda: self._call(photo, background), "scan"))

    async def scan_page(self, photo: bytes) -> PageDecision:
        """Every card in the photo (#48), with the same retries and errors as `scan`."""
        return cast(PageDecision, await self._answer(lambda: self._call_page(photo), "page"))

    async def _answer(
        self, call: Callable[[], Awaitable[ScanAnswer | PageAnswer]], what: str
    ) -> ScanAnswer | PageAnswer:
        """`call`'s answer, tried again once after a failure; a refusal raised as its API error."""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                answer = await asyncio.wait_for(call(), CALL_TIMEOUT_S)
                break
            except TimeoutError:
                log.warning("scanner %s call unanswered after %.0f s", what, CALL_TIMEOUT_S)
                raise unavailable("The scanner is not answering right now; please retry.") from None
            except Exception as error:  # a replica that died, an app being redeployed: Ray's many types
                log.warning("scanner %s call failed (attempt %d): %s", what, attempt, type(error).__name__)
        else:
            raise unavailable("The scanner failed to answer; please retry.")
        if "error" in answer:
            raise refusal_error(cast(ScanRefusal, answer)["error"])
        return answer

    async def _refresh(self) -> None:
        """The app's fusion thresholds and first-look setting, asked for at most every
        THRESHOLDS_REFRESH_S."""
        if time.monotonic() >= self.thresholds_due:
            settings = await self.service.pipeline_settings.remote()
            self.pipeline.thresholds = Thresholds(**settings["thresholds"])
            self.pipeline.first_look = bool(settings["first_look"])
            self.thresholds_due = time.monotonic() + THRESHOLDS_REFRESH_S

    async def _call(self, photo: bytes, background: bool) -> ScanAnswer:
        await self._refresh()
        return await self.pipeline.scan_photo(photo, background)

    async def _call_page(self, photo: bytes) -> PageAnswer:
        await self._refresh()
        return await self.pipeline.scan_page(photo)

    async def aclose(self) -> None:
        return None
