"""The web console in a real headless Chromium against the real server: a typo search to a card page
with its prices, cursor paging, a bad key, errors in words, a photo scanned by the real Ray Serve
scanner, and a batch of photos on the Batches tab. Every check compares what the page shows with what
the API answers for the same request."""

from __future__ import annotations

import csv
import io
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image

from cardcat.stack import (
    SHARED_CATALOG,
    Service,
    create_database,
    free_port,
)
from catalog_api.batches.exports import CARDCAT_COLUMNS
from tests.catalog_api.helpers import ok
from tests.conftest import SCANNER_EXPANSIONS
from tests.console.browser import ConsolePage, chromium

# The faces the scanner tests render too (cached in ~/.cache/cardcat/renders): base1/base4 share artwork.
FACES = ("base1", "base4", "swsh10tg")
TIMEOUT_MS = 30_000
HELD_OUT_SEED = 20_000_000


def has_shared() -> bool:
    return (SHARED_CATALOG / "cards.jsonl.gz").exists()


def rendered_faces() -> Path:
    from training.renders import DEFAULT_CACHE, render_catalog

    render_catalog(SHARED_CATALOG, DEFAULT_CACHE / "catalog", FACES, progress=False)
    return DEFAULT_CACHE / "catalog"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as found:
        yield found


@pytest.fixture(scope="module", params=["postgresql", "sqlite"])
def catalog(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, feed_dir: Path
) -> Iterator[Service]:
    """The catalog service (no scanner) with faces where ../shared is here and a 31-day price feed,
    on a port its `CARDCAT_PUBLIC_URL` names, so the card images the page shows come from it."""
    from catalog_api.prices.demo_prices import write_demo_prices

    tmp = tmp_path_factory.mktemp(f"console-{request.param}")
    port = free_port()
    service = Service(
        create_database(request.param, tmp), tmp / "data", {"CARDCAT_PUBLIC_URL": f"http://127.0.0.1:{port}"}
    )
    try:
        service.cli("db", "upgrade")
        images = ["--images", str(rendered_faces())] if has_shared() else []
        service.cli("catalog", "sync", "--from", str(feed_dir), *images, "--quiet")
        service.cli("prices", "sync", "--from", str(write_demo_prices(feed_dir, tmp / "prices")), "--quiet")
        service.key = service.new_key()
        service.start(port=port)
        yield service
    finally:
        service.stop()


@pytest.fixture
def tab(browser: Any, catalog: Service) -> Iterator[ConsolePage]:
    console = ConsolePage(browser, catalog.base_url)
    yield console
    assert console.problems == []
    console.close()


def typo_query(client: httpx.Client) -> tuple[str, str]:
    """A misspelt name and the name it means: "charzard" on the real feed, else a demo card's name
    with one letter dropped."""
    if has_shared():
        return "charzard", "Charizard"
    name = ok(client.get("/v1/cards", params={"limit": 1}))["items"][0]["name"]
    return name[:2] + name[3:], name


def all_images_loaded(page: Any, scope: str) -> None:
    page.wait_for_function(
        f"""() => {{
            const images = [...document.querySelectorAll({scope!r} + ' img')];
            return images.length > 0 && images.every((i) => i.complete && i.naturalWidth > 0);
        }}""",
        timeout=TIMEOUT_MS,
    )


def dollars(cents: int | None) -> str:
    return "–" if cents is None else f"${cents / 100:.2f}"


