"""The routes the client wraps and the model each one's `data` is read into.

One table for both clients, and for the test that holds the models to the server's `/openapi.json`
(it looks each route up there and compares the schema it declares with the model named here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from cardcat_client import models


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # as in OpenAPI: `{name}` for a path parameter
    model: type[models.Model]
    paged: bool = False  # data is `{items, next_cursor}` of `model`

    def url(self, **path_args: Any) -> str:
        return self.path.format(**{k: quote(str(v), safe="") for k, v in path_args.items()})


ROUTES: dict[str, Route] = {
    "cards": Route("GET", "/v1/cards", models.CardSummary, paged=True),
    "card": Route("GET", "/v1/cards/{card_id}", models.Card),
    "series": Route("GET", "/v1/series", models.Series, paged=True),
    "series_by_id": Route("GET", "/v1/series/{series_id}", models.Series),
    "expansions": Route("GET", "/v1/expansions", models.Expansion, paged=True),
    "expansion": Route("GET", "/v1/expansions/{expansion_id}", models.Expansion),
    "products": Route("GET", "/v1/products", models.Product, paged=True),
    "product": Route("GET", "/v1/products/{product_id}", models.Product),
    "movers": Route("GET", "/v1/movers", models.CardSummary, paged=True),
    "scan": Route("POST", "/v1/scan", models.ScanResult),
    "scan_page": Route("POST", "/v1/scan/page", models.PageResult),
    "health": Route("GET", "/health", models.Health),
    # Issue 14, written to its contract (see the marked section of models.py).
    "card_prices": Route("GET", "/v1/cards/{card_id}/prices", models.CardPriceHistory),
    "product_prices": Route("GET", "/v1/products/{product_id}/prices", models.ProductPriceHistory),
    "bulk": Route("GET", "/v1/bulk", models.BulkFile, paged=True),
    # Scan batches (#44): the POSTs answer 202 with the batch.
    "create_batch": Route("POST", "/v1/scan/batches", models.Batch),
    "add_photos": Route("POST", "/v1/scan/batches/{batch_id}/photos", models.Batch),
    "close_batch": Route("POST", "/v1/scan/batches/{batch_id}/close", models.Batch),
    "batch": Route("GET", "/v1/scan/batches/{batch_id}", models.Batch),
    "batch_results": Route("GET", "/v1/scan/batches/{batch_id}/results", models.BatchResult, paged=True),
    "cancel_batch": Route("DELETE", "/v1/scan/batches/{batch_id}", models.Batch),
}

# Routes whose answer is a file, not the envelope: the client hands back their bytes.
RAW_ROUTES: dict[str, tuple[str, str]] = {
    "export_batch": ("GET", "/v1/scan/batches/{batch_id}/export"),
}

# Paths the client leaves alone on purpose: they serve files, not the envelope.
NOT_WRAPPED: dict[str, str] = {
    "/images/{key}/{size}.jpg": "image bytes; `image.low` / `image.high` are their URLs",
    "/files/snapshots/{file_name}": "signed price snapshot files named by webhook events",
}


def price_history_params(
    condition: str | None, date_from: Any, date_to: Any, **selector: Any
) -> dict[str, Any]:
    """`from`/`to` are Python keywords; the methods take `date_from`/`date_to` (dates or strings)."""
    return {**selector, "condition": condition, "from": date_from, "to": date_to}
