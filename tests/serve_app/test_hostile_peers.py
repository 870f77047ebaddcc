"""Hostile URL origins against the scan intake (issue 17, row 1), with the kit in tests/hostile_peers.py.

The intake runs in its own process (`IntakeServer`) and fetches from a real HTTPS origin on loopback
whose certificate comes from a test CA. Every hostile answer must be `400 url_fetch_failed`, quickly,
and must not cost the intake more than ~100 MB of RSS at its peak:

- compression bombs (brotli, gzip inside gzip, deflate) are refused unread: the fetch asks for identity
  and reads raw bytes, so a compressed reply is never inflated;
- a small image sent gzip-encoded is refused too (the same rule; before, it was inflated and accepted);
- an endless chunked body stops at the 10 MB cap, counted on the bytes that arrived;
- a drip of one byte just inside the per-read timeout is cut off at the fetch's overall deadline.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.catalog_api.helpers import failed, ok
from tests.hostile_peers import MIB, HostileOrigin, IntakeServer, OriginCA, brotli_bomb, gzip_bomb

# The intake's FetchPolicy.timeout_s here (production: 10 s); the drip comes just inside it per byte.
TIMEOUT_S = 3.0
DRIP_EVERY_S = 2.5
MAX_GROWTH = 100 * MIB


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> OriginCA:
    return OriginCA(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def origin(ca: OriginCA) -> Iterator[HostileOrigin]:
    gzip_bomb(), brotli_bomb()  # build the bombs before anything is timed
    with HostileOrigin(ca, DRIP_EVERY_S) as server:
        yield server


@pytest.fixture(scope="module")
def intake(
    ca: OriginCA, origin: HostileOrigin, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[IntakeServer]:
    log: Path = tmp_path_factory.mktemp("intake") / "intake.log"
    with IntakeServer(ca, TIMEOUT_S, log) as server:
        # Warm up (imports, TLS context, first connection) so the measurements see only the attack.
        assert ok(server.scan_url(origin.url("/ok.png")))["bytes"] > 0
        yield server


def attack(intake: IntakeServer, url: str) -> tuple[dict[str, str], float, int]:
    """POST the URL; return the error, the seconds it took and how far the intake's peak RSS rose."""
    intake.reset_peak_rss()
    baseline = intake.rss()
    started = time.monotonic()
    response = intake.scan_url(url)
    elapsed = time.monotonic() - started
    return failed(response, 400, "url_fetch_failed"), elapsed, intake.peak_rss() - baseline


def test_a_plain_image_is_still_fetched(intake: IntakeServer, origin: HostileOrigin) -> None:
    assert ok(intake.scan_url(origin.url("/ok.png")))["bytes"] > 0


@pytest.mark.parametrize("path", ["/bomb.br", "/bomb.gz", "/bomb.deflate", "/gzip.png"])
def test_a_compressed_reply_is_refused_unread(intake: IntakeServer, origin: HostileOrigin, path: str) -> None:
    if path == "/bomb.br" and brotli_bomb() is None:
        pytest.skip("the brotli package is not installed (no client here would inflate it either)")
    error, elapsed, growth = attack(intake, origin.url(path))
    assert growth < MAX_GROWTH, f"peak RSS grew by {growth / MIB:.0f} MiB"
    assert elapsed < 2, f"took {elapsed:.1f} s"
    assert "compressed" in error["message"], error


def test_an_endless_chunked_body_stops_at_the_cap(intake: IntakeServer, origin: HostileOrigin) -> None:
    error, elapsed, growth = attack(intake, origin.url("/endless"))
    assert "size limit of 10 MB" in error["message"], error
    assert elapsed < 5, f"took {elapsed:.1f} s"
    assert growth < MAX_GROWTH, f"peak RSS grew by {growth / MIB:.0f} MiB"


def test_a_slow_drip_is_cut_off_at_the_overall_deadline(intake: IntakeServer, origin: HostileOrigin) -> None:
    """No single read times out (a byte comes every 2.5 s, the per-read limit is 3 s), yet the whole
    fetch ends at its 3 s deadline."""
    error, elapsed, growth = attack(intake, origin.url("/drip"))
    assert "longer than 3 seconds" in error["message"], error
    assert TIMEOUT_S - 0.5 < elapsed < TIMEOUT_S + 1.5, f"took {elapsed:.1f} s"
    assert growth < MAX_GROWTH


def test_the_hostile_origin_stops_sending_once_its_client_hangs_up(
    intake: IntakeServer, origin: HostileOrigin
) -> None:
    """Last in the module, after every attack: the origin's thread sits idle once the intake has cut its
    reads off. Before, `/endless` never returned to the event loop, so Starlette never saw the
    disconnect and the thread kept a core busy for the rest of the pytest process (a later test took
    65 s instead of 1)."""
    attack(intake, origin.url("/endless"))
    time.sleep(0.5)  # the disconnect reaches the origin's loop
    started = time.process_time()
    time.sleep(2)
    assert time.process_time() - started < 0.5, "a thread of this process kept computing while idle"
