"""A local cardcat deployment for tests, benchmarks and a developer's shell: a database (PostgreSQL or
SQLite), a data dir, the real `cardcat` CLI and real server processes on loopback, with the scanner
when asked (`launch_scanner`).

What it needs and cannot find (PostgreSQL, Redis, ../shared) raises `StackUnavailable` naming it: the
test suite turns that into a skip, or a failure under CI=true (tests/conftest.py); a benchmark stops
with the message."""

from __future__ import annotations

import atexit
import gzip
import hashlib
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import httpx
import psycopg
import redis

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SHARED_CATALOG = SHARED / "catalog"
PG_ADMIN_URL = os.environ.get("CARDCAT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("CARDCAT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
IN_CI = os.environ.get("CI") == "true"
CARDCAT = [sys.executable, "-m", "cardcat.cli"]
# Expansions the fast tests load: reprints that share artwork (base1/base4), duplicate printings (ex14),
# rarity "None" (2011bw), French-only names (2013bw), TG/SV numbers (swsh10tg, sma), "001" (miscp),
# numeric and non-numeric numbers in one expansion (col1), cards without printings (swshp).
SUBSET = (
    "miscp",
    "base1",
    "base4",
    "ex14",
    "2011bw",
    "2013bw",
    "swsh4.5",
    "sma",
    "swsh10tg",
    "col1",
    "swshp",
)


class StackUnavailable(RuntimeError):
    """Something the stack needs is not here; tests skip on it, or fail under CI=true."""


class SharedMissing(StackUnavailable):
    """../shared is not beside the checkout: tests skip on it even under CI=true (a clone may lack it)."""


def unavailable(what: str) -> NoReturn:
    raise StackUnavailable(what)


def require_shared() -> None:
    if not (SHARED_CATALOG / "cards.jsonl.gz").exists():
        raise SharedMissing("../shared/catalog is not beside the checkout (it holds the real catalog feed)")


def _pg_ok() -> bool:
    try:
        psycopg.connect(PG_ADMIN_URL, connect_timeout=2, autocommit=True).close()
        return True
    except psycopg.Error:
        return False


def _redis_ok() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_timeout=1).ping())
    except redis.RedisError:
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Database:
    url: str
    backend: str
    drop: Any = None


def create_database(backend: str, tmp: Path, template: str = "") -> Database:
    """An empty database (SQLite: a file in `tmp`), or on PostgreSQL a copy of the database `template`."""
    if backend == "sqlite":
        tmp.mkdir(parents=True, exist_ok=True)
        return Database(f"sqlite:///{tmp / 'cardcat.db'}", backend)
    if not _pg_ok():
        unavailable(f"PostgreSQL not reachable at {PG_ADMIN_URL}")
    name = f"cardcat_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))

    def drop() -> None:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    return Database(f"{base}/{name}", backend, drop)


def require_redis() -> str:
    if not _redis_ok():
        unavailable(f"Redis not reachable at {REDIS_URL}")
    return REDIS_URL