def test_a_typo_search_leads_to_a_card_page_with_its_prices(tab: ConsolePage, catalog: Service):
    from playwright.sync_api import expect

    with catalog.client(catalog.key) as client:
        query, name = typo_query(client)
        expected = ok(client.get("/v1/cards", params={"q": query, "limit": 30}))["items"]
        page = tab.open("", key=catalog.key)
        page.fill("#q", query)
        page.click("#search-form button[type=submit]")
        tiles = page.locator("#results .tile")
        expect(tiles.first).to_contain_text(name, timeout=TIMEOUT_MS)
        assert tiles.evaluate_all("ts => ts.map(t => t.dataset.cardId)") == [row["id"] for row in expected]
        assert name in expected[0]["name"]
        expect(tiles.first.locator(".score")).to_have_text(f"match {expected[0]['score'] * 100:.0f}%")
        if expected[0]["image"]:
            all_images_loaded(page, "#results")
        tab.screenshot("console-search.png")

        # The first Charizard with prices: open it from the grid.
        detail = next(
            card
            for card in (ok(client.get(f"/v1/cards/{row['id']}")) for row in expected)
            if name in card["name"] and any(v["marketplace"] for v in card["variants"])
        )
        page.click(f'#results .tile[data-card-id="{detail["id"]}"]')
        expect(page.locator("#card h1")).to_have_text(detail["name"], timeout=TIMEOUT_MS)
        assert page.url.endswith(f"#/card/{detail['id']}")
        for variant in detail["variants"]:
            section = page.locator(f'.printing[data-variant-id="{variant["id"]}"]')
            rows = section.locator("table.prices tbody tr")
            shown = rows.evaluate_all("rs => rs.map(r => [...r.cells].map(c => c.textContent))")
            assert shown == [
                [
                    price["condition"],
                    dollars(price["market"]),
                    dollars(price["low"]),
                    dollars(price["high"]),
                    "–" if price["listing_count"] is None else str(price["listing_count"]),
                    price["observed_on"],
                ]
                for price in variant["marketplace"]
            ]
            history = client.get(f"/v1/cards/{detail['id']}/prices", params={"variant_id": variant["id"]})
            chart = section.locator(".chart")
            if history.status_code == 404:  # a server without price history: the page says so
                expect(chart).to_have_text("No price history.", timeout=TIMEOUT_MS)
            else:
                points = ok(history)["points"]
                expect(chart.locator("svg polyline").first).to_be_visible(timeout=TIMEOUT_MS)
                expect(chart.locator(".chart-caption")).to_contain_text(points[-1]["date"])
        expansion = ok(client.get(f"/v1/expansions/{detail['expansion_id']}"))
        expect(page.locator(".facts")).to_contain_text(expansion["name"], timeout=TIMEOUT_MS)
        row = next(
            r
            for r in ok(
                client.get(
                    "/v1/cards",
                    params={
                        "q": detail["name"],
                        "expansion_id": detail["expansion_id"],
                        "include": "change",
                        "limit": 200,
                    },
                )
            )["items"]
            if r["id"] == detail["id"]
        )
        changes = page.locator(".changes")
        if row.get("change"):
            windows = sorted(row["change"], key=lambda c: ["1d", "7d", "30d"].index(c["window"]))
            expect(changes.locator("tbody tr")).to_have_count(len(windows), timeout=TIMEOUT_MS)
            first = changes.locator("tbody tr").first
            expect(first).to_contain_text(windows[0]["window"])
            expect(first).to_contain_text(dollars(windows[0]["end_cents"]))
        else:
            expect(changes).to_contain_text("No price change computed", timeout=TIMEOUT_MS)
        if detail["image"]:
            all_images_loaded(page, "#card .card-top")
            faces = page.locator("#card .card-top img").evaluate_all("is => is.map(i => i.src)")
            assert faces == [detail["image"]["low"], detail["image"]["high"]]
        text = page.locator("#card").inner_text()
        assert "null" not in text.split() and "undefined" not in text and "NaN" not in text
        tab.screenshot("console-card.png")


def test_more_walks_the_cursor_pages_of_an_expansion(tab: ConsolePage, catalog: Service):
    from playwright.sync_api import expect

    with catalog.client(catalog.key) as client:
        counts: dict[str, int] = {}
        for row in ok(client.get("/v1/cards", params={"limit": 200}))["items"]:
            counts[row["expansion_id"]] = counts.get(row["expansion_id"], 0) + 1
        expansion = max(counts, key=lambda e: counts[e])
        walked: list[str] = []
        cursor = None
        while True:
            params = {"expansion_id": expansion, "limit": 30, **({"cursor": cursor} if cursor else {})}
            data = ok(client.get("/v1/cards", params=params))
            walked += [row["id"] for row in data["items"]]
            cursor = data["next_cursor"]
            if cursor is None:
                break
    assert len(walked) > 30, "the expansion must span more than one page"
    page = tab.open("", key=catalog.key)
    expect(page.locator("#expansion option")).not_to_have_count(1, timeout=TIMEOUT_MS)
    page.select_option("#expansion", expansion)
    # The key's own browse page also shows 30 tiles, often the same first 30: wait for the expansion's
    # answer (the grid is emptied before it is asked for) so the count below is the expansion's.
    with page.expect_response(lambda r: f"expansion_id={expansion}" in r.url and "/v1/cards?" in r.url):
        page.click("#search-form button[type=submit]")
    tiles = page.locator("#results .tile")
    expect(tiles).to_have_count(30, timeout=TIMEOUT_MS)
    while page.locator("#more").is_visible():
        before = tiles.count()
        page.click("#more")
        expect(tiles).not_to_have_count(before, timeout=TIMEOUT_MS)
    assert tiles.evaluate_all("ts => ts.map(t => t.dataset.cardId)") == walked
    assert page.url.endswith(f"#/search?expansion_id={expansion}")


