"""Without models or an index, the service runs catalog-only and scan answers 503 scan_unavailable."""

from __future__ import annotations

import io

import httpx
from PIL import Image

from tests.catalog_api.helpers import failed, ok
from tests.conftest import Service


def test_catalog_only_deployment_answers_503(service: Service):
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), "white").save(buffer, format="PNG")
    with service.client() as client:
        response = client.post("/v1/scan", files={"image": ("card.png", buffer.getvalue(), "image/png")})
        failed(response, 503, "scan_unavailable")
        assert "RateLimit" in response.headers
        failed(
            client.post("/v1/scan", json={"url": "https://example.invalid/card.jpg"}), 503, "scan_unavailable"
        )
        assert ok(client.get("/v1/cards", params={"limit": 1}))["items"], "the catalog keeps answering"
    failed(httpx.post(f"{service.base_url}/v1/scan"), 401, "unauthorized")
