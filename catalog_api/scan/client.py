"""How the ingress reaches the scanner: Ray Serve `DeploymentHandle`s, or HTTP to Ray's proxy.

The handles are the default when the ingress can join the scanner's Ray cluster (`cardcat serve` starts
Ray in its own process; `CARDCAT_SCAN_APP` names the Serve application, `CARDCAT_RAY_ADDRESS` the
cluster). The ingress then composes each scan itself (`serve_app.pipeline.ScanPipeline`, the code the
app's ScanService runs too) with handles to the app's Detector, Embedder and Reader: the photo goes
straight from this process to the Detector over Ray's own transport, no second HTTP server parses it
again, Ray's HTTP proxy (measured at ~100 trivial requests/s on two cores, 5-10 ms of CPU per request)
need not run at all, and no composing replica sits between (one Ray call and ~5-7 ms of CPU per scan
fewer: docs/scanner-performance.md). `CARDCAT_SCAN_URL` (HTTP) stays for an ingress outside the cluster.
Both answer the scan contract's `ScanDecision` and raise the same errors, and both try a failed scan once
more before answering `503 scan_unavailable` with `Retry-After`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Protocol, cast

import httpx

from catalog_api.kit.errors import ScanUnavailable
from catalog_api.kit.scan_contract import ScanAnswer, ScanDecision, ScanRefusal, refusal_error

if TYPE_CHECKING:
    from serve_app.pipeline import ScanPipeline

log = logging.getLogger("cardcat.scan")
# A scan is a pure function of its photo, so a call that died with its replica (or hit an app being
# redeployed) is tried once more, when Ray has routed around the dead replica; if that fails too the
# client is told when to come back: replicas restart in seconds.
ATTEMPTS = 2
RETRY_AFTER_S = 2
# A call Ray cannot place (the app deleted, or every replica gone and none yet restarted) waits for a
# replica rather than failing; past this the client is told to come back instead of waiting on.
CALL_TIMEOUT_S = 60.0
# How often the ingress asks the app's ScanService for the fusion thresholds it was deployed with: a new
# user_config reaches the ingress within this, at one small call per worker per period.
THRESHOLDS_REFRESH_S = 30.0


def unavailable(message: str) -> ScanUnavailable:
    return ScanUnavailable(message, headers={"Retry-After": str(RETRY_AFTER_S)})


class ScanClient(Protocol):
    async def scan(self, photo: bytes) -> ScanDecision:
        """The scanner's decision for a photo (`catalog_api.kit.scan_contract`); a refusal is raised."""
        ...

    async def aclose(self) -> None: ...


class HTTPScanClient:
    """POSTs the photo's bytes to the scanner's `/scan` route on Ray's HTTP proxy."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=2.0), trust_env=False)

    async def scan(self, photo: bytes) -> ScanDecision:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                response = await self.client.post(
                    self.url, content=photo, headers={"content-type": "application/octet-stream"}
                )
            except httpx.HTTPError:
                if attempt < ATTEMPTS:
                    continue
                raise unavailable("The scanner is not reachable right now; please retry.") from None
            if response.status_code == 400:
                raise refusal_error(response.json().get("error", {}))
            if response.status_code == 200:
                decision: ScanDecision = response.json()
                return decision
        raise unavailable("The scanner failed to answer; please retry.")

    async def aclose(self) -> None:
        await self.client.aclose()


class ServeHandleScanClient:
    """Composes each scan in this process from the Detector, Embedder and Reader of Serve application
    `app_name`, called through DeploymentHandles (`serve_app.pipeline`)."""

    def __init__(self, app_name: str, address: str = "auto") -> None:
        import ray
        from ray import serve

        from serve_app.pipeline import DETECTOR, EMBEDDER, READER, SERVICE, ScanPipeline

        if not ray.is_initialized():  # a uvicorn worker of its own, or an ingress beside a cluster
            ray.init(address=address or "auto", logging_level=logging.WARNING, log_to_driver=False)
        detector, embedder, reader, service = (
            serve.get_deployment_handle(name, app_name) for name in (DETECTOR, EMBEDDER, READER, SERVICE)
        )
        self.pipeline: ScanPipeline = ScanPipeline(detector, embedder, reader)
        self.service = service
        self.thresholds_due = 0.0

    async def scan(self, photo: bytes) -> ScanDecision:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                answer: ScanAnswer = await asyncio.wait_for(self._call(photo), CALL_TIMEOUT_S)
                break
            except TimeoutError:
                log.warning("scanner call unanswered after %.0f s", CALL_TIMEOUT_S)
                raise unavailable("The scanner is not answering right now; please retry.") from None
            except Exception as error:  # a replica that died, an app being redeployed: Ray's many types
                log.warning("scanner call failed (attempt %d): %s", attempt, type(error).__name__)
        else:
            raise unavailable("The scanner failed to answer; please retry.")
        if "error" in answer:
            raise refusal_error(cast(ScanRefusal, answer)["error"])
        return cast(ScanDecision, answer)

    async def _call(self, photo: bytes) -> ScanAnswer:
        if time.monotonic() >= self.thresholds_due:
            from serve_app.fusion import Thresholds

            self.pipeline.thresholds = Thresholds(**await self.service.fusion_thresholds.remote())
            self.thresholds_due = time.monotonic() + THRESHOLDS_REFRESH_S
        return await self.pipeline.scan_photo(photo)

    async def aclose(self) -> None:
        return None


def open_scan_client(app_name: str, url: str, ray_address: str) -> ScanClient | None:
    """The handle when a Serve app is named, else HTTP when a URL is, else None (catalog only)."""
    if app_name:
        return ServeHandleScanClient(app_name, ray_address)
    if url:
        return HTTPScanClient(url)
    return None
