"""Scan metrics through the real scanner: `cardcat serve --workers 2 --scan` (the workers in a child
process that inherits the metrics directory), photos of real rendered cards (one blurred past reading:
a race between reprints), a blank photo and junk.

- `cardcat_scans_total{outcome}` moves by exactly the outcomes the responses show; errors by code.
- `cardcat_scan_stage_seconds{stage}` (the timings the scanner sends back with each decision) counts one
  observation per decision for decode, the first look (#47), fuse and total, one locate per answer the
  full pipeline gave (`analysis.path` full, also `cardcat_scan_paths_total`), one search per located
  card, and one read per located card whose answer the print could change (not the unique artworks the
  picture answers).
- The scanner's own `ray_cardcat_scanner_stage_seconds`, scraped from Ray's metrics export port
  (CARDCAT_SCAN_METRICS_PORT), reaches the same counts once Ray has reported them (every ~10 s). The
  uvicorn workers compose the scans themselves (serve_app.pipeline) and export it as Ray drivers; the
  app's ScanService replica, which `cardcat serve`'s ingress no longer calls per scan, observes none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from benchmarks.metrics_text import Scrape
from cardcat.stack import (
    SHARED_CATALOG,
    Service,
    create_database,
    free_port,
    require_shared,
    write_subset_feed,
)
from tests.catalog_api.helpers import eventually, ok
from tests.serve_app.test_scan_http import EXPANSIONS, HELD_OUT_SEED, face, jpeg, photo_of, scan

STAGES = ("decode", "look", "locate", "search", "read", "fuse", "total")


@pytest.fixture(scope="module")
def scanner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, int]]:
    """Like cardcat.stack.launch_scanner, but two uvicorn workers and a known Ray metrics port."""
    require_shared()
    from training.renders import DEFAULT_CACHE, render_catalog

    tmp = tmp_path_factory.mktemp("scan-metrics")
    faces = DEFAULT_CACHE / "catalog"
    render_catalog(SHARED_CATALOG, faces, EXPANSIONS, progress=False)
    feed = write_subset_feed(tmp / "feed", EXPANSIONS)
    ray_port = free_port()
    env = {"CARDCAT_SCAN_METRICS_PORT": str(ray_port)}
    service = Service(create_database("postgresql", tmp), tmp / "data", env)
    try:
        service.cli("db", "upgrade")
        service.cli("catalog", "sync", "--from", str(feed), "--images", str(faces), "--quiet")
        service.cli("index", "build", "--quiet")
        service.start("--workers", "2", "--scan", timeout=300)
        yield service, ray_port
    finally:
        service.stop()


def blurred_photo_of(card_id: str, width: int = 60) -> bytes:
    """A photo of the card's face blurred past reading (shrunk to `width` px and back): the artwork
    still matches, the print does not decide, so reprints sharing the artwork are a close race."""
    sharp = Image.fromarray(face(card_id))
    small = sharp.resize((width, round(width * sharp.height / sharp.width)), Image.Resampling.BILINEAR)
    blurred = np.asarray(small.resize(sharp.size, Image.Resampling.BILINEAR))
    from training.synth import make_photo

    return jpeg(make_photo(blurred, seed=HELD_OUT_SEED + 5, difficulty="standard").image)


def outcome(response: httpx.Response) -> str:
    if response.status_code != 200:
        return "error"
    data = ok(response)
    if data["matches"]:
        return "match" if len(data["matches"]) == 1 else "race"
    return str(data["unidentified"]["reason"])


def test_scans_move_outcomes_and_stage_latencies(scanner: tuple[Service, int]):
    service, ray_port = scanner
    metrics = f"{service.base_url}/metrics"
    before = Scrape.get(metrics)
    photos = [photo_of(card_id) for card_id in ("swsh10tg-TG01", "swsh10tg-TG03", "base1-4", "base4-4")]
    photos.append(blurred_photo_of("base1-4"))  # base1-4 and base4-4 share the artwork: a race
    photos.append(jpeg(np.full((960, 720, 3), 235, np.uint8)))  # a blank photo: unidentified
    with service.client() as client:
        client.timeout = httpx.Timeout(120)
        responses = [scan(client, photo) for photo in photos]
        responses.append(scan(client, b"not an image at all", "junk.jpg"))  # refused at the ingress
    tally = Counter(outcome(response) for response in responses)
    assert tally["match"] >= 2 and tally["race"] >= 1, tally
    assert tally["print_unreadable"] + tally["no_confident_match"] >= 1, tally
    assert tally["error"] == 1, tally
    decisions = sum(1 for response in responses if response.status_code == 200)
    located = sum(1 for response in responses if response.status_code == 200 and ok(response)["matches"])
    paths = Counter(ok(response)["analysis"]["path"] for response in responses if response.status_code == 200)
    # The cascade (#47): the sharp photos of unique artworks are answered from the first look, the race and
    # the blank photo go on to the full pipeline.
    assert paths["quick"] >= 2 and paths["full"] >= 2, paths

    for _ in range(3):  # any worker's answer sums both workers
        after = Scrape.get(metrics)
        for name in ("match", "race", "print_unreadable", "no_confident_match", "error"):
            scans = "cardcat_scans_total"
            moved = after.sum(scans, outcome=name) - before.sum(scans, outcome=name)
            assert moved == tally[name], (name, moved, tally)
        errors = "cardcat_scan_errors_total"
        assert after.sum(errors, code="unsupported_image") - before.sum(errors, code="unsupported_image") == 1

        def observed(stage: str, scrape: Scrape = after) -> float:
            count = "cardcat_scan_stage_seconds_count"
            return scrape.sum(count, stage=stage) - before.sum(count, stage=stage)

        for stage in ("decode", "look", "fuse", "total"):
            assert observed(stage) == decisions, (stage, observed(stage), decisions)
        # The full pipeline located exactly the photos answered by the full path.
        assert observed("locate") == paths["full"], (observed("locate"), paths)
        moved = {
            path: after.sum("cardcat_scan_paths_total", path=path)
            - before.sum("cardcat_scan_paths_total", path=path)
            for path in ("quick", "full")
        }
        assert moved == dict(paths), (moved, paths)
        # Every located card is searched; its face is read only where the print could change the answer
        # (`fusion.picture_answer`). The three photos of base1/base4 reprints always are (only the print
        # tells them apart); of the two standard photos of unique Trainer Gallery artworks, which the
        # picture answers alone, at least one is not read (both, unless one needed its print to stand).
        assert observed("search") >= located
        assert 3 <= observed("read") <= located - 1, (observed("read"), located)
        stage_sum = "cardcat_scan_stage_seconds_sum"
        assert after.sum(stage_sum, stage="total") > before.sum(stage_sum, stage="total")
        assert set(after.labels("cardcat_scan_stage_seconds_count", "stage")) <= set(STAGES)

    # Ray's own export of the same stages, observed where the scans were composed: the ingress workers.
    count = "ray_cardcat_scanner_stage_seconds_count"

    def ray_scrape() -> Scrape:
        scrape = Scrape.parse(httpx.get(f"http://127.0.0.1:{ray_port}/metrics", timeout=10).text)
        assert scrape.sum(count, stage="total") >= decisions, scrape.sum(count, stage="total")
        return scrape

    scrape = eventually(ray_scrape, timeout=60, interval=2)
    counts = {stage: scrape.sum(count, stage=stage) for stage in STAGES}
    print(f"outcomes {dict(tally)}; Ray stage counts {counts}")  # shown with -s: which outcomes occurred
    assert counts["decode"] == counts["look"] == counts["fuse"] == counts["total"] == decisions, counts
    assert counts["locate"] == paths["full"], counts
    assert counts["search"] == observed("search") and counts["read"] == observed("read"), counts
    assert scrape.sum(count, deployment="ScanService") == 0, "a scan went through the ScanService hop"


def test_scan_metrics_are_outside_the_api(scanner: tuple[Service, int]):
    """No key, no RateLimit headers: /metrics is not a /v1 route."""
    service, _ = scanner
    response = httpx.get(f"{service.base_url}/metrics", timeout=30)
    assert response.status_code == 200 and "ratelimit" not in response.headers
    assert Path(service.data_dir / "metrics").is_dir()


def test_batch_photos_enter_the_detector_behind_users_scans(scanner: tuple[Service, int]):
    """A batch's photos reach the Detector by its background door (`serve_app.priority`), users' scans
    by the interactive one: Ray's export of the Detector's calls counts each where it came in. This
    module's only batch photos are these two; a user's scan never counts as background."""
    service, ray_port = scanner
    calls = "ray_cardcat_scanner_detector_calls_total"
    with service.client() as client:
        client.timeout = httpx.Timeout(120)
        created = client.post("/v1/scan/batches")
        assert created.status_code == 202, created.text
        batch = created.json()["data"]["id"]
        files = [
            ("image", (f"{n}.jpg", photo_of(card), "image/jpeg"))
            for n, card in enumerate(("base1-4", "swsh10tg-TG01"))
        ]
        assert client.post(f"/v1/scan/batches/{batch}/photos", files=files).status_code == 202
        assert client.post(f"/v1/scan/batches/{batch}/close").status_code == 202

        def done() -> None:
            assert ok(client.get(f"/v1/scan/batches/{batch}"))["status"] == "done"

        eventually(done, timeout=120, interval=0.5)
        scanned = scan(client, photo_of("base1-4"))
        assert scanned.status_code == 200

    def ray_scrape() -> Scrape:
        scrape = Scrape.parse(httpx.get(f"http://127.0.0.1:{ray_port}/metrics", timeout=10).text)
        # Each batch photo comes in by the background door once, or twice where the cascade's first look
        # found the card but was not certain (the reprint base1-4) and sent it back for the full pipeline.
        assert 2 <= scrape.sum(calls, priority="background") <= 4, scrape.sum(calls, priority="background")
        assert scrape.sum(calls, priority="interactive") >= 1
        return scrape

    scrape = eventually(ray_scrape, timeout=60, interval=2)
    assert set(scrape.labels(calls, "priority")) == {"interactive", "background"}


def test_pages_count_their_answers_and_the_cards_each_listed(scanner: tuple[Service, int]):
    """`POST /v1/scan/page` (#48): pages by outcome, and how many places each answer listed."""
    from training.pages import make_page_photo

    service, _ = scanner
    metrics = f"{service.base_url}/metrics"
    ids = [f"swsh10tg-TG{n:02d}" for n in (21, 22, 23, 24)]
    page_photo = make_page_photo([(i, face(i)) for i in ids], HELD_OUT_SEED + 8, (2, 2), "standard", 0.4)
    before = Scrape.get(metrics)
    with service.client() as client:
        client.timeout = httpx.Timeout(300)
        page = ok(
            client.post("/v1/scan/page", files={"image": ("p.jpg", jpeg(page_photo.image), "image/jpeg")})
        )
        junk = client.post("/v1/scan/page", files={"image": ("p.jpg", b"not an image", "image/jpeg")})
    assert junk.status_code == 400 and page["cards"]
    for _ in range(3):  # any worker's answer sums both workers
        after = Scrape.get(metrics)
        pages = "cardcat_scan_pages_total"
        assert after.sum(pages, outcome="ok") - before.sum(pages, outcome="ok") == 1
        assert after.sum(pages, outcome="error") - before.sum(pages, outcome="error") == 1
        listed = "cardcat_scan_page_cards"
        assert after.sum(f"{listed}_count") - before.sum(f"{listed}_count") == 1
        assert after.sum(f"{listed}_sum") - before.sum(f"{listed}_sum") == len(page["cards"])
