"""Fixed-window request budget: `limit` requests per `window` seconds per bucket (an API key).

With Redis the count is one INCR per request on a key named by the bucket and the window, shared by
every worker and replica. Without Redis each process counts for itself (the embedded single-process
default). If Redis stops answering, the limiter counts in-process until it is back rather than failing
requests.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Protocol

from redis import asyncio as aioredis
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


class RateLimiter(Protocol):
    async def hit(self, bucket: str) -> Decision: ...

    async def close(self) -> None: ...


def _window(window: int, now: float) -> tuple[int, int]:
    index = int(now // window)
    reset = max(1, math.ceil((index + 1) * window - now))
    return index, reset


class LocalRateLimiter:
    def __init__(self, limit: int, window: int) -> None:
        self.limit, self.window = limit, window
        self._counts: dict[str, tuple[int, int]] = {}

    async def hit(self, bucket: str) -> Decision:
        index, reset = _window(self.window, time.time())
        held_index, count = self._counts.get(bucket, (index, 0))
        count = count + 1 if held_index == index else 1
        if len(self._counts) > 100_000:
            self._counts = {b: v for b, v in self._counts.items() if v[0] == index}
        self._counts[bucket] = (index, count)
        return Decision(self.limit, self.window, count, reset)

    async def close(self) -> None:
        return None


class RedisRateLimiter:
    def __init__(self, url: str, limit: int, window: int) -> None:
        self.limit, self.window = limit, window
        self._redis = aioredis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self._fallback = LocalRateLimiter(limit, window)

    async def hit(self, bucket: str) -> Decision:
        index, reset = _window(self.window, time.time())
        key = f"cardcat:rl:{bucket}:{index}"
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.incr(key)
                pipe.expire(key, self.window * 2)
                count, _ = await pipe.execute()
        except (RedisError, OSError) as exc:
            log.warning("rate limiter: Redis unavailable (%s); counting in-process", exc)
            return await self._fallback.hit(bucket)
        return Decision(self.limit, self.window, int(count), reset)

    async def close(self) -> None:
        await self._redis.aclose()


def make_rate_limiter(redis_url: str, limit: int, window: int) -> RateLimiter:
    return RedisRateLimiter(redis_url, limit, window) if redis_url else LocalRateLimiter(limit, window)
