"""`scan()` through the real scanner (Ray Serve behind `cardcat serve --scan`, the shipped models and an
index of real rendered faces): a photo as bytes, a face as a file path, a URL (JSON body), and the
errors a caller must see. Needs ../shared (the faces are rendered from the real catalog)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from cardcat.stack import Service, launch_scanner, require_shared
from cardcat_client import AsyncCardcatClient, CardcatClient, CardcatError, models

EXPANSION = "swsh10tg"  # unique artworks: one confident match expected
CARD = "swsh10tg-TG05"


@pytest.fixture(scope="module")
def scanner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    require_shared()
    service = launch_scanner(tmp_path_factory.mktemp("client-scan"), (EXPANSION,), backend="sqlite")
    yield service
    service.stop()


def test_scan_a_photo_a_file_and_a_url(scanner: Service) -> None:
    from tests.serve_app.test_scan_http import photo_of
    from training.renders import DEFAULT_CACHE

    face = Path(DEFAULT_CACHE / "catalog" / CARD / "high.jpg")
    with CardcatClient(scanner.base_url, api_key=scanner.quick_key(), timeout=120) as cat:
        by_path = cat.scan(face)
        assert isinstance(by_path, models.ScanResult)
        assert [m.card.id for m in by_path.matches] == [CARD] and by_path.unidentified is None
        match = by_path.matches[0]
        assert 0 < match.score <= 1 and match.card.expansion.id == EXPANSION and match.card.image
        assert by_path.analysis.game == "cardgame"

        by_bytes = cat.scan(photo_of(CARD))
        assert by_bytes.matches and by_bytes.matches[0].card.id == CARD

        with pytest.raises(CardcatError) as not_allowed:
            cat.scan("https://127.0.0.1/card.jpg")  # the JSON shape; the server refuses private hosts
        assert (not_allowed.value.status, not_allowed.value.code) == (400, "url_not_allowed")
        with pytest.raises(CardcatError) as junk:
            cat.scan(b"this is not a photo")
        assert (junk.value.status, junk.value.code) == (400, "unsupported_image")
        assert cat.stats.retries == 0


def test_the_async_client_scans(scanner: Service) -> None:
    from training.renders import DEFAULT_CACHE

    face = (DEFAULT_CACHE / "catalog" / CARD / "high.jpg").read_bytes()

    async def run() -> models.ScanResult:
        async with AsyncCardcatClient(scanner.base_url, api_key=scanner.quick_key(), timeout=120) as cat:
            return await cat.scan(face)

    result = asyncio.run(run())
    assert [m.card.id for m in result.matches] == [CARD]


def test_both_clients_scan_a_binder_page(scanner: Service, tmp_path: Path) -> None:
    """`scan_page` (#48) on both clients: every card of a 2x2 page named, in its pocket."""
    from tests.serve_app.test_scan_http import face, jpeg
    from training.pages import make_page_photo

    ids = [f"{EXPANSION}-TG{n:02d}" for n in (11, 12, 13, 14)]
    photo = make_page_photo([(i, face(i)) for i in ids], 20_700_001, (2, 2), "standard", 0.4, back_p=0.0)
    path = tmp_path / "page.jpg"
    path.write_bytes(jpeg(photo.image))
    truth = {card.slot: card.card_id for card in photo.cards if card.kind == "card"}

    def named(page: models.PageResult) -> dict[tuple[int, int], str]:
        return {(c.slot.row, c.slot.col): c.matches[0].card.id for c in page.cards if c.slot and c.matches}

    with CardcatClient(scanner.base_url, api_key=scanner.quick_key(), timeout=300) as cat:
        page = cat.scan_page(path)
    assert isinstance(page, models.PageResult) and page.layout == "grid" and not page.truncated
    assert named(page) == truth

    async def run() -> models.PageResult:
        async with AsyncCardcatClient(scanner.base_url, api_key=scanner.quick_key(), timeout=300) as cat:
            return await cat.scan_page(path.read_bytes())

    assert named(asyncio.run(run())) == truth


def readme_example(path: Path) -> str:
    text = path.read_text()
    start = text.index("```python\nfrom pathlib import Path\nfrom cardcat_client import") + len("```python\n")
    return text[start : text.index("```", start)]


def test_the_readme_example_runs(scanner: Service, capsys: pytest.CaptureFixture[str]) -> None:
    """The example in README.md (the same as in clients/python/README.md), run against this deployment:
    its address, a fresh key, a card of the index and that card's face as the photo."""
    from training.renders import DEFAULT_CACHE

    root = Path(__file__).resolve().parents[2]
    example = readme_example(root / "README.md")
    assert example == readme_example(root / "clients" / "python" / "README.md")
    assert len(example.strip().splitlines()) <= 12
    face = str(DEFAULT_CACHE / "catalog" / CARD / "high.jpg")
    for old, new in (
        ("http://127.0.0.1:8000", scanner.base_url),
        ("cc_...", scanner.quick_key()),
        ("base1-4", CARD),
        ("photo.jpg", face),
    ):
        assert old in example
        example = example.replace(old, new)
    exec(compile(example, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    with CardcatClient(scanner.base_url, api_key=scanner.quick_key()) as cat:
        name = cat.card(CARD).name
    assert any(line.endswith(str([name])) for line in printed), printed
    assert printed[-1].startswith("404 not_found ")


def test_a_batch_through_both_clients_on_sqlite(scanner: Service) -> None:
    """Scan batches on the embedded database (this deployment is SQLite), through the real worker and
    scanner: photos as bytes and as a path, safe retries, waiting, and every answer read back once."""
    from training.renders import DEFAULT_CACHE

    face_path = DEFAULT_CACHE / "catalog" / CARD / "high.jpg"
    with CardcatClient(scanner.base_url, api_key=scanner.quick_key(), timeout=120) as cat:
        batch = cat.create_batch(idempotency_key="sqlite-batch")
        assert batch.status == "open" and cat.create_batch(idempotency_key="sqlite-batch").id == batch.id
        photos = [face_path.read_bytes(), face_path]
        assert cat.add_photos(batch.id, photos, idempotency_key="two-photos").photos.total == 2
        assert cat.add_photos(batch.id, photos, idempotency_key="two-photos").photos.total == 2  # replayed
        with pytest.raises(CardcatError) as reused:  # the key again, for other photos
            cat.add_photos(batch.id, photos[:1], idempotency_key="two-photos")
        assert (reused.value.status, reused.value.code) == (409, "conflict")
        cat.close_batch(batch.id)
        done = cat.wait_batch(batch.id, poll_s=0.3, timeout_s=120)
        assert done.status == "done" and done.outcomes.match == 2
        results = list(cat.batch_results(batch.id))
        assert sorted(r.index for r in results) == [0, 1]
        assert {r.name for r in results} == {"photo-1.jpg", "high.jpg"}
        assert all([m.card.id for m in r.matches] == [CARD] and r.error is None for r in results)
        with pytest.raises(CardcatError) as refused:
            cat.add_photos(batch.id, [face_path])
        assert (refused.value.status, refused.value.code) == (409, "conflict")
    assert not (scanner.data_dir / "batches" / batch.id).exists() or not any(
        (scanner.data_dir / "batches" / batch.id).iterdir()
    )

    async def run() -> tuple[models.Batch, list[models.BatchResult]]:
        async with AsyncCardcatClient(scanner.base_url, api_key=scanner.quick_key(), timeout=120) as cat:
            opened = await cat.create_batch()
            await cat.add_photos(opened.id, [face_path])
            await cat.close_batch(opened.id)
            finished = await cat.wait_batch(opened.id, poll_s=0.3, timeout_s=120)
            return finished, [result async for result in cat.batch_results(opened.id)]

    finished, answers = asyncio.run(run())
    assert finished.status == "done" and [[m.card.id for m in a.matches] for a in answers] == [[CARD]]