@dataclass
class Service:
    """One deployment: a database, a data dir, and any number of server processes over it."""

    db: Database
    data_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    base_url: str = ""
    key: str = ""

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CARDCAT_")}
        env.update(
            CARDCAT_DATABASE_URL=self.db.url,
            CARDCAT_DATA_DIR=str(self.data_dir),
            CARDCAT_CURSOR_SECRET="test-secret",
            # `serve` runs no event deliverer unless a test asks for one (a process less per server).
            CARDCAT_DELIVER_EVENTS="false",
            # The checkout first; keep any path the caller set (a GPU box's carried packages).
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        )
        env.update(self.extra_env)
        return env

    def cli(
        self, *args: str, check: bool = True, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`cardcat ARGS` in this deployment's environment, with `env` on top for this run only."""
        run_env = {**self.env, **(env or {})}
        result = subprocess.run([*CARDCAT, *args], env=run_env, capture_output=True, text=True, cwd=REPO)
        if check and result.returncode != 0:
            raise AssertionError(f"cardcat {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    def new_key(self, name: str = "test", *extra: str) -> str:
        """A key made by the real `cardcat keys create` (the key is its last line of output)."""
        return self.cli("keys", "create", "--name", name, *extra).stdout.strip().splitlines()[-1]

    def quick_key(self) -> str:
        """A key made in-process with the same code the CLI calls (each client gets its own budget)."""
        from catalog_api.access.keys import create_key
        from catalog_api.kit.db import make_engine
        from catalog_api.kit.settings import Settings

        engine = make_engine(Settings(database_url=self.db.url, data_dir=self.data_dir))
        try:
            return create_key(engine, "test")[0]
        finally:
            engine.dispose()

    def start(self, *args: str, timeout: float = 60, port: int | None = None, **extra_env: str) -> str:
        """Start one more server process on this deployment (on `port`, else a free one); returns its
        base URL. A fixed port lets `CARDCAT_PUBLIC_URL` name this server, so image URLs reach it."""
        port = port or free_port()
        env = {**self.env, **extra_env}
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.data_dir.parent / f"server-{port}.log", "wb")  # noqa: SIM115 (lives with the server)
        proc = subprocess.Popen(
            [*CARDCAT, "serve", "--port", str(port), *args],
            env=env,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.processes.append(proc)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"server exited: {Path(log.name).read_text()[-4000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise AssertionError(
                f"server did not come up in {timeout} s: {Path(log.name).read_text()[-4000:]}"
            )
        if not self.base_url:
            self.base_url = url
        return url

    def client(self, key: str | None = None, base_url: str | None = None) -> httpx.Client:
        """An HTTP client with its own fresh key (so tests never share a rate-limit budget)."""
        headers = {"Authorization": f"Bearer {key or self.quick_key()}"}
        return httpx.Client(base_url=base_url or self.base_url, headers=headers, timeout=30)

    def stop(self) -> None:
        for proc in self.processes:
            proc.terminate()
        for proc in self.processes:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.processes.clear()
        if self.db.drop:
            self.db.drop()


def write_subset_feed(out: Path, expansions: tuple[str, ...] = SUBSET) -> Path:
    """A copy of the real feed restricted to a few expansions (in a temp dir, never in the repo)."""
    out.mkdir(parents=True, exist_ok=True)
    import orjson

    keep_series: set[str] = set()
    for name in ("expansions", "cards", "products", "series"):
        with (
            gzip.open(SHARED_CATALOG / f"{name}.jsonl.gz", "rb") as src,
            gzip.open(out / f"{name}.jsonl.gz", "wb") as dst,
        ):
            for line in src:
                record = orjson.loads(line)
                if name == "expansions" and record["id"] in expansions:
                    keep_series.add(record["series_id"])
                elif name == "expansions":
                    continue
                if name == "cards" and record["expansion_id"] not in expansions:
                    continue
                if name == "products" and not any(e["id"] in expansions for e in record["expansions"]):
                    continue
                if name == "series" and record["id"] not in keep_series:
                    continue
                dst.write(line)
    return out


# Deployments already migrated (and synced), one per backend, feed and environment in this process:
# `launch` clones them instead of running the CLI's migrations and sync again (see `_loaded`).
_LOADED: dict[tuple[str, str, tuple[tuple[str, str], ...]], Service] = {}


def _feed_digest(feed: Path | None) -> str:
    """What a feed directory holds (names, sizes, modification times): a feed rewritten in place is a
    new feed."""
    if feed is None:
        return ""
    digest = hashlib.sha256(str(feed.resolve()).encode())
    for path in sorted(feed.rglob("*")):
        stat = path.stat()
        digest.update(f"{path.relative_to(feed)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def _loaded(backend: str, feed: Path | None, extra_env: Mapping[str, str]) -> Service:
    """A deployment that the real CLI migrated (and synced from `feed`), made once per process for each
    backend, feed and environment, and never served: `launch` copies its database and data dir. A test
    run launches ~60 catalog stacks, and the CLI's migrations and sync were ~5 of each one's ~9 s."""
    key = (backend, _feed_digest(feed), tuple(sorted(extra_env.items())))
    if key not in _LOADED:
        tmp = Path(tempfile.mkdtemp(prefix="cardcat-loaded-"))
        template = Service(create_database(backend, tmp), tmp / "data", dict(extra_env))
        template.cli("db", "upgrade")
        if feed is not None:
            template.cli("catalog", "sync", "--from", str(feed), "--quiet")
        atexit.register(_drop_loaded, template, tmp)
        _LOADED[key] = template
    return _LOADED[key]


def _drop_loaded(template: Service, tmp: Path) -> None:
    if template.db.drop:
        template.db.drop()
    shutil.rmtree(tmp, ignore_errors=True)


def _clone(template: Service, tmp: Path) -> Database:
    """A new database holding exactly what `template`'s holds (PostgreSQL: `CREATE DATABASE ... TEMPLATE`,
    a file-level copy; SQLite: the backup API), with its data dir copied beside it."""
    if template.data_dir.exists():
        shutil.copytree(template.data_dir, tmp / "data", dirs_exist_ok=True)
    if template.db.backend == "sqlite":
        db = create_database("sqlite", tmp)
        path = db.url.removeprefix("sqlite:///")
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))  # private from the start, as the CLI's
        source = sqlite3.connect(template.db.url.removeprefix("sqlite:///"))
        target = sqlite3.connect(path)
        try:
            source.backup(target)
        finally:
            source.close()
            target.close()
        return db
    return create_database("postgresql", tmp, template=template.db.url.rsplit("/", 1)[1])


