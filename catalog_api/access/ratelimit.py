"""Fixed-window request budget: `limit` requests per `window` seconds per bucket (an API key).

With Redis the count is one INCR per request on a key named by the bucket and the window, shared by
every worker and replica. Without Redis each process counts for itself (the embedded single-process
default). If Redis stops answering (down, or hung so that nothing comes back), a circuit breaker counts
in-process for a few seconds at a time, logging when it opens and when Redis is back, so requests never
queue behind a dead Redis; only one request per cool-down spends the short Redis timeout to probe it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from redis import asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decision:
    limit: int
    window: int
    count: int
    reset: int

    @property
    def allowed(self) -> bool:
        return self.count <= self.limit

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.count)

    def headers(self) -> list[tuple[bytes, bytes]]:
        headers = [
            (b"ratelimit", f"limit={self.limit}, remaining={self.remaining}, reset={self.reset}".encode()),
            (b"ratelimit-policy", f"{self.limit};w={self.window}".encode()),
        ]
        if not self.allowed:
            headers.append((b"retry-after", str(self.reset).encode()))
        return headers


def client_of(address: str) -> str:
    """Who a client address counts as, in the buckets of requests without a key: IPv4 as it is, IPv6 by
    its /64 (one subscriber's allocation), an IPv4-mapped IPv6 address as its IPv4 address, anything
    unparsable (a Unix socket's peer) as its text."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class RateLimiter(Protocol):
    async def hit(self, bucket: str) -> Decision: ...

    async def close(self) -> None: ...


def _window(window: int, now: float) -> tuple[int, int]:
    index = int(now // window)
    reset = max(1, math.ceil((index + 1) * window - now))
    return index, reset


class LocalRateLimiter:
    """Counts in this process. Only the current window is kept (older counts can never matter again), so
    a new window starts from an empty table; within a window at most `max_buckets` are held, the least
    recently used dropped first, so a flood of distinct clients costs O(1) per request and bounded memory
    (a dropped bucket just starts counting again)."""

    def __init__(
        self,
        limit: int,
        window: int,
        max_buckets: int = 200_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.limit, self.window, self.max_buckets = limit, window, max_buckets
        self._clock = clock
        self._index = -1
        self._counts: OrderedDict[str, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._counts)

    async def hit(self, bucket: str) -> Decision:
        return self.hit_now(bucket)

    def hit_now(self, bucket: str) -> Decision:
        index, reset = _window(self.window, self._clock())
        if index != self._index:
            self._index, self._counts = index, OrderedDict()
        count = self._counts.pop(bucket, 0) + 1
        self._counts[bucket] = count  # now the most recently used
        if len(self._counts) > self.max_buckets:
            self._counts.popitem(last=False)
        return Decision(self.limit, self.window, count, reset)

    async def close(self) -> None:
        return None


class RedisRateLimiter:
    """Counts in Redis, shared by every process; falls back to `LocalRateLimiter` while Redis fails."""

    def __init__(
        self,
        url: str,
        limit: int,
        window: int,
        timeout_s: float = 0.1,
        cooldown_s: float = 5.0,
    ) -> None:
        self.limit, self.window = limit, window
        self.timeout_s, self.cooldown_s = timeout_s, cooldown_s
        # No retries inside redis-py (its default is 3, with backoff): a failure must cost one timeout.
        self._redis = aioredis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
        )
        self._fallback = LocalRateLimiter(limit, window)
        # While monotonic() < _open_until the breaker is open: count in-process, do not ask Redis.
        self._open_until = 0.0
        self._failing = False

    async def hit(self, bucket: str) -> Decision:
        now = time.monotonic()
        if now < self._open_until:
            return self._fallback.hit_now(bucket)
        if self._failing:
            # Half-open: this request probes Redis; the others keep counting in-process meanwhile.
            self._open_until = now + self.cooldown_s
        index, reset = _window(self.window, time.time())
        key = f"cardcat:rl:{bucket}:{index}"
        try:
            async with asyncio.timeout(self.timeout_s):  # a hung Redis (or a full pool) waits no longer
                async with self._redis.pipeline(transaction=False) as pipe:
                    pipe.incr(key)
                    pipe.expire(key, self.window * 2)
                    count, _ = await pipe.execute()
        except (RedisError, OSError, TimeoutError) as exc:
            self._open_until = time.monotonic() + self.cooldown_s
            if not self._failing:
                log.warning(
                    "rate limiter: Redis unavailable (%s); counting in-process (per process, not shared) "
                    "and retrying Redis every %g s",
                    exc.__class__.__name__ if isinstance(exc, TimeoutError) else exc,
                    self.cooldown_s,
                )
            self._failing = True
            return self._fallback.hit_now(bucket)
        if self._failing:
            log.warning("rate limiter: Redis is back; counting in Redis again")
            self._failing, self._open_until = False, 0.0
        return Decision(self.limit, self.window, int(count), reset)

    async def close(self) -> None:
        await self._redis.aclose()


def make_rate_limiter(redis_url: str, limit: int, window: int) -> RateLimiter:
    return RedisRateLimiter(redis_url, limit, window) if redis_url else LocalRateLimiter(limit, window)
