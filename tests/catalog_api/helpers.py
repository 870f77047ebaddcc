"""Small helpers shared by the API tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

T = TypeVar("T")


def ok(response: httpx.Response) -> Any:
    """The `data` of a successful envelope (asserting the envelope's rules on the way)."""
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"data", "error"} and body["error"] is None and body["data"] is not None
    return body["data"]


def failed(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"data", "error"} and body["data"] is None
    assert body["error"]["code"] == code and body["error"]["message"]
    return body["error"]


def walk(client: httpx.Client, path: str, **params: Any) -> list[dict[str, Any]]:
    """Every row of a list endpoint, following `next_cursor` until it is null."""
    rows: list[dict[str, Any]] = []
    cursor = None
    for _ in range(10_000):
        query = {**params, **({"cursor": cursor} if cursor else {})}
        data = ok(client.get(path, params=query))
        rows.extend(data["items"])
        cursor = data["next_cursor"]
        if cursor is None:
            return rows
    raise AssertionError("walk did not end")


def eventually(check: Callable[[], T], timeout: float = 10.0, interval: float = 0.1) -> T:
    """Retry `check` until it stops raising AssertionError (a worker re-reads the feed version about
    once a second; a deliverer polls): the last failure is raised after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(interval)
