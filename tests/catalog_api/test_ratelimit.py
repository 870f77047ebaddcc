"""300 requests / 60 s per key with `RateLimit` headers on every /v1 response, 304s counted, and the
budget shared across processes through Redis."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.catalog_api.helpers import failed
from tests.conftest import Service, require_redis

HEADER = re.compile(r"limit=300, remaining=(\d+), reset=(\d+)")


def remaining(response: Any) -> int:
    match = HEADER.fullmatch(response.headers["RateLimit"])
    assert match, response.headers["RateLimit"]
    assert 1 <= int(match.group(2)) <= 60
    assert response.headers["RateLimit-Policy"] == "300;w=60"
    return int(match.group(1))


def test_headers_on_every_kind_of_v1_response(service: Service):
    with service.client() as client:
        ok_response = client.get("/v1/cards", params={"limit": 1})
        etag = ok_response.headers["ETag"]
        responses = [
            ok_response,
            client.get("/v1/cards", params={"limit": 1}, headers={"If-None-Match": etag}),
            client.get("/v1/cards/nope"),
            client.get("/v1/unknown"),
            client.post("/v1/cards"),
            client.get("/v1/cards", params={"q": ""}),
        ]
        assert [r.status_code for r in responses] == [200, 304, 404, 404, 405, 400]
        counts = [remaining(r) for r in responses]
    assert counts == sorted(counts, reverse=True) and len(set(counts)) == len(counts), counts


def test_429_after_300_with_304s_counted(service: Service, wait_for_fresh_window: Any):
    with service.client() as client:
        wait_for_fresh_window(client)
        first = client.get("/v1/cards", params={"limit": 1})
        used = 300 - remaining(first)
        etag = first.headers["ETag"]
        statuses = []
        for _ in range(300 - used):
            response = client.get("/v1/cards", params={"limit": 1}, headers={"If-None-Match": etag})
            statuses.append(response.status_code)
        assert set(statuses) == {304}
        assert remaining(response) == 0
        limited = client.get("/v1/cards", params={"limit": 1}, headers={"If-None-Match": etag})
        error = failed(limited, 429, "rate_limited")
        assert error["message"]
        retry_after = int(limited.headers["Retry-After"])
        assert 1 <= retry_after <= 60
        assert remaining(limited) == 0
        failed(client.get("/v1/series"), 429, "rate_limited")
    with service.client() as other:  # another key has its own budget
        assert other.get("/v1/series").status_code == 200


def test_redis_shares_the_budget_across_processes(fresh: Any, feed_dir: Any, wait_for_fresh_window: Any):
    redis_url = require_redis()
    svc = fresh("postgresql", feed_dir, CARDCAT_REDIS_URL=redis_url)
    second = svc.start()
    key = svc.quick_key()
    with svc.client(key) as a, svc.client(key, base_url=second) as b:
        wait_for_fresh_window(a)
        seen = []
        for i in range(40):
            seen.append(remaining((a if i % 2 else b).get("/v1/series", params={"limit": 1})))
        assert seen == list(range(seen[0], seen[0] - 40, -1)), "each process sees the other's requests"
        while seen[-1] > 0:
            seen.append(remaining((a if len(seen) % 2 else b).get("/v1/series", params={"limit": 1})))
        failed(a.get("/v1/series"), 429, "rate_limited")
        failed(b.get("/v1/series"), 429, "rate_limited")


def test_without_redis_each_process_counts_alone(fresh: Any, feed_dir: Any):
    svc = fresh("sqlite", feed_dir)
    second = svc.start()
    key = svc.quick_key()
    with svc.client(key) as a, svc.client(key, base_url=second) as b:
        first_a = remaining(a.get("/v1/series"))
        first_b = remaining(b.get("/v1/series"))
    assert first_a == first_b == 299


@pytest.mark.parametrize("path", ["/v1/cards", "/v1/cards/nope", "/v1/nothing"])
def test_unauthenticated_requests_are_counted_per_client(service: Service, path: str):
    import httpx

    response = httpx.get(f"{service.base_url}{path}")
    failed(response, 401, "unauthorized")
    assert remaining(response) < 300
