"""The pieces of the gate's key handling that need no server (issue 45, items 1 and 10): the anonymous
bucket of an address, and the unknown-key cache with and without Redis."""

from __future__ import annotations

import asyncio
import secrets

import pytest

from cardcat.stack import require_redis
from catalog_api.access.ratelimit import client_of
from catalog_api.access.unknown_keys import UnknownKeys


@pytest.mark.parametrize(
    ("address", "client"),
    [
        ("203.0.113.9", "203.0.113.9"),
        ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("::ffff:203.0.113.9", "203.0.113.9"),
        ("::1", "::/64"),
        ("unknown", "unknown"),
    ],
)
def test_an_ipv6_address_is_bucketed_by_its_slash_64(address: str, client: str) -> None:
    """On a73d9a9 the bucket was the exact address, so a /64 was 2**64 budgets."""
    assert client_of(address) == client


def test_refused_digests_expire_and_stay_bounded() -> None:
    async def scenario() -> None:
        cache = UnknownKeys(ttl_s=0.2, max_local=3)
        for digest in "abcd":
            await cache.add(digest)
        assert len(cache) == 3 and not await cache.contains("a"), "the oldest is dropped past the bound"
        assert await cache.contains("d")
        await asyncio.sleep(0.25)
        assert not await cache.contains("d"), "an entry lives ttl_s, no longer"

    asyncio.run(scenario())


def test_a_refusal_is_shared_through_redis_within_one_database_only() -> None:
    redis_url = require_redis()
    digest = secrets.token_hex(32)

    async def scenario() -> None:
        worker_a = UnknownKeys(redis_url, "postgresql://db/one")
        worker_b = UnknownKeys(redis_url, "postgresql://db/one")
        other_database = UnknownKeys(redis_url, "postgresql://db/two")
        try:
            assert not await worker_b.contains(digest)
            await worker_a.add(digest)
            assert await worker_b.contains(digest), "another worker on the same database sees it"
            assert not await other_database.contains(digest), "a database sharing Redis does not"
        finally:
            for cache in (worker_a, worker_b, other_database):
                await cache.close()

    asyncio.run(scenario())


def test_a_dead_redis_leaves_the_cache_per_process() -> None:
    async def scenario() -> None:
        cache = UnknownKeys("redis://127.0.0.1:1/0", timeout_s=0.05)
        try:
            await cache.add("x")
            assert await cache.contains("x") and not await cache.contains("y")
        finally:
            await cache.close()

    asyncio.run(scenario())
