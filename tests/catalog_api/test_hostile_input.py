"""Hostile input on the real server (issue 17): no request may turn bad input into a 500.

- A cursor carrying our valid signature but a payload of the wrong shape (forged with the deployment's
  cursor secret, as a leaked secret would allow) is ignored like any other foreign cursor: first page.
- A non-ASCII `signature` or `expires` on a snapshot URL is `401`, in the envelope.
- A deeply nested JSON scan body is `400 bad_request` (read before the scanner is asked).
- Every `401` carries `WWW-Authenticate: Bearer`.
- Query integers are ASCII digits only (`limit=1_0` is not 10).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from cardcat.stack import Service, free_port
from catalog_api.app import _cursor_secret
from catalog_api.kit.pagination import CursorCodec
from catalog_api.kit.settings import Settings
from tests.catalog_api.helpers import failed, ok


def forger(service: Service) -> CursorCodec:
    """Signs cursors exactly as the server does (the harness gives every server the same secret)."""
    return CursorCodec(_cursor_secret(Settings(cursor_secret=service.env["CARDCAT_CURSOR_SECRET"])))


# (path, query without cursor, the scope the route signs, a forged position of the wrong shape)
FORGED: list[tuple[str, dict[str, str], list[Any], Any]] = [
    ("/v1/cards", {}, ["cards", None, None], ["x"]),  # too short for the keyset
    ("/v1/cards", {}, ["cards", None, None], [1, 2, 3, 4, 5]),  # wrong types
    ("/v1/cards", {}, ["cards", None, None], ["1999-01-09", "base1", 0, 1, "base1-\x00"]),  # NUL
    ("/v1/cards", {}, ["cards", None, None], [None, None, None, None, None]),
    ("/v1/cards", {"expansion_id": "base1"}, ["cards", "base1", None], [True, {"a": 1}, "b"]),
    ("/v1/cards", {"q": "pikachu"}, ["cards", None, "pikachu"], [{"a": 1}, "x"]),
    ("/v1/cards", {"q": "pikachu"}, ["cards", None, "pikachu"], ["-1.0", "x"]),
    ("/v1/series", {}, ["series", None], [1, 2]),
    ("/v1/expansions", {}, ["expansions", None, None], [[], {}]),
    ("/v1/expansions", {"q": "base"}, ["expansions", None, "base"], [None]),
    ("/v1/products", {}, ["products", None, None], ["1", 2]),
    ("/v1/movers", {}, ["movers", "7d", "gainers", None, 0], [True]),
    ("/v1/movers", {}, ["movers", "7d", "gainers", None, 0], [2**63]),
]


@pytest.mark.parametrize(("path", "query", "scope", "position"), FORGED)
def test_a_validly_signed_cursor_of_the_wrong_shape_is_ignored(
    service: Service, path: str, query: dict[str, str], scope: list[Any], position: Any
) -> None:
    cursor = forger(service).encode(scope, position)
    with service.client() as client:
        first = ok(client.get(path, params={**query, "limit": "2"}))
        forged = client.get(path, params={**query, "limit": "2", "cursor": cursor})
        assert ok(forged) == first, "a cursor not of this endpoint's shape is ignored: the first page"


def test_a_well_shaped_forged_cursor_still_pages(service: Service) -> None:
    """The shape check lets real positions through: a cursor the server issued pages as before."""
    with service.client() as client:
        first = ok(client.get("/v1/cards", params={"limit": "2"}))
        second = ok(client.get("/v1/cards", params={"limit": "2", "cursor": first["next_cursor"]}))
        assert second["items"] and second["items"][0]["id"] not in {c["id"] for c in first["items"]}


@pytest.mark.parametrize(
    ("expires", "signature"),
    [
        ("9999999999", "é" * 64),
        ("9999999999", "0" * 63 + "é"),
        ("9999999999", "\u0663" * 64),
        ("\u0669" * 10, "0" * 64),  # Arabic-Indic digits are not a Unix time
        ("99_999_999_999", "0" * 64),
        ("9" * 5000, "0" * 64),
    ],
)
def test_a_snapshot_url_with_odd_characters_is_401(service: Service, expires: str, signature: str) -> None:
    url = f"{service.base_url}/files/snapshots/card_prices-2026-01-01-0123456789abcdef.ndjson.gz"
    response = httpx.get(url, params={"expires": expires, "signature": signature})
    failed(response, 401, "unauthorized")
    assert response.headers["WWW-Authenticate"] == "Bearer", "every 401 carries a challenge"


def test_a_deeply_nested_json_scan_body_is_400(service: Service) -> None:
    """Read and refused before the scanner is asked, so a server pointed at no scanner at all will do."""
    url = service.start(CARDCAT_SCAN_URL=f"http://127.0.0.1:{free_port()}/scan")
    with service.client(base_url=url) as client:
        for body in (b"[" * 50_000, b'{"url": ' * 6_000):
            response = client.post("/v1/scan", content=body, headers={"content-type": "application/json"})
            failed(response, 400, "bad_request")
        assert ok(client.get("/v1/series", params={"limit": "1"})), "and the server keeps answering"


@pytest.mark.parametrize("authorization", [None, "Bearer cc_" + "A" * 43, "Basic dXNlcjpwYXNz"])
def test_401_carries_a_bearer_challenge(service: Service, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = httpx.get(f"{service.base_url}/v1/cards", headers=headers)
    failed(response, 401, "unauthorized")
    assert response.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize(
    ("raw", "size"),
    [
        ("1_0", 50),
        (" 10", 50),
        ("+10", 50),
        ("\u0661\u0660", 50),  # Arabic-Indic 10
        ("１０", 50),  # fullwidth 10
        ("10", 10),
        ("010", 10),
        ("-3", 50),
        ("0", 50),
        ("9" * 5000, 200),
    ],
)
def test_limit_is_ascii_digits_only(service: Service, raw: str, size: int) -> None:
    with service.client() as client:
        assert len(ok(client.get("/v1/cards", params={"limit": raw}))["items"]) == size


@pytest.mark.parametrize("raw", ["²", "1_0", "\u0661", "-1", " 1"])
def test_min_cents_is_ascii_digits_only(service: Service, raw: str) -> None:
    with service.client() as client:
        failed(client.get("/v1/movers", params={"min_cents": raw}), 400, "bad_request")


@pytest.mark.parametrize(
    ("path", "params", "status"),
    [
        ("/v1/cards/base1-4%00", {}, 404),
        ("/v1/cards", {"expansion_id": "base1\x00"}, 200),
        ("/v1/movers", {"expansion_id": "\x00"}, 200),
        ("/v1/series/base%00", {}, 404),
        ("/v1/expansions", {"series_id": "\x00"}, 200),
        ("/v1/products", {"expansion_id": "\x00"}, 200),
    ],
)
def test_an_id_with_a_nul_is_not_found(
    service: Service, path: str, params: dict[str, str], status: int
) -> None:
    """PostgreSQL cannot hold NUL in text (nor take it as a parameter): such an id names nothing."""
    with service.client() as client:
        response = client.get(path, params=params)
    if status == 404:
        failed(response, 404, "not_found")
    else:
        assert ok(response)["items"] == []
