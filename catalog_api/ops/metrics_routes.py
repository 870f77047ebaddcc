"""`GET /metrics`: Prometheus text, no key (outside `/v1`, so the gate never sees it), not in the OpenAPI
document (it is for the monitoring system, not API clients).

With `CARDCAT_METRICS_PORT` set, `cardcat serve` answers it on that port instead (from its own
process, `ops.scrape_metrics.serve_metrics_port`) and the API port does not, so it can stay private
while the API is public. See docs/operations.md, "Metrics".
"""

from __future__ import annotations

from fastapi import APIRouter
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from catalog_api.deps import Context
from catalog_api.ops.scrape_metrics import exposition, read_state_async

router = APIRouter(tags=["ops"], include_in_schema=False)


@router.get("/metrics")
async def metrics(context: Context) -> Response:
    state = await read_state_async(context.engine)
    # Reading every process's files is disk work: off the event loop.
    body = await run_in_threadpool(exposition, state, context.settings)
    return Response(body, media_type=CONTENT_TYPE_LATEST, headers={"Cache-Control": "no-store"})
