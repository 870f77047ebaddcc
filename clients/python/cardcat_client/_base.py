"""What the two clients share besides the policy (`Core`): where and as whom they call, how a `Call`
becomes an HTTP request, and the pure functions that turn a method's arguments into its `Call` and its
answer's `data` into models. Each client then only sends, sleeps and walks pages in its own way."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import httpx

from cardcat_client import models
from cardcat_client._core import USER_AGENT, Call, Core, Params, Retry, Stats, query_params
from cardcat_client.errors import CardcatConnectionError
from cardcat_client.routes import ROUTES


def route_call(name: str, params: Params | None = None, **path_args: Any) -> Call:
    """The request for route `name` of `ROUTES`, its path filled in and its query as the API reads it."""
    route = ROUTES[name]
    return Call(route.method, route.url(**path_args), query_params(params or {}))


def read_one(name: str, data: Any) -> Any:
    """A route's `data` as its model."""
    return ROUTES[name].model.model_validate(data)


def read_page(name: str, data: Any) -> models.Page[Any]:
    """A paged route's `data` as a page of its model."""
    route = ROUTES[name]
    return models.Page[route.model].model_validate(data)  # type: ignore[name-defined]


def next_params(params: dict[str, Any], page: models.Page[Any]) -> dict[str, Any] | None:
    """The query for the page after `page`, or None when it was the last."""
    return None if page.next_cursor is None else {**params, "cursor": page.next_cursor}


def headers_for(api_key: str | None) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


Http = TypeVar("Http", httpx.Client, httpx.AsyncClient)


class ClientBase(Generic[Http]):
    """The state both clients hold: the policy, the base URL, the headers every request carries and
    the httpx client (`Http`: `httpx.Client` or `httpx.AsyncClient`, made by the client's `_open`)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        max_retry_wait: float = 60.0,
        backoff_base: float = 0.5,
        backoff_cap: float = 8.0,
        etag_cache_size: int = 256,
        http_client: Http | None = None,
    ) -> None:
        self._core = Core(
            max_retries=max_retries,
            max_retry_wait=max_retry_wait,
            backoff_base=backoff_base,
            backoff_cap=backoff_cap,
            etag_cache_size=etag_cache_size,
        )
        self._base_url = base_url.rstrip("/")
        self._headers = headers_for(api_key)
        self._owns_http = http_client is None
        self._http: Http = http_client or self._open(timeout)

    def _open(self, timeout: float) -> Http:
        raise NotImplementedError

    @property
    def stats(self) -> Stats:
        return self._core.stats

    def _request(self, call: Call) -> httpx.Request:
        """`call` as an HTTP request (`build_request` sends nothing), made conditional by the ETag cache."""
        request = self._http.build_request(
            call.method,
            self._base_url + call.path,
            params=call.params,
            headers={**self._headers, **(call.headers or {})},
            files=call.files,
            json=call.json,
        )
        self._core.prepare(request)
        return request

    def _lost(self, call: Call, attempt: int, error: httpx.TransportError) -> Retry:
        """The retry after a lost connection, or `CardcatConnectionError` when none is left."""
        retry = self._core.lost_connection(call, attempt)
        if retry is None:
            raise CardcatConnectionError(f"{call.method} {call.path}: {error!r}") from error
        return retry

    def _retrying(self, retry: Retry) -> float:
        """Count a retry; how long to wait before it."""
        self._core.stats.retries += 1
        return retry.wait
