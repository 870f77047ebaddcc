"""Every /v1 response is the `{data, error}` envelope with the spec's codes; a 500 leaks nothing."""

from __future__ import annotations

import sqlite3
from typing import Any

import httpx
import psycopg

from tests.catalog_api.helpers import failed, ok
from tests.conftest import Service


def test_unknown_routes_wrong_methods_bad_parameters(service: Service):
    with service.client() as client:
        failed(client.get("/v1/nothing"), 404, "not_found")
        failed(client.get("/v1"), 404, "not_found")
        failed(client.get("/v1/cards/x/y"), 404, "not_found")
        wrong = client.delete("/v1/cards")
        failed(wrong, 405, "bad_request")
        assert wrong.headers["Allow"] == "GET"
        failed(client.put("/v1/series/base"), 405, "bad_request")
        failed(client.get("/v1/cards", params={"q": ""}), 400, "bad_request")
        failed(client.get("/v1/products", params={"q": ""}), 400, "bad_request")
        failed(client.get("/v1/products/not-a-number"), 404, "not_found")
        failed(client.get("/v1/expansions/nope"), 404, "not_found")
        failed(client.get("/v1/series/nope"), 404, "not_found")
        assert ok(client.get("/v1/cards", params={"limit": "NaN", "include": "???"}))


def test_internal_error_is_an_envelope_without_a_trace(fresh: Any, feed_dir: Any):
    for backend in ("sqlite", "postgresql"):
        svc = fresh(backend, feed_dir)
        with svc.client() as client:
            assert ok(client.get("/v1/cards", params={"include": "variants"}))
            if backend == "sqlite":
                path = svc.db.url.removeprefix("sqlite:///")
                with sqlite3.connect(path) as conn:
                    conn.execute("DROP TABLE card_variants")
            else:
                with psycopg.connect(svc.db.url, autocommit=True) as conn:
                    conn.execute("DROP TABLE card_variants")
            # A read not answered before (so not in the response cache) has to touch the broken table.
            response = client.get("/v1/cards", params={"include": "variants", "limit": 3})
            error = failed(response, 500, "internal")
            for leak in ("Traceback", "card_variants", "sqlite", "psycopg", "SELECT", ".py"):
                assert leak not in response.text, leak
            assert error["message"]
            assert "RateLimit" in response.headers
            # The worker survived: other reads still answer.
            assert ok(client.get("/v1/cards", params={"limit": 1}))


def test_openapi_documents_every_endpoint(service: Service):
    spec = httpx.get(f"{service.base_url}/openapi.json").json()
    for path in (
        "/v1/cards",
        "/v1/cards/{card_id}",
        "/v1/series",
        "/v1/series/{series_id}",
        "/v1/expansions",
        "/v1/expansions/{expansion_id}",
        "/v1/products",
        "/v1/products/{product_id}",
        "/v1/cards/{card_id}/prices",
        "/v1/products/{product_id}/prices",
        "/v1/bulk",
        "/health",
    ):
        assert path in spec["paths"], path
    assert spec["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    assert spec["paths"]["/v1/cards"]["get"]["security"] == [{"apiKey": []}]
    params = {p["name"] for p in spec["paths"]["/v1/cards"]["get"]["parameters"]}
    assert params == {
        *("limit", "cursor", "expansion_id", "q", "include", "ids", "sort", "lang"),
        *("rarity", "category", "illustrator", "type", "legal"),
        *("hp_min", "hp_max", "price_min", "price_max"),
    }
    docs = httpx.get(f"{service.base_url}/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
