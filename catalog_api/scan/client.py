"""How the ingress reaches the scanner: Ray Serve `DeploymentHandle`s, or HTTP to Ray's proxy.

The handles are the default when the ingress can join the scanner's Ray cluster (`cardcat serve` starts
Ray in its own process; `CARDCAT_SCAN_APP` names the Serve application, `CARDCAT_RAY_ADDRESS` the
cluster): `serve_app.ingress.ServeHandleScanClient`, handed in by `cardcat serve`, composes each scan in
this process from the app's Detector, Embedder and Reader, so no second HTTP server parses the photo
again, Ray's HTTP proxy (~100 trivial requests/s on two cores) need not run, and no composing replica
sits between (docs/scanner-performance.md). `CARDCAT_SCAN_URL` (HTTP) stays for an ingress outside the
cluster. Both answer the scan contract's `ScanDecision` and raise the same errors, and both try a failed
scan once more before answering `503 scan_unavailable` with `Retry-After`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import httpx

from core.scan_contract import ATTEMPTS, PageDecision, ScanDecision, refusal_error, unavailable

log = logging.getLogger("cardcat.scan")


class ScanClient(Protocol):
    async def scan(self, photo: bytes, background: bool = False) -> ScanDecision:
        """The scanner's decision for a photo (`core.scan_contract`); a refusal is raised. `background`:
        a batch photo, which the scanner takes behind users' scans (`serve_app.priority`)."""
        ...

    async def scan_page(self, photo: bytes) -> PageDecision:
        """Every card in the photo (#48: a binder page, a table spread); a refusal is raised."""
        ...

    async def aclose(self) -> None: ...


class HTTPScanClient:
    """POSTs the photo's bytes to the scanner's `/scan` route on Ray's HTTP proxy."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=2.0), trust_env=False)

    async def scan(self, photo: bytes, background: bool = False) -> ScanDecision:
        decision: ScanDecision = await self._post(
            self.url, photo, {"background": "1"} if background else None
        )
        return decision

    async def scan_page(self, photo: bytes) -> PageDecision:
        """`POST /scan/page` on the proxy (`serve_app.app.ScanService`)."""
        page: PageDecision = await self._post(self.url.rstrip("/") + "/page", photo, None)
        return page

    async def _post(self, url: str, photo: bytes, params: dict[str, str] | None) -> Any:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                response = await self.client.post(
                    url, content=photo, headers={"content-type": "application/octet-stream"}, params=params
                )
            except httpx.HTTPError:
                if attempt < ATTEMPTS:
                    continue
                raise unavailable("The scanner is not reachable right now; please retry.") from None
            if response.status_code == 400:
                raise refusal_error(response.json().get("error", {}))
            if response.status_code == 200:
                return response.json()
        raise unavailable("The scanner failed to answer; please retry.")

    async def aclose(self) -> None:
        await self.client.aclose()


# Opens the in-cluster client for a Serve application and a Ray address: `serve_app.ingress`'s
# `ServeHandleScanClient`, handed in by the composition root (`cardcat serve`), since `catalog_api` may not
# import the scanner's layer.
HandleClientFactory = Callable[[str, str], ScanClient]


def open_scan_client(
    app_name: str, url: str, ray_address: str, handle_client: HandleClientFactory | None = None
) -> ScanClient | None:
    """The handles when a Serve app is named, else HTTP when a URL is, else None (catalog only)."""
    if app_name:
        if handle_client is None:
            raise RuntimeError("CARDCAT_SCAN_APP is set, but this app was built without the scanner's client")
        return handle_client(app_name, ray_address)
    if url:
        return HTTPScanClient(url)
    return None
