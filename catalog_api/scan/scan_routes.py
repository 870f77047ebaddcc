"""`POST /v1/scan` and `POST /v1/scan/page`: the ingress side of the scanner.

The ingress owns the request: the gate has authenticated and counted it; here the body is read (10 MB
cap while streaming, or the URL fetched under the SSRF rules), its header checked, and the bytes handed
to the Ray Serve scanner. The scanner answers with card ids; the catalog fields come from our database.
Photos are held in memory only, never written or logged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from catalog_api.deps import AppContext, Context
from catalog_api.kit.envelope import data_response
from catalog_api.kit.languages import parse_lang
from catalog_api.kit.metrics import (
    SCAN_ERROR_CODES,
    SCAN_PAGE_CARDS,
    SCAN_PAGES,
    SCAN_PATHS,
    SCAN_STAGE_LATENCY,
    SCAN_STAGES,
    SCANS,
)
from catalog_api.kit.params import Lang
from catalog_api.kit.schemas import ERRORS, Envelope, ErrorEnvelope
from catalog_api.scan.admission import ScanSlots
from catalog_api.scan.answers import outcome_of, page_answer, scan_answer
from catalog_api.scan.client import ScanClient
from catalog_api.scan.intake import read_scan_upload
from catalog_api.scan.resolver import make_resolver
from catalog_api.scan.scanning import Scanning, ScanningState
from catalog_api.scan.schemas import PageResult, ScanResult
from catalog_api.scan.url_fetch import FetchPolicy
from core.errors import APIError, ScanUnavailable
from core.photo import probe_image
from core.scan_contract import ScanDecision

router = APIRouter(prefix="/v1", tags=["scan"])
Answer = TypeVar("Answer")
SCAN_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    413: {"model": ErrorEnvelope, "description": "payload_too_large"},
    503: {"model": ErrorEnvelope, "description": "scan_unavailable"},
}


# The photo, as a file or a URL: `POST /v1/scan` and `POST /v1/scan/page` take the same body.
PHOTO_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {"image": {"type": "string", "format": "binary"}},
                    "required": ["image"],
                }
            },
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {"url": {"type": "string", "format": "uri"}},
                    "required": ["url"],
                }
            },
        },
    }
}


@router.post("/scan", response_model=Envelope[ScanResult], responses=SCAN_ERRORS, openapi_extra=PHOTO_BODY)
async def scan(request: Request, context: Context, scanning: ScanningState, lang: Lang = None) -> Response:
    """Identify a card from a photo: a multipart file field `image`, or JSON `{url}` (https, public).
    `lang` names the matched cards and their expansions in that language where the feed has it."""
    language = parse_lang(lang)
    try:
        body = await _scan(request, context, scanning, language)
    except Exception as error:
        SCANS.labels("error").inc()
        SCAN_ERROR_CODES.labels(error.code if isinstance(error, APIError) else "internal").inc()
        raise
    SCANS.labels(outcome_of(body)).inc()
    SCAN_PATHS.labels(body["analysis"]["path"]).inc()
    return data_response(request, body)


async def _scan(
    request: Request, context: AppContext, scanning: Scanning, language: str | None
) -> dict[str, Any]:
    decision = await _with_photo(request, context, scanning, lambda scanner, data: scanner.scan(data))
    _observe_stages(decision)
    return await scan_answer(context, decision, language)


async def _with_photo(
    request: Request,
    context: AppContext,
    scanning: Scanning,
    scan: Callable[[ScanClient, bytes], Awaitable[Answer]],
) -> Answer:
    """`scan` on the request's photo (`POST /v1/scan` and `/v1/scan/page` alike): under one of this app's
    scan slots, taken before the body is read (see catalog_api.scan.admission); the photo is read (the
    10 MB cap, or the URL fetched), its header checked, and it leaves this worker's memory with its slot."""
    if scanning.scanner is None:
        raise ScanUnavailable("Scanning is not configured on this deployment.")
    slots, policy = _intake(request, context, scanning)
    with slots.hold():
        data = await read_scan_upload(request, policy)
        await run_in_threadpool(probe_image, data)
        answer = await scan(scanning.scanner, data)
        del data
    return answer


@router.post(
    "/scan/page", response_model=Envelope[PageResult], responses=SCAN_ERRORS, openapi_extra=PHOTO_BODY
)
async def scan_page(
    request: Request, context: Context, scanning: ScanningState, lang: Lang = None
) -> Response:
    """Identify every card in one photo (a binder page, cards on a table): the same body, limits and
    errors as `POST /v1/scan`, and one request against the rate limit. Each card is answered as a single
    scan of it would be, with its corners and, on a binder page, its pocket; a card lying face down is
    `card_back`, a pocket with no card `empty_slot`. Up to 24 cards: a photo of more lists the largest
    and says `truncated`."""
    language = parse_lang(lang)
    try:
        body = await _scan_page(request, context, scanning, language)
    except Exception:
        SCAN_PAGES.labels("error").inc()
        raise
    SCAN_PAGES.labels("ok").inc()
    SCAN_PAGE_CARDS.observe(len(body["cards"]))
    return data_response(request, body)


async def _scan_page(
    request: Request, context: AppContext, scanning: Scanning, language: str | None
) -> dict[str, Any]:
    page = await _with_photo(request, context, scanning, lambda scanner, data: scanner.scan_page(data))
    return await page_answer(context, page, language)


def _intake(request: Request, context: AppContext, scanning: Scanning) -> tuple[ScanSlots, FetchPolicy]:
    """This app's scan slots and its fetch policy with the resolver the settings name, made on the
    first scan (a worker has one app and one event loop)."""
    state: tuple[ScanSlots, FetchPolicy] | None = getattr(request.app.state, "scan_intake", None)
    if state is None:
        settings, policy = context.settings, scanning.fetch_policy
        if policy.resolver is None and settings.scan_dns_servers:
            policy = replace(policy, resolver=make_resolver(settings.scan_dns_servers))
        state = ScanSlots(settings.scan_max_in_flight), policy
        request.app.state.scan_intake = state
    return state


def interactive_in_flight(app: Any) -> int:
    """`POST /v1/scan` calls this app is holding now: the batch workers give way while there are any."""
    state: tuple[ScanSlots, FetchPolicy] | None = getattr(app.state, "scan_intake", None)
    return 0 if state is None else state[0].taken


def _observe_stages(decision: ScanDecision) -> None:
    """The scanner's own stage timings, into this service's `/metrics` (a scanner that sends none, such
    as an older build, adds nothing; a stage outside the known list is ignored: labels stay bounded)."""
    for stage, seconds in (decision.get("timings") or {}).items():
        if stage in SCAN_STAGES and isinstance(seconds, int | float) and seconds >= 0:
            SCAN_STAGE_LATENCY.labels(stage).observe(float(seconds))