def test_a_slow_first_page_never_overwrites_the_search_typed_after_it(tab: ConsolePage, catalog: Service):
    """The browse page the key opens is held back until the search typed after it has answered: when it
    finally arrives it is dropped, and the grid keeps the search."""
    from playwright.sync_api import expect

    with catalog.client(catalog.key) as client:
        query, name = typo_query(client)
        expected = [
            row["id"] for row in ok(client.get("/v1/cards", params={"q": query, "limit": 30}))["items"]
        ]
    held: list[Any] = []
    page = tab.page
    page.route(lambda url: url.endswith("/v1/cards?limit=30"), lambda route: held.append(route))
    page = tab.open("", key=catalog.key)
    page.wait_for_function("() => document.querySelectorAll('#expansion option').length > 1")
    page.fill("#q", query)
    page.click("#search-form button[type=submit]")
    tiles = page.locator("#results .tile")
    expect(tiles.first).to_contain_text(name, timeout=TIMEOUT_MS)
    assert len(held) == 1
    with page.expect_response(lambda r: r.url.endswith("/v1/cards?limit=30")):
        held[0].continue_()
    page.wait_for_timeout(300)  # the answer's handler has run; nothing may have changed
    assert tiles.evaluate_all("ts => ts.map(t => t.dataset.cardId)") == expected
    assert page.input_value("#q") == query


def test_what_the_user_types_while_the_page_loads_is_kept(tab: ConsolePage, catalog: Service):
    """The expansion list is held back while the user types a search; when it arrives the box keeps the
    text, and the search runs on it."""
    from playwright.sync_api import expect

    with catalog.client(catalog.key) as client:
        query, name = typo_query(client)
        expansion = ok(client.get("/v1/cards", params={"q": query, "limit": 1}))["items"][0]["expansion_id"]
    held: list[Any] = []
    tab.page.route(lambda url: "/v1/expansions?" in url, lambda route: held.append(route))
    page = tab.open(f"#/search?expansion_id={expansion}", key=catalog.key)
    for _ in range(200):  # the key's first navigation asks for the list; wait until it is held
        if held:
            break
        page.wait_for_timeout(50)
    assert len(held) == 1
    page.fill("#q", query)
    with page.expect_response(lambda r: "/v1/expansions?" in r.url):
        held[0].continue_()
    page.wait_for_function("() => document.querySelectorAll('#expansion option').length > 1")
    assert page.input_value("#q") == query
    assert page.input_value("#expansion") == expansion  # the address's choice, once its option exists
    page.click("#search-form button[type=submit]")
    expect(page.locator("#results .tile").first).to_contain_text(name, timeout=TIMEOUT_MS)


def test_only_the_parameters_the_user_set_are_sent(tab: ConsolePage, catalog: Service):
    """A filter the user leaves empty is not sent; one they set goes out under issue 14's name."""
    page = tab.open("", key=catalog.key)
    page.locator("#results .tile").first.wait_for(timeout=TIMEOUT_MS)
    page.click(".filters summary")
    page.fill("input[name=rarity]", "Rare Holo")
    page.fill("input[name=price_min]", "2.50")
    with page.expect_request(lambda r: "/v1/cards?" in r.url) as sent:
        page.click("#search-form button[type=submit]")
    assert sent.value.url.split("?", 1)[1] == "rarity=Rare+Holo&price_min=250&limit=30"


