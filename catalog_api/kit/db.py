"""Engines and sessions. Reads go through the async engine; sync, CLI and migrations use the sync one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Engine, String, create_engine, event, make_url
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.orm import DeclarativeBase

from catalog_api.kit.private_files import private_dir, private_file, secure_data_dir, tighten
from catalog_api.kit.settings import Settings, async_url

# Ids compare byte-wise on every backend ("C" collation on PostgreSQL, SQLite's default BINARY), so
# "lowest id first" means the same thing in SQL and in Python.
IdString = String().with_variant(String(collation="C"), "postgresql")
JSONType = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    pass


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _private_sqlite(settings: Settings, url: str) -> None:
    """The data dir made private (every process opens an engine, so this is "on start"), and a SQLite
    database file created 0600 before SQLite opens it: SQLite gives `-wal` and `-shm` the database
    file's mode, so the three stay private whatever the umask."""
    sqlite = url.startswith("sqlite")
    secure_data_dir(settings.data_dir, create=sqlite)
    database = make_url(url).database if sqlite else None
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    if not path.parent.exists():
        private_dir(path.parent)
    private_file(path)
    for suffix in ("-wal", "-shm", "-journal"):
        sidecar = path.with_name(path.name + suffix)
        if sidecar.exists():
            tighten(sidecar)


def make_engine(settings: Settings) -> Engine:
    url = settings.sqlalchemy_url
    _private_sqlite(settings, url)
    if url.startswith("sqlite"):
        engine = create_engine(url)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True)


def make_async_engine(settings: Settings) -> AsyncEngine:
    url = async_url(settings.sqlalchemy_url)
    _private_sqlite(settings, url)
    if url.startswith("sqlite"):
        engine = create_async_engine(url)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    # Each request holds one connection for the key check and one for its read: a pool that covers the
    # concurrency a worker sees avoids opening and closing connections under load.
    return create_async_engine(url, pool_size=24, max_overflow=8, pool_pre_ping=True)
