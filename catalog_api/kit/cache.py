"""Response bodies of `/v1` reads, by request and data version.

Catalog data changes only when a feed syncs, so a read's body is a function of its path, its query and
the feed versions. Keeping recent bodies (and their ETags) lets a repeated read, and above all a 304
revalidation, skip the database and serialisation entirely. A sync bumps a feed version, which every
worker notices within a second (see snapshot.py); entries of older versions are never served again.

The budget counts what an entry holds in memory, its key included: the key is built from the request
(`deps.read_key`), so a client choosing long queries must pay for them in the same budget as bodies
(counting bodies only let 250 requests with 60 KB of junk in the query grow a worker by 24 MB, and the
64 MB budget allow gigabytes). A key longer than `max_key_chars` is not cached at all.
"""

from __future__ import annotations

import sys
from collections import OrderedDict

# What an entry costs beyond its key, body and ETag objects: its (body, etag) tuple and its slot in the
# ordered dict (hash table entry and linked-list node), rounded up.
ENTRY_OVERHEAD = 200
# The longest key cached: a request naming 200 card ids (`GET /v1/cards?ids=`, the most a route
# accepts) normalises to about 4,000 characters; anything longer is answered uncached.
MAX_KEY_CHARS = 8192


def entry_cost(key: str, body: bytes, etag: str) -> int:
    """Bytes an entry holds: the key's, body's and ETag's objects as Python sizes them, plus the
    container overhead."""
    return sys.getsizeof(key) + sys.getsizeof(body) + sys.getsizeof(etag) + ENTRY_OVERHEAD


class ResponseCache:
    def __init__(self, max_bytes: int, max_key_chars: int = MAX_KEY_CHARS) -> None:
        self.max_bytes = max_bytes
        self.max_key_chars = max_key_chars
        self._entries: OrderedDict[str, tuple[bytes, str]] = OrderedDict()
        self._bytes = 0

    @property
    def size(self) -> int:
        """What the entries held now cost, keys included (never above `max_bytes`)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> tuple[bytes, str] | None:
        if len(key) > self.max_key_chars:
            return None
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key: str, body: bytes, etag: str) -> None:
        """Keep an answer, evicting the least recently used ones past the budget. An entry over an
        eighth of the budget, or with a key over `max_key_chars`, is not kept."""
        if len(key) > self.max_key_chars:
            return
        cost = entry_cost(key, body, etag)
        if cost > self.max_bytes // 8:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= entry_cost(key, *old)
        self._entries[key] = (body, etag)
        self._bytes += cost
        while self._bytes > self.max_bytes and self._entries:
            evicted_key, evicted = self._entries.popitem(last=False)
            self._bytes -= entry_cost(evicted_key, *evicted)
