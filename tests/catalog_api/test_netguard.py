"""The one network guard: webhook endpoints and scan URLs are read by the same rules (the stricter of
the two copies it replaced), each refusing in its own words."""

from __future__ import annotations

import pytest

from catalog_api.events.endpoints import URLRefused, endpoint_target
from catalog_api.kit.netguard import URLRejected, parse_url
from catalog_api.scan.url_fetch import parse_scan_url
from core.errors import URLNotAllowed


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://example.com:0/x", "port"),  # was refused only for scans
        ("https://example.999/x", "numeric"),  # was refused only for scans
        ("https://user@example.com/", "userinfo"),
        ("https://exa mple.com/", "control"),
        ("https://[1.2.3.4]/", "unparsable"),  # urlsplit refuses an IPv4 in brackets
        ("https://[fe80::zz]/", "unparsable"),
        ("https:///x", "no_host"),
    ],
)
def test_both_callers_refuse_what_the_guard_refuses(url: str, reason: str) -> None:
    with pytest.raises(URLRejected) as refused:
        parse_url(url, ("http", "https"))
    assert refused.value.reason == reason
    with pytest.raises(URLRefused):
        endpoint_target(url)
    with pytest.raises(URLNotAllowed):
        parse_scan_url(url)


def test_one_target_for_both() -> None:
    scan = parse_scan_url("https://EXAMPLE.com./card.png?x=1")
    hook = endpoint_target("https://EXAMPLE.com./card.png?x=1")
    assert scan == hook
    assert (scan.host, scan.port, scan.path, scan.host_header) == (
        "example.com",
        443,
        "/card.png?x=1",
        "example.com",
    )
    short_form = endpoint_target("http://127.1:8080/h")  # inet_aton's reading, as the resolver's
    assert short_form.literal is not None
    assert short_form.url_for(short_form.literal) == "http://127.0.0.1:8080/h"


def test_scans_take_https_only_and_webhooks_http_too() -> None:
    with pytest.raises(URLNotAllowed, match=r"Only https URLs can be scanned\."):
        parse_scan_url("http://example.com/card.png")
    assert endpoint_target("http://example.com/hook").scheme == "http"
    with pytest.raises(URLRefused, match="only http and https URLs are accepted"):
        endpoint_target("ftp://example.com/hook")
