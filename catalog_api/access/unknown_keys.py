"""A short negative cache of key digests the database does not accept (unknown, revoked or expired).

Every well-formed key is looked up, so a valid key is never refused for what other keys did; this cache
only spares the database a client that repeats a bad key (a revoked key left in a cron job, a flood of
one junk key). A digest, once refused, stays refused: keys are 256 random bits, so no key created
later has it, and a revoked or expired key never comes back. The entry is short-lived anyway, so a
cache can never outlast a mistake by more than `ttl_s`.

With Redis the entries are shared by every worker and replica, under a namespace named by the database
(two databases sharing one Redis, staging and production or test runs, never refuse each other's keys).
Redis failing costs nothing but the sharing: after one failure it is not asked again for `cooldown_s`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict

from redis import asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

log = logging.getLogger(__name__)


class UnknownKeys:
    def __init__(
        self,
        redis_url: str = "",
        database_url: str = "",
        ttl_s: float = 15.0,
        max_local: int = 20_000,
        timeout_s: float = 0.1,
        cooldown_s: float = 5.0,
    ) -> None:
        self.ttl_s, self.max_local = ttl_s, max_local
        self.timeout_s, self.cooldown_s = timeout_s, cooldown_s
        self._local: OrderedDict[str, float] = OrderedDict()  # digest -> monotonic expiry
        self._prefix = "cardcat:unknown-key:" + hashlib.sha256(database_url.encode()).hexdigest()[:12] + ":"
        self._redis = (
            aioredis.from_url(
                redis_url,
                socket_timeout=timeout_s,
                socket_connect_timeout=timeout_s,
                retry=Retry(NoBackoff(), 0),
            )
            if redis_url
            else None
        )
        self._redis_skip_until = 0.0

    def __len__(self) -> int:
        return len(self._local)

    async def contains(self, digest: str) -> bool:
        expires = self._local.get(digest)
        now = time.monotonic()
        if expires is not None:
            if expires > now:
                return True
            del self._local[digest]
        if self._redis is None or now < self._redis_skip_until:
            return False
        try:
            async with asyncio.timeout(self.timeout_s):
                found = bool(await self._redis.exists(self._prefix + digest))
        except (RedisError, OSError, TimeoutError) as exc:
            self._redis_failed(exc)
            return False
        if found:
            self._remember(digest)
        return found

    async def add(self, digest: str) -> None:
        self._remember(digest)
        if self._redis is None or time.monotonic() < self._redis_skip_until:
            return
        try:
            async with asyncio.timeout(self.timeout_s):
                await self._redis.set(self._prefix + digest, b"1", px=int(self.ttl_s * 1000))
        except (RedisError, OSError, TimeoutError) as exc:
            self._redis_failed(exc)

    def _remember(self, digest: str) -> None:
        self._local.pop(digest, None)
        self._local[digest] = time.monotonic() + self.ttl_s
        while len(self._local) > self.max_local:
            self._local.popitem(last=False)

    def _redis_failed(self, exc: BaseException) -> None:
        if self._redis_skip_until == 0.0:
            log.warning("unknown-key cache: Redis unavailable (%s); kept per process", type(exc).__name__)
        self._redis_skip_until = time.monotonic() + self.cooldown_s

    async def close(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()
