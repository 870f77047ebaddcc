"""A real headless Chromium for the console tests: Debian's `/usr/bin/chromium` driven by playwright
(never `playwright install`: nothing is downloaded at run time)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cardcat.stack import unavailable

CHROMIUM = Path(os.environ.get("CARDCAT_CHROMIUM", "/usr/bin/chromium"))
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def chromium() -> Iterator[Any]:
    """The browser, or a skip saying why (a failure under CI=true, where .ci/test-tools installs it)."""
    if not CHROMIUM.exists():
        unavailable(f"Chromium is not installed at {CHROMIUM} (.ci/test-tools installs it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (it is in the dev extra: pip install -e '.[dev]')")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


class ConsolePage:
    """One tab on the console, collecting what the page itself reports as broken: uncaught errors and
    Content-Security-Policy refusals (a CSP refusal would mean an asset or call that is not ours)."""

    def __init__(self, browser: Any, base_url: str) -> None:
        self.base_url = base_url
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on("console", self._console)

    def _console(self, message: Any) -> None:
        if message.type == "error" and "Content Security Policy" in message.text:
            self.problems.append(f"CSP: {message.text}")

    def open(self, fragment: str = "", key: str | None = None) -> Any:
        self.page.goto(f"{self.base_url}/console{fragment}")
        if key is not None:
            self.page.fill("#key-input", key)
            self.page.click("#key-form button[type=submit]")
        return self.page

    def screenshot(self, name: str) -> None:
        """Saved under CARDCAT_CONSOLE_SCREENSHOTS when set (docs/img/make_screenshots.sh sets it)."""
        folder = os.environ.get("CARDCAT_CONSOLE_SCREENSHOTS")
        if folder:
            self.page.screenshot(path=str(Path(folder) / name), full_page=False)

    def close(self) -> None:
        self.context.close()
