"""`CardcatClient`: the blocking client (httpx). `AsyncCardcatClient` is its asyncio twin."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any

import httpx

from cardcat_client import models
from cardcat_client._base import ClientBase, next_params, read_one, read_page, route_call
from cardcat_client._core import (
    Call,
    PhotoSource,
    Retry,
    ScanSource,
    add_photos_calls,
    create_batch_call,
    export_call,
    scan_call,
)
from cardcat_client.routes import price_history_params


class CardcatClient(ClientBase[httpx.Client]):
    """The cardcat API from Python: typed models, every list walked over its cursor pages, errors as
    `CardcatError`, `429` and `5xx` retried (see `Core` for the bounds), conditional GETs by ETag.

    Use it as a context manager (`with CardcatClient(url, api_key=key) as cat: ...`) or call `close()`.
    Pass `http_client` to bring your own `httpx.Client` (proxies, event hooks); it is then yours to close.
    """

    def _open(self, timeout: float) -> httpx.Client:
        return httpx.Client(timeout=timeout)

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> CardcatClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- the request loop ------------------------------------------------------------------------

    def _send(self, call: Call) -> Any:
        attempt = 0
        while True:
            request = self._request(call)
            try:
                response = self._http.send(request)
            except httpx.TransportError as exc:
                outcome = self._lost(call, attempt, exc)
            else:
                outcome = self._core.settle(call, request, response, attempt)
            if not isinstance(outcome, Retry):
                return outcome
            attempt += 1
            time.sleep(self._retrying(outcome))

    def _one(self, name: str, params: dict[str, Any] | None = None, **path_args: Any) -> Any:
        return read_one(name, self._send(route_call(name, params, **path_args)))

    def _page(self, name: str, params: dict[str, Any], **path_args: Any) -> models.Page[Any]:
        return read_page(name, self._send(route_call(name, params, **path_args)))

    def _walk(self, name: str, params: dict[str, Any] | None) -> Iterator[Any]:
        while params is not None:
            page = self._page(name, params)
            yield from page.items
            params = next_params(params, page)

    # --- cards -----------------------------------------------------------------------------------

    def cards(self, **params: Any) -> Iterator[models.CardSummary]:
        """Every card row the query selects, page after page (`limit` is the page size). Parameters as
        the API takes them: `q`, `expansion_id`, `include=["variants", "metadata", "change"]`, and
        `ids=[...]`, `rarity`, `category`, `illustrator`, `type`, `hp_min`, `hp_max`,
        `legal`, `price_min`, `price_max`, `sort`, `lang`."""
        return self._walk("cards", params)

    def cards_page(self, **params: Any) -> models.Page[models.CardSummary]:
        """One page of `GET /v1/cards` (pass `cursor=page.next_cursor` for the next)."""
        return self._page("cards", params)

    def card(self, card_id: str, **params: Any) -> models.Card:
        result: models.Card = self._one("card", params, card_id=card_id)
        return result

    # --- reference data ----------------------------------------------------------------------------

    def series(self, **params: Any) -> Iterator[models.Series]:
        """Every series (`q` searches names)."""
        return self._walk("series", params)

    def series_by_id(self, series_id: str, **params: Any) -> models.Series:
        result: models.Series = self._one("series_by_id", params, series_id=series_id)
        return result

    def expansions(self, **params: Any) -> Iterator[models.Expansion]:
        """Every expansion (`q`, `series_id`)."""
        return self._walk("expansions", params)

    def expansion(self, expansion_id: str, **params: Any) -> models.Expansion:
        result: models.Expansion = self._one("expansion", params, expansion_id=expansion_id)
        return result

    def products(self, **params: Any) -> Iterator[models.Product]:
        """Every sealed product (`q`, `expansion_id`)."""
        return self._walk("products", params)

    def product(self, product_id: int, **params: Any) -> models.Product:
        result: models.Product = self._one("product", params, product_id=product_id)
        return result

    # --- prices ------------------------------------------------------------------------------------

    def movers(
        self, window: str = "7d", direction: str = "gainers", **params: Any
    ) -> Iterator[models.CardSummary]:
        """The price leaderboard, every row (`expansion_id`, `min_cents`; `limit` is the page size)."""
        return self._walk("movers", {"window": window, "direction": direction, **params})

    def card_prices(
        self,
        card_id: str,
        *,
        variant_id: int | None = None,
        condition: str | None = None,
        date_from: Any = None,
        date_to: Any = None,
    ) -> models.CardPriceHistory:
        """Daily price history of one printing (default: the headline printing, NM, 90 days)."""
        params = price_history_params(condition, date_from, date_to, variant_id=variant_id)
        result: models.CardPriceHistory = self._one("card_prices", params, card_id=card_id)
        return result

    def product_prices(
        self,
        product_id: int,
        *,
        variant: str | None = None,
        condition: str | None = None,
        date_from: Any = None,
        date_to: Any = None,
    ) -> models.ProductPriceHistory:
        """Daily price history of a sealed product."""
        params = price_history_params(condition, date_from, date_to, variant=variant)
        result: models.ProductPriceHistory = self._one("product_prices", params, product_id=product_id)
        return result

    def bulk(self) -> list[models.BulkFile]:
        """The bulk files, one per kind."""
        return list(self._walk("bulk", {}))

    # --- the rest --------------------------------------------------------------------------------

    def health(self) -> models.Health:
        result: models.Health = self._one("health")
        return result

    def scan(self, source: ScanSource) -> models.ScanResult:
        """Name the card in a photo: its bytes, a binary file object, a `pathlib.Path`, or an `https://`
        URL (a `str`) the server fetches. A `str` is never read as a local path (`TypeError` unless it
        is an http(s) URL): wrap paths in `Path(...)`. Never retried on a server error (only on `429`,
        which the server refused before reading)."""
        return models.ScanResult.model_validate(self._send(scan_call(source)))

    def scan_page(self, source: ScanSource) -> models.PageResult:
        """Name every card in one photo (a binder page, cards on a table), each with its corners and, on
        a page, its pocket; takes what `scan` takes, and counts as one request."""
        return models.PageResult.model_validate(self._send(scan_call(source, "/v1/scan/page")))

    # --- scan batches (docs/batches.md) ----------------------------------------------------------

    def create_batch(
        self, urls: Iterable[str] | None = None, *, events: str = "batch", idempotency_key: str | None = None
    ) -> models.Batch:
        """A new scan batch: open (add photos, then `close_batch`), or closed at once holding `urls`
        (https, public; the server fetches them). `events="per_photo"`: a webhook event per answer. Safe
        to retry: sent with an `Idempotency-Key`."""
        urls = None if urls is None else list(urls)
        call = create_batch_call(urls, idempotency_key or uuid.uuid4().hex, events)
        return models.Batch.model_validate(self._send(call))

    def add_photos(
        self, batch_id: str, photos: Iterable[PhotoSource], *, idempotency_key: str | None = None
    ) -> models.Batch:
        """Adds photos (bytes, binary files or `pathlib.Path`s; a file's name is kept) to an open
        batch, 100 a request, each request safe to retry."""
        batch = None
        for call in add_photos_calls(batch_id, photos, idempotency_key or uuid.uuid4().hex):
            batch = models.Batch.model_validate(self._send(call))
        return batch if batch is not None else self.batch(batch_id)

    def close_batch(self, batch_id: str) -> models.Batch:
        """No more photos: the batch is done once every photo is answered."""
        result: models.Batch = self._one("close_batch", batch_id=batch_id)
        return result

    def batch(self, batch_id: str) -> models.Batch:
        result: models.Batch = self._one("batch", batch_id=batch_id)
        return result

    def batch_results(self, batch_id: str) -> Iterator[models.BatchResult]:
        """The answers given so far, in the order they were given (all of them once `wait_batch` says
        the batch is finished)."""
        params: dict[str, Any] | None = {}
        while params is not None:
            page = self._page("batch_results", params, batch_id=batch_id)
            yield from page.items
            params = next_params(params, page) if page.items else None

    def wait_batch(
        self, batch_id: str, *, poll_s: float = 1.0, timeout_s: float | None = None
    ) -> models.Batch:
        """Polls until the batch is done, cancelled or expired; `TimeoutError` after `timeout_s`."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not (batch := self.batch(batch_id)).finished:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"batch {batch_id} is still {batch.status} after {timeout_s} s")
            time.sleep(poll_s)
        return batch

    def cancel_batch(self, batch_id: str) -> models.Batch:
        """Stops an unfinished batch (its waiting photos are deleted; answers so far stay)."""
        result: models.Batch = self._one("cancel_batch", batch_id=batch_id)
        return result

    def export_batch(
        self,
        batch_id: str,
        *,
        format: str = "csv",
        layout: str = "cardcat",
        condition: str = "NM",
        language: str = "English",
    ) -> bytes:
        """The batch's answers as a file: `format` `csv` or `ndjson`, `layout` `cardcat` or `tcgplayer`
        (the marketplace's inventory import; single confident answers only), prices in `condition`."""
        params = {"format": format, "layout": layout, "condition": condition, "language": language}
        data: bytes = self._send(export_call(batch_id, params))
        return data