def test_the_price_chart_draws_the_history_contract(tab: ConsolePage):
    """The chart the card page draws from `GET /v1/cards/{id}/prices` (issue 14's `data` shape), in the
    browser: the market line breaks where a day has no market, the band spans low to high, a rising
    price rises on screen, and the caption names the span and the last prices."""
    page = tab.open("")
    days = [(100, 80, 150), (110, 90, 160), (None, 90, 160), (120, 95, 170), (130, 100, 160)]
    history = {
        "card_id": "x-1",
        "variant_id": 7,
        "condition": "NM",
        "currency": "USD",
        "points": [
            {
                "date": f"2026-01-0{n + 1}",
                "market": market,
                "low": low,
                "high": high,
                "listing_count": 3,
                "observed_on": f"2026-01-0{n + 1}",
            }
            for n, (market, low, high) in enumerate(days)
        ],
    }
    drawn = page.evaluate(
        """(history) => {
            const figure = priceChart(history, history.points);
            document.querySelector("main").append(figure);
            const coords = (node) =>
                node.getAttribute("points").split(" ").map((p) => p.split(",").map(Number));
            return {
                lines: [...figure.querySelectorAll("polyline")].map(coords),
                bands: [...figure.querySelectorAll("polygon")].map(coords),
                caption: figure.querySelector(".chart-caption").textContent,
                labels: [...figure.querySelectorAll("text")].map((t) => t.textContent),
            };
        }""",
        history,
    )
    assert [len(line) for line in drawn["lines"]] == [2, 2]  # day 3 has no market: two runs
    assert [len(band) for band in drawn["bands"]] == [10]  # low and high on all five days
    (first, second), (fourth, fifth) = drawn["lines"]
    assert first[0] < second[0] < fourth[0] < fifth[0]  # days in order, the gap keeps its place
    assert fourth[0] - second[0] == 2 * (second[0] - first[0])
    assert first[1] > second[1] > fourth[1] > fifth[1]  # rising prices rise (SVG y grows downwards)
    assert drawn["caption"] == "NM market, 2026-01-01 to 2026-01-05: now $1.30 (range $1.00–$1.60)"
    assert {"$1.70", "$0.80", "2026-01-01", "2026-01-05"} <= set(drawn["labels"])


def test_a_bad_key_is_told_in_words(tab: ConsolePage):
    from playwright.sync_api import expect

    page = tab.open("", key="cc_this-key-does-not-exist")
    message = page.locator("#message")
    expect(message).to_contain_text("Your API key was refused", timeout=TIMEOUT_MS)
    expect(message).to_contain_text("A valid API key is required")  # the server's own words too
    assert page.evaluate("document.activeElement.id") == "key-input"
    assert page.locator("#results .tile").count() == 0


def test_no_key_yet_asks_for_one_and_sends_nothing(tab: ConsolePage):
    from playwright.sync_api import expect

    calls: list[str] = []
    tab.page.on("request", lambda r: calls.append(r.url) if "/v1/" in r.url else None)
    page = tab.open("")
    expect(page.locator("#message")).to_contain_text("Enter your API key", timeout=TIMEOUT_MS)
    assert calls == []


def test_scanning_without_a_scanner_says_so(tab: ConsolePage, catalog: Service):
    from playwright.sync_api import expect

    page = tab.open("#/scan", key=catalog.key)
    page.set_input_files(
        "#photo", files=[{"name": "p.jpg", "mimeType": "image/jpeg", "buffer": jpeg_blank()}]
    )
    page.click("#scan-button")
    expect(page.locator("#message")).to_contain_text("Scanning is not available", timeout=TIMEOUT_MS)


