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
