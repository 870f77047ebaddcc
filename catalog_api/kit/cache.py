"""Response bodies of `/v1` reads, by request and data version.

Catalog data changes only when a feed syncs, so a read's body is a function of its path, its query and
the feed versions. Keeping recent bodies (and their ETags) lets a repeated read, and above all a 304
revalidation, skip the database and serialisation entirely. A sync bumps a feed version, which every
worker notices within a second (see snapshot.py); entries of older versions are never served again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable


class ResponseCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[bytes, str]] = OrderedDict()
        self._bytes = 0

    def get(self, key: Hashable) -> tuple[bytes, str] | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key: Hashable, body: bytes, etag: str) -> None:
        if len(body) > self.max_bytes // 8:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= len(old[0])
        self._entries[key] = (body, etag)
        self._bytes += len(body)
        while self._bytes > self.max_bytes and self._entries:
            _, (evicted, _) = self._entries.popitem(last=False)
            self._bytes -= len(evicted)