def launch(backend: str, tmp: Path, feed: Path | None, **extra_env: str) -> Service:
    """A deployment on its own database, migrated (and synced from `feed`) by the real CLI, with a key and
    one server process. The migrated database is cloned from one made earlier in this process with the
    same backend, feed and environment (`_loaded`), so the CLI runs once for each."""
    service = Service(_clone(_loaded(backend, feed, extra_env), tmp), tmp / "data", dict(extra_env))
    service.key = service.quick_key()
    service.start()
    return service


def launch_scanner(
    tmp: Path,
    expansions: tuple[str, ...],
    *,
    backend: str = "postgresql",
    port: int | None = None,
    env: Mapping[str, str] | None = None,
    serve_args: tuple[str, ...] = (),
    database: Database | None = None,
    **extra_env: str,
) -> Service:
    """A deployment with the scanner: faces rendered (cached), synced with --images, indexed, and
    `cardcat serve --scan [serve_args]` (Ray Serve behind the ingress) started, with `env` and
    `extra_env` set; on `database` when given (a private server an outage test stops), else a new
    database on `backend`."""
    from training.renders import DEFAULT_CACHE, render_catalog

    faces = DEFAULT_CACHE / "catalog"
    render_catalog(SHARED_CATALOG, faces, expansions, progress=False)
    feed = write_subset_feed(tmp / "feed", expansions)
    service = Service(database or create_database(backend, tmp), tmp / "data", {**(env or {}), **extra_env})
    service.cli("db", "upgrade")
    service.cli("catalog", "sync", "--from", str(feed), "--images", str(faces), "--quiet")
    service.cli("index", "build", "--quiet")
    service.key = service.new_key()
    try:
        service.start("--scan", *serve_args, timeout=300, port=port)
    except BaseException:
        service.stop()
        raise
    return service


class ServerThread:
    """A real uvicorn server on 127.0.0.1 (free port) in a background thread."""

    def __init__(self, app: Any, **config: Any) -> None:
        import uvicorn

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        cfg = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1, **config)
        self.server = uvicorn.Server(cfg)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(5)
        self.sock.close()
