"""`/docs` against a real server: Swagger UI from our own files under a strict Content-Security-Policy,
over HTTP and in a real headless Chromium that may reach no other host.

Reproduces #45 item 4: FastAPI's default `/docs` loaded Swagger UI from a public CDN (a floating major
version, no integrity, no CSP) on the origin whose `sessionStorage` holds the console's API key, and
showed nothing on a machine without internet.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from cardcat.stack import Service, create_database
from tests.console.browser import chromium

TIMEOUT_MS = 30_000
SUMS = re.compile(r"^([0-9a-f]{64})  (\S+)$", re.MULTILINE)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A real `cardcat serve` on an empty embedded database (the docs need no data)."""
    tmp = tmp_path_factory.mktemp("docs")
    service = Service(create_database("sqlite", tmp), tmp / "data")
    try:
        service.cli("db", "upgrade")
        service.start()
        yield service
    finally:
        service.stop()


def directives(policy: str) -> dict[str, list[str]]:
    parsed = (part.split() for part in policy.split(";") if part.strip())
    return {name: sources for name, *sources in parsed}


def test_docs_loads_nothing_from_another_host(server: Service) -> None:
    page = httpx.get(f"{server.base_url}/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    absolute = re.findall(r"""(?:https?:)?//[^\s"'<>)]+""", page.text)
    assert not [url for url in absolute if urlsplit(url).netloc != urlsplit(server.base_url).netloc], absolute
    assert page.headers["x-content-type-options"] == "nosniff"

    # Every file the page names answers from us, with its own type and nosniff.
    expected = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}
    referenced = re.findall(r"""(?:src|href)="([^"]+)\"""", page.text)
    assert {Path(url).suffix for url in referenced} == set(expected), referenced
    for url in referenced:
        asset = httpx.get(urljoin(f"{server.base_url}/docs", url))
        assert asset.status_code == 200, url
        assert asset.headers["content-type"].startswith(expected[Path(url).suffix]), url
        assert asset.headers["x-content-type-options"] == "nosniff"

    # The policy: our origin, plus the one inline start-up script by its hash; no host, nothing unsafe.
    policy = directives(page.headers["content-security-policy"])
    assert policy["default-src"] == ["'none'"]
    inline = re.findall(r"<script>(.*?)</script>", page.text, re.DOTALL)
    hashes = [f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'" for s in inline]
    assert len(inline) == 1 and policy["script-src"] == ["'self'", *hashes]
    for name in ("style-src", "connect-src", "img-src"):
        assert policy[name][0] == "'self'" and set(policy[name][1:]) <= {"data:"}, policy
    assert policy["frame-ancestors"] == ["'none'"] and policy["base-uri"] == ["'none'"]
    assert "http" not in page.headers["content-security-policy"]
    assert "unsafe" not in page.headers["content-security-policy"]

    # Neither the docs nor their files are API: none of it is in the OpenAPI document; ReDoc is off.
    paths = httpx.get(f"{server.base_url}/openapi.json").json()["paths"]
    assert not [path for path in paths if path.startswith("/docs")]
    assert httpx.get(f"{server.base_url}/redoc").status_code == 404
    assert httpx.get(f"{server.base_url}/docs/assets/5.35.0/..%2Fdocs_routes.py").status_code == 404


def test_the_shipped_swagger_ui_files_are_the_released_ones() -> None:
    """The vendored files match the sums PROVENANCE.md recorded from the npm release (an edit to them,
    by hand or by a tool, shows here)."""
    folder = resources.files("catalog_api.docs_ui").joinpath("swagger_ui")
    sums = SUMS.findall(folder.joinpath("PROVENANCE.md").read_text())
    assert {name for _, name in sums} >= {"swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"}
    assert {"LICENSE", "NOTICE"} <= {name for _, name in sums}
    for digest, name in sums:
        assert hashlib.sha256(folder.joinpath(name).read_bytes()).hexdigest() == digest, name


def test_swagger_ui_renders_offline_under_its_policy(server: Service) -> None:
    """Chromium with every request to another host refused: the page renders every operation of the
    document, "Try it out" on /health reaches our server, and the browser reports no CSP refusal."""
    from playwright.sync_api import expect

    paths = httpx.get(f"{server.base_url}/openapi.json").json()["paths"]
    operations = sum(len(methods) for methods in paths.values())
    ours = urlsplit(server.base_url).netloc
    elsewhere: list[str] = []
    problems: list[str] = []

    def only_ours(route: Any) -> None:
        if urlsplit(route.request.url).netloc == ours:
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        try:
            page = context.new_page()
            page.route("**/*", only_ours)
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            page.on(
                "console",
                lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None,
            )
            page.add_init_script(
                "window.refused = [];"
                "document.addEventListener('securitypolicyviolation',"
                " (e) => window.refused.push(`${e.violatedDirective} ${e.blockedURI}`));"
            )
            page.goto(f"{server.base_url}/docs")
            expect(page.locator(".swagger-ui .info .title")).to_contain_text("cardcat", timeout=TIMEOUT_MS)
            expect(page.locator(".swagger-ui .opblock")).to_have_count(operations, timeout=TIMEOUT_MS)

            health = page.locator("#operations-health-health_health_get")
            health.locator(".opblock-summary").click()
            health.locator(".try-out__btn").click()
            health.locator(".execute").click()
            expect(health.locator(".live-responses-table tbody .response-col_status").first).to_have_text(
                "200", timeout=TIMEOUT_MS
            )
            assert page.evaluate("window.refused") == []
        finally:
            context.close()
    assert elsewhere == [] and problems == []