def test_a_malformed_card_address_is_told_and_routing_goes_on(tab: ConsolePage, catalog: Service):
    """Reproduces #45 item 15: `#/card/%E0` (a %-escape that is no UTF-8) made `decodeURIComponent`
    throw inside the router: an uncaught page error, no word to the user, and the card view left showing
    whatever card was there before. Now it says the address names no card, and the next address works."""
    from urllib.parse import quote

    from playwright.sync_api import expect

    with catalog.client(catalog.key) as client:
        card = ok(client.get("/v1/cards", params={"limit": 1}))["items"][0]
    page = tab.open("#/card/%E0", key=catalog.key)
    expect(page.locator("#message")).to_contain_text("names no card", timeout=TIMEOUT_MS)
    expect(page.locator("#card h1")).to_have_text("No such card")
    assert tab.problems == []

    page.evaluate("(hash) => { location.hash = hash; }", f"#/card/{quote(card['id'], safe='')}")
    expect(page.locator("#card h1")).to_have_text(card["name"], timeout=TIMEOUT_MS)
    expect(page.locator("#message")).to_be_hidden()

    page.evaluate("() => { location.hash = '#/card/%E0'; }")  # from a card page: its card must go
    expect(page.locator("#card h1")).to_have_text("No such card", timeout=TIMEOUT_MS)
    expect(page.locator("#message")).to_contain_text("names no card")

    page.evaluate("() => { location.hash = '#/batches/%E0'; }")  # the Batches tab's address, the same way
    expect(page.locator("#message")).to_contain_text("batch address is malformed", timeout=TIMEOUT_MS)
    expect(page.locator("#batch")).to_be_hidden()
    assert tab.problems == []

    page.evaluate("() => { location.hash = '#/search'; }")
    expect(page.locator("#view-search")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#results .tile").first).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#message")).to_be_hidden()


def test_the_console_is_self_only_and_outside_the_api(catalog: Service):
    response = httpx.get(f"{catalog.base_url}/console")
    assert response.status_code == 200 and "<title>cardcat console</title>" in response.text
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "connect-src 'self'" in policy
    assert "'unsafe-inline'" not in policy and "http" not in policy.replace(catalog.base_url, "")
    assert (
        httpx.get(f"{catalog.base_url}/console/console.js")
        .headers["content-type"]
        .startswith("text/javascript")
    )
    assert httpx.get(f"{catalog.base_url}/console/..%2Fconsole_routes.py").status_code == 404
    assert httpx.get(f"{catalog.base_url}/console/secrets.json").status_code == 404
    paths = httpx.get(f"{catalog.base_url}/openapi.json").json()["paths"]
    assert not [path for path in paths if path.startswith("/console")]


def test_a_spent_budget_shows_its_wait(browser: Any, tmp_path: Path):
    from playwright.sync_api import expect

    port = free_port()
    # A day-long window: no slot boundary falls inside the test, so nothing waits for a fresh one.
    limits = {"CARDCAT_RATE_LIMIT": "2", "CARDCAT_RATE_WINDOW_S": "86400"}
    service = Service(create_database("sqlite", tmp_path), tmp_path / "data", limits)
    try:
        service.cli("db", "upgrade")
        service.key = service.new_key()
        service.start(port=port)
        console = ConsolePage(browser, service.base_url)
        page = console.open("")
        # The key brings two calls, the expansions and the first page; both are answered before the
        # third call (a click while the first page is in flight may replace it, and no 429 comes).
        with (
            page.expect_response(lambda r: "/v1/expansions?" in r.url, timeout=TIMEOUT_MS),
            page.expect_response(lambda r: "/v1/cards?" in r.url, timeout=TIMEOUT_MS),
        ):
            page.fill("#key-input", service.key)
            page.click("#key-form button[type=submit]")
        page.click("#search-form button[type=submit]")
        message = page.locator("#message")
        expect(message).to_contain_text("request budget is spent. Try again in", timeout=TIMEOUT_MS)
        assert any(char.isdigit() for char in message.inner_text().split("Try again in")[1][:4])
        assert console.problems == []
        console.close()
    finally:
        service.stop()


# ---- scanning with the real scanner ------------------------------------------------------------------


def jpeg(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def jpeg_blank() -> bytes:
    return jpeg(np.full((960, 720, 3), 235, np.uint8))


def photo_of(card_id: str) -> bytes:
    from training.renders import DEFAULT_CACHE
    from training.synth import make_photo

    face = np.asarray(Image.open(DEFAULT_CACHE / "catalog" / card_id / "high.jpg").convert("RGB"))
    seed = HELD_OUT_SEED + zlib.crc32(card_id.encode()) % 1000
    return jpeg(make_photo(face, seed=seed, difficulty="standard").image)


@pytest.fixture(scope="module")
def scanner(scanner_stack: Service) -> Service:
    """The session's scanner (tests/conftest.py): FACES indexed, image URLs on its own address."""
    assert set(FACES) <= set(SCANNER_EXPANSIONS)
    return scanner_stack


@pytest.fixture
def scan_tab(browser: Any, scanner: Service) -> Iterator[ConsolePage]:
    console = ConsolePage(browser, scanner.base_url)
    yield console
    assert console.problems == []
    console.close()


def choose(page: Any, data: bytes, name: str = "photo.jpg", mime: str = "image/jpeg") -> None:
    page.set_input_files("#photo", files=[{"name": name, "mimeType": mime, "buffer": data}])
    page.click("#scan-button")


@pytest.mark.parametrize("card_id", ["swsh10tg-TG03", "base1-4"])
def test_a_photo_shows_the_card_it_is(scan_tab: ConsolePage, scanner: Service, card_id: str):
    from playwright.sync_api import expect

    photo = photo_of(card_id)
    with scanner.client(scanner.key) as client:
        client.timeout = httpx.Timeout(120)
        answer = ok(client.post("/v1/scan", files={"image": ("p.jpg", photo, "image/jpeg")}))
    ids = [match["card"]["id"] for match in answer["matches"]]
    assert card_id in ids, answer  # the scanner's own tests hold it to this; the page must show it
    page = scan_tab.open("#/scan", key=scanner.key)
    choose(page, photo)
    matches = page.locator("#scan-result .match")
    expect(matches).to_have_count(len(ids), timeout=120_000)
    assert matches.evaluate_all("ms => ms.map(m => m.dataset.cardId)") == ids
    best = answer["matches"][0]
    first = matches.first
    expect(first.locator(".match-name")).to_have_text(best["card"]["name"])
    expect(first).to_contain_text(f"{best['card']['expansion']['name']} ({best['card']['expansion']['id']})")
    expect(first).to_contain_text(f"Number {best['card']['number']}")
    expect(first.locator(".score")).to_have_text(f"score {best['score']:.3f}")
    expect(page.locator("#scan-result .tier")).to_have_attribute("data-tier", answer["analysis"]["tier"])
    all_images_loaded(page, "#scan-result")
    if card_id == "swsh10tg-TG03":
        scan_tab.screenshot("console-scan.png")
    first.click()
    expect(page.locator("#card h1")).to_have_text(best["card"]["name"], timeout=TIMEOUT_MS)


def test_a_page_of_cards_is_drawn_numbered_with_each_answer_beside_it(
    scan_tab: ConsolePage, scanner: Service
):
    """ "Many cards" (#48): the photo with one numbered outline per card place the API answered, and each
    number's answer listed in the same order."""
    from playwright.sync_api import expect

    from training.pages import make_page_photo

    ids = [f"swsh10tg-TG{n:02d}" for n in (15, 16, 17, 18)]
    faces = [(i, np.asarray(Image.open(rendered_faces() / i / "high.jpg").convert("RGB"))) for i in ids]
    photo = jpeg(make_page_photo(faces, HELD_OUT_SEED + 48, (2, 2), "standard", 0.4).image)
    with scanner.client(scanner.key) as client:
        client.timeout = httpx.Timeout(300)
        answer = ok(client.post("/v1/scan/page", files={"image": ("p.jpg", photo, "image/jpeg")}))
    assert answer["cards"], answer
    page = scan_tab.open("#/scan", key=scanner.key)
    page.check("#scan-many")
    choose(page, photo)
    outlines = page.locator("#scan-result svg.page-outlines polygon")
    expect(outlines).to_have_count(len(answer["cards"]), timeout=120_000)
    drawn = outlines.evaluate_all("ps => ps.map(p => p.getAttribute('points'))")

    def js(n: float) -> str:  # a number as JavaScript prints it: 12.0 is "12"
        return str(int(n)) if float(n).is_integer() else repr(float(n))

    assert drawn == [" ".join(f"{js(x)},{js(y)}" for x, y in card["corners"]) for card in answer["cards"]]
    items = page.locator("#scan-result .page-card")
    expect(items).to_have_count(len(answer["cards"]))
    named = [c["matches"][0]["card"]["id"] if len(c["matches"]) == 1 else None for c in answer["cards"]]
    assert items.evaluate_all("li => li.map(l => l.dataset.cardId || null)") == named
    numbers = page.locator("#scan-result svg.page-outlines text")
    assert numbers.evaluate_all("ts => ts.map(t => t.textContent)") == [
        str(i + 1) for i in range(len(answer["cards"]))
    ]
    scan_tab.screenshot("console-scan-page.png")


def test_no_card_in_the_photo_is_said_in_plain_words(scan_tab: ConsolePage, scanner: Service):
    from playwright.sync_api import expect

    page = scan_tab.open("#/scan", key=scanner.key)
    choose(page, jpeg_blank())
    box = page.locator("#scan-result .unidentified")
    expect(box).to_be_visible(timeout=120_000)
    reason = box.get_attribute("data-reason")
    assert reason in ("print_unreadable", "no_confident_match")
    expect(box).to_contain_text("No card recognised")
    words = {"print_unreadable": "could not be read", "no_confident_match": "matches the artwork"}
    expect(box).to_contain_text(words[reason])


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("notes.txt", b"this is not a photo", "not an image the scanner can read"),
        (
            "huge.jpg",
            b"\xff\xd8\xff" + b"\0" * (10 * 1024 * 1024 + 10),
            "too large: the scanner takes images up to 10 MB",
        ),
    ],
)
def test_a_refused_photo_is_told_in_words(
    scan_tab: ConsolePage, scanner: Service, name: str, data: bytes, words: str
):
    from playwright.sync_api import expect

    page = scan_tab.open("#/scan", key=scanner.key)
    choose(page, data, name=name, mime="text/plain" if name.endswith(".txt") else "image/jpeg")
    expect(page.locator("#message")).to_contain_text(words, timeout=TIMEOUT_MS)
    assert page.locator("#scan-result .match").count() == 0


