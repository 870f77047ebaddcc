"""Bulk files: the whole catalog as four `.ndjson.gz` files (cards, products, expansions, series), so a
user can mirror it with one download per kind (`GET /v1/bulk` lists them with signed URLs).

Each line is exactly the record the detail read serves (`GET /v1/cards/{id}` and the others): cards are
built by `repository.full_cards`, the function the detail route calls, and products, expansions and
series are the records the read model serves their detail reads from, so the two cannot drift.
Order: cards in catalog order, the others in their list order.

When: `refresh` runs after every `cardcat catalog sync` and `cardcat prices sync` (and `cardcat bulk
build`, and once in the background when `cardcat serve` starts). It rebuilds only when the feeds'
versions moved since the files were built (a sync that changed nothing moves no version), and a file
whose bytes come out the same keeps its name and `generated_at`.

Safety with many processes (several syncs, several workers, one data dir): one builder at a time under
an exclusive `flock` on `<data dir>/bulk/.lock` (a second one waits, then finds the files current);
every file is written to a temporary name and renamed into place, and the manifest (`manifest.json`,
what `GET /v1/bulk` reads) is replaced last, atomically, so a reader sees the old set or the new one.
File names carry their digest, so a URL never changes meaning; the previous manifest's files are kept
(a download that started from it can finish), older ones deleted.
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlencode

import orjson
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from catalog_api.access import file_access
from catalog_api.catalog import repository
from catalog_api.catalog.readmodel import feed_versions, load_snapshot
from catalog_api.kit.private_files import open_private, private_dir, private_file, write_private
from catalog_api.kit.settings import Settings

KINDS = ("cards", "products", "expansions", "series")
CARD_BATCH = 1000
MANIFEST = "manifest.json"
# Bump when a record's shape changes in code (a new field in a detail read): files built by an older
# version are then rebuilt at the next refresh (`serve` runs one at start-up) although no feed moved.
FORMAT = 1


@dataclass
class BuildReport:
    built: bool
    seconds: float
    rows: dict[str, int]
    changed: list[str]

    def summary(self) -> dict[str, Any]:
        return {
            "built": self.built,
            "seconds": round(self.seconds, 2),
            "rows": self.rows,
            "changed": self.changed,
        }


def bulk_dir(settings: Settings) -> Path:
    return settings.data_dir / "bulk"


def read_manifest(settings: Settings) -> dict[str, Any] | None:
    """The current manifest, or None before the first build."""
    try:
        manifest: dict[str, Any] = orjson.loads((bulk_dir(settings) / MANIFEST).read_bytes())
    except FileNotFoundError:
        return None
    return manifest


def _signed_name(file_name: str) -> str:
    # Signed under their own prefix: a signature for a snapshot file never opens a bulk file.
    return f"bulk/{file_name}"


def signed_url(settings: Settings, file_name: str, key_id: int, now: float | None = None) -> str:
    """The download URL of a bulk file for API key `key_id`: valid `CARDCAT_FILE_URL_TTL_S` (issued on a
    grid, so the listing keeps its ETag a while) and only while that key is active (`file_access`)."""
    expires = file_access.bound_expiry(settings, now)
    signature = file_access.sign_bound(settings, _signed_name(file_name), expires, key_id)
    query = urlencode({"expires": expires, file_access.KEY_PARAM: key_id, "signature": signature})
    return f"{settings.public_url.rstrip('/')}/files/bulk/{file_name}?{query}"


def verify_url(settings: Settings, file_name: str, expires: str, key: str, signature: str) -> int | None:
    """The key id a bulk URL was issued to, when its signature holds and it has not expired; else None.
    URLs without a key (as issued before keys were bound, for 30 days) are refused."""
    return file_access.verify_bound(settings, _signed_name(file_name), expires, key, signature)


def listing(settings: Settings, key_id: int) -> list[dict[str, Any]] | None:
    """`GET /v1/bulk`'s items, one per kind, with URLs for key `key_id`; None before the first build."""
    manifest = read_manifest(settings)
    if manifest is None:
        return None
    return [
        {
            "kind": item["kind"],
            "url": signed_url(settings, item["file"], key_id),
            "sha256": item["sha256"],
            "bytes": item["bytes"],
            "rows": item["rows"],
            "generated_at": item["generated_at"],
        }
        for item in manifest["items"]
    ]


def file_path(settings: Settings, file_name: str) -> Path | None:
    """The file for a name a build could have written (`<kind>-<16 hex>.ndjson.gz`), never any other."""
    stem = file_name.removesuffix(".ndjson.gz")
    kind, _, digest = stem.rpartition("-")
    if stem == file_name or kind not in KINDS or len(digest) != 16:
        return None
    if not all(ch in "0123456789abcdef" for ch in digest):
        return None
    path = bulk_dir(settings) / file_name
    return path if path.is_file() else None


