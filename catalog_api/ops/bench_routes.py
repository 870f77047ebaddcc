"""`GET /v1/_bench/static`: the benchmark's ceiling — a fixed body of a given size through the same
gate (key check and rate limit) and envelope as every `/v1` route, with no data access. Mounted only
when `CARDCAT_BENCH_ROUTES=1`."""

from __future__ import annotations

from functools import lru_cache

from fastapi import APIRouter, Query
from starlette.responses import Response

router = APIRouter(prefix="/v1/_bench", include_in_schema=False)


@lru_cache(maxsize=8)
def _body(size: int) -> bytes:
    head, tail = b'{"data":{"items":[],"padding":"', b'"},"error":null}'
    return head + b"x" * max(0, size - len(head) - len(tail)) + tail


@router.get("/static")
async def static(size: int = Query(20_000, ge=0, le=2_000_000)) -> Response:
    return Response(_body(size), media_type="application/json")
