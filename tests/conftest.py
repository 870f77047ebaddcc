"""Real things only: a real PostgreSQL (and SQLite), real Redis, the real server over loopback HTTP,
data loaded through the real `cardcat` CLI (see cardcat/stack.py).

PostgreSQL and Redis default to 127.0.0.1 (override with CARDCAT_TEST_POSTGRES_URL / CARDCAT_TEST_REDIS_URL).
Where they are missing, their tests skip saying why; with CI=true they fail instead.

Two tiers. A test is `slow` when it is marked so, or when its module starts what takes seconds to
minutes (SLOW_STARTS: a stack or server process of its own, Ray, the scanner, a browser, a private
database server, a renderer, the fuzzer). `bash .ci/test --fast` (`-m "not slow"`) runs the rest: the
pure logic of every package and the catalog's session stack on both backends (`service`);
`bash .ci/test` runs everything.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Generator, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import pytest

from cardcat.stack import (  # noqa: F401  (re-exported for the test modules)
    IN_CI,
    REDIS_URL,
    REPO,
    SHARED,
    SHARED_CATALOG,
    SUBSET,
    Service,
    SharedMissing,
    StackUnavailable,
    free_port,
    launch,
    launch_scanner,
    require_redis,
    require_shared,
    write_subset_feed,
)

# What, written in a test module, makes its tests slow: each starts a stack, a server process, a
# cluster, a browser or the face renderer, or fuzzes (the session's catalog stack, `service`,
# and in-process `ServerThread`s stay in the fast tier).
SLOW_STARTS = (
    "launch(",
    "launch_scanner(",
    "Service(",
    ".start(",
    "--scan",
    "fresh",
    "subprocess",
    "ray.init(",
    "serve.run(",
    "TwoNodeCluster(",
    "PrivatePostgres(",
    "PrivateRedis(",
    "playwright",
    "schemathesis",
    "render_catalog(",
    "base1_faces(",
    "scanner_stack",
)


# What, written in a test module, starts Ray Serve (the scanner, a cluster) or fills the shared face
# cache: such modules run one after another on one pytest-xdist worker, first. Two Ray clusters at once
# would halve each one's two cores, and the face cache is written in place.
ONE_AT_A_TIME = (
    "launch_scanner(", "--scan", "ray.init(", "serve.run(", "TwoNodeCluster(", "render_catalog(",
    "scanner_stack",
)  # fmt: skip
RAY_GROUP = "ray"


@cache
def _source(module: Path) -> str:
    """A test module's text, read once for both questions below (and by xdist's controller)."""
    return module.read_text(encoding="utf-8")


def starts_ray(module: Path) -> bool:
    return any(start in _source(module) for start in ONE_AT_A_TIME)


def is_slow(module: Path) -> bool:
    return any(start in _source(module) for start in SLOW_STARTS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow tier (see the module's docstring), so `-m "not slow"` leaves it out. A module is
    one tier: its tests share module-scoped stacks, whose start the first test of the module pays.
    The modules that start Ray go first, so on two workers their minutes overlap the rest's (`_order`)."""
    for item in items:
        if is_slow(Path(item.fspath)):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: _order(Path(item.fspath)))  # stable: modules keep their order


def _order(module: Path) -> tuple[bool, bool]:
    """Ray modules first; among them the ones on the session's scanner (`scanner_stack`) last, since it
    lives until the session ends and a Ray module that starts (or breaks) a cluster of its own must not
    run beside it."""
    return not starts_ray(module), "scanner_stack" in _source(module)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`pytest -n 2` (what `.ci/test` runs): a module's tests on one worker, so its module-scoped stacks
    start once, and every module that starts Ray on one worker, one after another (`RAY_GROUP`). Its
    own `--dist loadgroup` cannot do this under pytest 9 (it renames node ids, which pytest 9 ignores)."""
    from xdist.scheduler import LoadScopeScheduling

    class ModulesAndRay(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return RAY_GROUP if starts_ray(REPO / module) else module

    return ModulesAndRay(config, log)


def _stack_unavailable_as_skip(item: pytest.Item) -> Generator[None, Any, Any]:
    """What the stack could not find, in a fixture's set-up or in a test's body: a skip saying why, or
    under CI=true a failure (CI has everything but ../shared, whose absence a clone is allowed)."""
    try:
        return (yield)
    except StackUnavailable as exc:
        if IN_CI and not isinstance(exc, SharedMissing):
            pytest.fail(f"{exc} (CI=true requires it)")
        pytest.skip(str(exc))


pytest_runtest_setup = pytest_runtest_call = pytest.hookimpl(wrapper=True)(_stack_unavailable_as_skip)


@pytest.fixture(scope="session")
def feed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The subset of the real feed when ../shared is here, else the project's own sample catalog."""
    out = tmp_path_factory.mktemp("feed")
    if (SHARED_CATALOG / "cards.jsonl.gz").exists():
        return write_subset_feed(out)
    from catalog_api.ingest.demo_catalog import write_demo_catalog

    return write_demo_catalog(out)


@pytest.fixture(scope="session", params=["postgresql", "sqlite"])
def service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, feed_dir: Path
) -> Iterator[Service]:
    """The catalog service on each backend, loaded with the subset feed."""
    svc = launch(request.param, tmp_path_factory.mktemp(request.param), feed_dir)
    yield svc
    svc.stop()


# What the shared scanner indexes: reprints sharing artwork (base1/base4) and unique artworks (swsh10tg).
SCANNER_EXPANSIONS = ("base1", "base4", "swsh10tg")


@pytest.fixture(scope="session")
def scanner_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The scanner (`cardcat serve --scan`: Ray Serve behind the ingress, PostgreSQL, the shipped models)
    over SCANNER_EXPANSIONS, started once for every module that only scans through it (HTTP scans, the
    console's Scan tab, batches); each test makes its own key. Its public URL is its own address, so
    the image URLs in its answers load. Modules that need other settings launch their own."""
    require_shared()
    port = free_port()
    service = launch_scanner(
        tmp_path_factory.mktemp("scanner"),
        SCANNER_EXPANSIONS,
        port=port,
        CARDCAT_PUBLIC_URL=f"http://127.0.0.1:{port}",
    )
    yield service
    service.stop()


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Any]:
    """A factory for throwaway deployments (own database, own servers), stopped after the test."""
    made: list[Service] = []

    def make(backend: str = "postgresql", feed: Path | None = None, **extra_env: str) -> Service:
        svc = launch(backend, tmp_path / f"{backend}{len(made)}", feed, **extra_env)
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.stop()


@pytest.fixture
def wait_for_fresh_window() -> Any:
    """Rate-limit windows are fixed 60 s slots; tests that count to 300 start early in one."""

    def wait(client: httpx.Client, path: str = "/v1/series?limit=1", margin: int = 20) -> None:
        reset = int(client.get(path).headers["RateLimit"].split("reset=")[1])
        if reset < margin:
            time.sleep(reset + 0.5)

    return wait


def copy_feed(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst
