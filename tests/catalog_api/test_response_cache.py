"""The per-worker response cache (catalog_api.kit.cache, deps.read_key) under hostile queries (issue 45
item 2): its budget counts keys as well as bodies, its key keeps only the parameters the route declares
(sorted), and a key over the cap is not cached, while every answer stays the one the API gives uncached.

The app under test is the real one, served by a real uvicorn (httptools, as `cardcat serve` runs it) on
loopback in this process, over the `service` deployment's database, so the test can read the cache's
own accounting after the requests.
"""

from __future__ import annotations

import secrets
import tracemalloc
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from cardcat.stack import ServerThread, Service
from catalog_api.app import create_app
from catalog_api.kit.cache import MAX_KEY_CHARS, ResponseCache
from catalog_api.kit.settings import Settings
from tests.catalog_api.helpers import ok

JUNK_CHARS = 60_000


def _in_process(service: Service, **changes: Any) -> tuple[Any, ServerThread]:
    settings = Settings(
        database_url=service.db.url,
        data_dir=service.data_dir,
        cursor_secret="test-secret",
        rate_limit=100_000,
        access_log=False,
        **changes,
    )
    app = create_app(settings)
    return app, ServerThread(app, http="httptools")


@pytest.fixture
def served(service: Service) -> Iterator[tuple[Any, httpx.Client]]:
    """The app with its default 64 MB cache, and a client of it with a fresh key."""
    app, server = _in_process(service)
    with server, service.client(base_url=f"http://127.0.0.1:{server.port}") as client:
        yield app, client


def _junk() -> str:
    return secrets.token_hex(JUNK_CHARS // 2)


def test_junk_query_parameters_neither_make_entries_nor_escape_the_budget(
    served: tuple[Any, httpx.Client], service: Service
) -> None:
    """Reproduces issue 45 item 2: 250 reads of `/v1/cards/{id}?junk=<60 KB>` (distinct junk each) made
    250 entries whose 60 KB keys the budget never counted (a worker grew 24 MB). Now the junk is left
    out of the key: one entry, a few KB accounted, and every answer the same as without the junk."""
    app, client = served
    cache: ResponseCache = app.state.context.cache
    card_id = ok(client.get("/v1/cards", params={"limit": 1}))["items"][0]["id"]
    entries, accounted = len(cache), cache.size
    plain = client.get(f"/v1/cards/{card_id}")
    assert plain.status_code == 200
    one_entry = cache.size - accounted
    assert one_entry >= len(plain.content) + len(f"/v1/cards/{card_id}"), "the key is counted"
    for _ in range(250):
        answer = client.get(f"/v1/cards/{card_id}", params={"junk": _junk()})
        assert answer.status_code == 200
        assert answer.content == plain.content and answer.headers["ETag"] == plain.headers["ETag"]
    assert len(cache) == entries + 1, f"{len(cache) - entries} entries for one card read"
    assert cache.size == accounted + one_entry < accounted + 2 * len(plain.content) + 4096


def test_only_declared_parameters_key_an_entry_and_their_order_does_not(
    served: tuple[Any, httpx.Client], service: Service
) -> None:
    """Declared parameters still tell answers apart (`include=names` is another body), in any order
    (one entry), and the first answer through the cache is byte for byte the uncached app's."""
    app, client = served
    cache: ResponseCache = app.state.context.cache
    card_id = ok(client.get("/v1/cards", params={"limit": 1}))["items"][0]["id"]
    path = f"/v1/cards/{card_id}"
    before = len(cache)
    plain = client.get(path)
    named = client.get(f"{path}?lang=en&include=names")
    swapped = client.get(f"{path}?include=names&junk=1&lang=en")
    assert "names" in named.json()["data"] and "names" not in plain.json()["data"]
    assert swapped.content == named.content and swapped.headers["ETag"] == named.headers["ETag"]
    assert len(cache) == before + 2, "plain and include=names: two entries, whatever the order or junk"
    revalidated = client.get(
        f"{path}?junk=2&include=names&lang=en", headers={"If-None-Match": named.headers["ETag"]}
    )
    assert revalidated.status_code == 304
    _, uncached_server = _in_process(service, response_cache_mb=0)
    with uncached_server, service.client(base_url=f"http://127.0.0.1:{uncached_server.port}") as uncached:
        for query in ("", "?lang=en&include=names", "?include=names&junk=1&lang=en"):
            answer = uncached.get(path + query)
            mine = client.get(path + query)
            assert (answer.status_code, answer.content, answer.headers["ETag"]) == (
                mine.status_code,
                mine.content,
                mine.headers["ETag"],
            ), query


def test_a_declared_parameter_too_long_for_a_key_is_answered_uncached(
    served: tuple[Any, httpx.Client],
) -> None:
    """`cursor` is declared and takes any text (a cursor not issued here is ignored): 20 distinct 60 KB
    cursors are each answered like no cursor, and none is kept (the key would be over the cap)."""
    app, client = served
    cache: ResponseCache = app.state.context.cache
    first = client.get("/v1/cards", params={"limit": 2})
    before = len(cache)
    for _ in range(20):
        answer = client.get("/v1/cards", params={"limit": 2, "cursor": _junk()})
        assert answer.status_code == 200 and answer.content == first.content
    assert len(cache) == before


def test_the_budget_counts_keys() -> None:
    """The unit under the HTTP tests: an entry's cost includes its key, so 250 entries with 8 KB keys
    and 100-byte bodies stay within a 256 KB budget, measured by tracemalloc (counting bodies only,
    they held ~2 MB: the keys were free)."""
    budget = 256 * 1024
    cache = ResponseCache(budget)
    cache.put("k" * 100, b"b" * 100, '"etag"')
    assert cache.size >= 200, "key and body both counted"
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(250):
            key = f"{i:08d}" + "q" * (MAX_KEY_CHARS - 8)
            cache.put(key, secrets.token_bytes(100), '"etag"')
            del key
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert cache.size <= budget
    assert held <= budget * 1.25, f"{held} bytes held by a {budget}-byte cache"
    assert 0 < len(cache) < 250, "old entries evicted"
    cache.put("x" * (MAX_KEY_CHARS + 1), b"body", '"e"')
    assert cache.get("x" * (MAX_KEY_CHARS + 1)) is None, "a key over the cap is not kept"