# --- building ---------------------------------------------------------------------------------------


@contextmanager
def _builder_lock(folder: Path) -> Iterator[None]:
    """One builder per data dir at a time, across processes (released when the process dies)."""
    private_dir(folder)
    with open(private_file(folder / ".lock"), "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


async def _card_lines(conn: AsyncConnection, public_url: str) -> AsyncIterator[bytes]:
    """Every full card object, in catalog order, a batch of cards at a time."""
    after = None
    while True:
        rows, after = await repository.catalog_page(
            conn, expansion_id=None, after=after, limit=CARD_BATCH, with_metadata=True
        )
        for record in await repository.full_cards(conn, rows, public_url):
            yield orjson.dumps(record) + b"\n"
        if after is None:
            return


class _GzipSink:
    """A deterministic gzip file (no name, no timestamp) under a temporary name, counted as it goes."""

    def __init__(self, folder: Path, kind: str) -> None:
        self.tmp = folder / f".{kind}.{os.getpid()}.tmp"
        self._raw: BinaryIO = open_private(self.tmp, exclusive=False)  # a dead builder's leftover: reused
        self._gzip = gzip.GzipFile(filename="", fileobj=self._raw, mode="wb", mtime=0, compresslevel=6)
        self.rows = 0

    def write(self, line: bytes) -> None:
        self._gzip.write(line)
        self.rows += 1

    def close(self) -> tuple[str, int]:
        self._gzip.close()
        self._raw.close()
        sha = hashlib.sha256()
        with self.tmp.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                sha.update(block)
        return sha.hexdigest(), self.tmp.stat().st_size


async def _write_all(engine: AsyncEngine, settings: Settings, folder: Path) -> dict[str, _GzipSink]:
    sinks = {kind: _GzipSink(folder, kind) for kind in KINDS}
    async with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            # One snapshot for every batch: a sync committing mid-build cannot mix two catalogs.
            await conn.execution_options(isolation_level="REPEATABLE READ")
        async for line in _card_lines(conn, settings.public_url):
            sinks["cards"].write(line)
    snapshot = await load_snapshot(engine, (0, 0))
    tables = {"products": snapshot.products, "expansions": snapshot.expansions, "series": snapshot.series}
    for kind, table in tables.items():
        for key in table.order:
            sinks[kind].write(orjson.dumps(table.records[key[-1]]) + b"\n")
    return sinks


async def refresh(engine: AsyncEngine, settings: Settings, force: bool = False) -> BuildReport:
    """Rebuild the bulk files when the feeds changed since the last build (see the module docstring)."""
    started = time.perf_counter()
    folder = bulk_dir(settings)
    with _builder_lock(folder):
        # Read before the data: a sync committing in between makes the files newer than the versions
        # they are filed under, never older, and the next refresh builds again.
        versions = [list(pair) for pair in await feed_versions(engine)]
        previous = read_manifest(settings)
        current = previous is not None and previous.get("format") == FORMAT
        if current and previous is not None and previous.get("versions") == versions and not force:
            rows = {item["kind"]: item["rows"] for item in previous["items"]}
            return BuildReport(False, time.perf_counter() - started, rows, [])
        held = {item["kind"]: item for item in (previous or {}).get("items", [])}
        sinks = await _write_all(engine, settings, folder)
        now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        items, changed = [], []
        for kind, sink in sinks.items():
            digest, size = sink.close()
            old = held.get(kind)
            if old is not None and old["sha256"] == digest:
                sink.tmp.unlink()
                items.append(old)
                continue
            file_name = f"{kind}-{digest[:16]}.ndjson.gz"
            sink.tmp.replace(folder / file_name)
            changed.append(kind)
            items.append(
                {
                    "kind": kind,
                    "file": file_name,
                    "sha256": digest,
                    "bytes": size,
                    "rows": sink.rows,
                    "generated_at": now,
                }
            )
        manifest = {"format": FORMAT, "versions": versions, "items": items}
        write_private(folder / MANIFEST, orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
        _prune(folder, manifest, previous)
    rows = {item["kind"]: item["rows"] for item in items}
    return BuildReport(True, time.perf_counter() - started, rows, changed)


def _prune(folder: Path, manifest: dict[str, Any], previous: dict[str, Any] | None) -> None:
    """Delete files neither the new nor the previous manifest names, and leftovers of dead builders."""
    keep = {item["file"] for item in manifest["items"]}
    keep |= {item["file"] for item in (previous or {}).get("items", [])}
    for path in folder.iterdir():
        if path.name.endswith(".ndjson.gz") and path.name not in keep:
            path.unlink(missing_ok=True)
        elif path.name.endswith(".tmp"):
            path.unlink(missing_ok=True)  # under the lock: no other builder is writing