def test_a_batch_of_photos_shows_its_progress_its_answers_with_tiers_and_a_csv(
    scan_tab: ConsolePage, scanner: Service
):
    """#44 item 7: photos chosen on the Batches tab go up as one batch; the page follows it to `done`,
    lists every answer with the tier the API gives it, and downloads the batch's CSV with prices."""
    from playwright.sync_api import expect

    cards = ("swsh10tg-TG03", "base1-4", "swsh10tg-TG07")
    files = [{"name": f"{card}.jpg", "mimeType": "image/jpeg", "buffer": photo_of(card)} for card in cards]
    files.append({"name": "blank.jpg", "mimeType": "image/jpeg", "buffer": jpeg_blank()})
    page = scan_tab.open("#/batches", key=scanner.key)
    page.set_input_files("#batch-photos", files=files)
    expect(page.locator("#batch-chosen")).to_have_text("4 photos chosen")
    page.click("#batch-start")
    expect(page.locator("#batch-progress")).to_have_attribute("data-status", "done", timeout=180_000)
    batch_id = page.evaluate("location.hash").split("/")[-1]
    rows = page.locator("#batch-results tbody tr")
    expect(rows).to_have_count(4)
    with scanner.client(scanner.key) as client:
        batch = ok(client.get(f"/v1/scan/batches/{batch_id}"))
        results = ok(client.get(f"/v1/scan/batches/{batch_id}/results", params={"limit": 10}))["items"]
    shown = rows.evaluate_all("rs => rs.map(r => [Number(r.dataset.index), r.dataset.tier])")
    assert sorted(map(tuple, shown)) == sorted((r["index"], r["analysis"]["tier"]) for r in results)
    tiers = batch["tiers"]
    expect(page.locator("#batch-summary")).to_contain_text(
        f"4 of 4 photos answered, 0 waiting · {tiers['certain']} certain, {tiers['likely']} likely, "
        f"{tiers['review']} to review"
    )
    scan_tab.screenshot("console-batches.png")
    blank = page.locator('#batch-results tbody tr[data-index="3"]')
    expect(blank).to_contain_text("No card recognised")
    expect(blank.locator(".tier")).to_have_text("review")
    with page.expect_download(timeout=TIMEOUT_MS) as download:
        page.click("#batch-csv")
    text = Path(download.value.path()).read_text(encoding="utf-8")
    table = list(csv.reader(io.StringIO(text, newline="")))
    assert tuple(table[0]) == CARDCAT_COLUMNS
    assert sum(int(row[0]) for row in table[1:]) == 4
    assert download.value.suggested_filename == f"cardcat-batch-{batch_id}.csv"
