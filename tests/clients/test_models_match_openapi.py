"""The client's models stay true to the server's `/openapi.json`.

From each route the client wraps (`cardcat_client.routes.ROUTES`) to the schema the server declares for
its `data`, compared by structure (`openapi_shapes`). Every `/v1` route (and `/health`) the server serves must
be wrapped (or listed in `NOT_WRAPPED` with why)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cardcat_client import models
from cardcat_client.routes import NOT_WRAPPED, RAW_ROUTES, ROUTES, Route
from tests.catalog_api.test_openapi import served_openapi
from tests.clients.openapi_shapes import differences, model_schema, shape


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The document the app serves on `GET /openapi.json` (in-process, the same bytes as over HTTP)."""
    served: dict[str, Any] = json.loads(served_openapi(tmp_path_factory.mktemp("openapi")))
    return served


def _template(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def _operation(document: dict[str, Any], route: Route) -> dict[str, Any] | None:
    for path, operations in document["paths"].items():
        if _template(path) == _template(route.path) and route.method.lower() in operations:
            operation: dict[str, Any] = operations[route.method.lower()]
            return operation
    return None


def route_differences(document: dict[str, Any], name: str, route: Route) -> list[str]:
    operation = _operation(document, route)
    assert operation is not None, f"{name}: the server has no {route.method} {route.path}"
    components = document["components"]["schemas"]
    success = next(status for status in ("200", "201", "202") if status in operation["responses"])
    envelope = operation["responses"][success]["content"]["application/json"]["schema"]
    resolved = components[envelope["$ref"].rsplit("/", 1)[-1]] if "$ref" in envelope else envelope
    server = shape(resolved["properties"]["data"], components)
    model: Any = models.Page[route.model] if route.paged else route.model  # type: ignore[name-defined]
    schema, defs = model_schema(model)
    return differences(shape(schema, defs), server, f"{name} ({route.model.__name__})")


def test_every_wrapped_route_reads_into_a_model_that_matches_the_server(document: dict[str, Any]) -> None:
    problems: list[str] = []
    for name, route in ROUTES.items():
        problems.extend(route_differences(document, name, route))
    assert not problems, "client models disagree with /openapi.json:\n" + "\n".join(problems)


def test_the_error_body_matches_the_server(document: dict[str, Any]) -> None:
    components = document["components"]["schemas"]
    server = shape(components["ErrorEnvelope"]["properties"]["error"], components)
    schema, defs = model_schema(models.ErrorBody)
    assert differences(shape(schema, defs), server, "ErrorBody") == []


def unwrapped_routes(document: dict[str, Any], routes: dict[str, Route]) -> list[str]:
    """API routes (`/v1`, `/health`; not `/metrics`, `/console` or file routes) with no client method."""
    wrapped = {(route.method.lower(), _template(route.path)) for route in routes.values()}
    wrapped |= {(method.lower(), _template(path)) for method, path in RAW_ROUTES.values()}
    skipped = {_template(path) for path in NOT_WRAPPED}
    return [
        f"{method.upper()} {path}"
        for path, operations in document["paths"].items()
        for method in operations
        if (path.startswith("/v1/") or path == "/health")
        and (method, _template(path)) not in wrapped
        and _template(path) not in skipped
        and not path.startswith("/v1/_bench")
    ]


def test_every_route_the_server_serves_is_wrapped(document: dict[str, Any]) -> None:
    unwrapped = unwrapped_routes(document, ROUTES)
    assert not unwrapped, f"the server serves routes the client has no method for: {unwrapped}"
    fewer = {name: route for name, route in ROUTES.items() if name not in ("movers", "product")}
    assert unwrapped_routes(document, fewer) == ["GET /v1/products/{product_id}", "GET /v1/movers"]


class WrongVariant(models.Model):
    """Variant with three mistakes: `id` a string, `foil` missing, an extra `finish` field."""

    id: str
    type: str
    subtype: str | None
    size: str | None
    stamps: list[str]
    marketplace: list[models.Price]
    finish: str


class WrongCard(models.Card):
    variants: list[WrongVariant]  # type: ignore[assignment]
    rarity: str  # type: ignore[assignment]


def test_the_comparison_catches_a_wrong_model(document: dict[str, Any]) -> None:
    route = Route("GET", "/v1/cards/{card_id}", WrongCard)
    found = route_differences(document, "card", route)
    text = "\n".join(found)
    assert 'card (WrongCard).variants[].id: client "string" vs server "integer"' in text
    assert "variants[].foil: the server declares it, the client model has no field for it" in text
    assert "variants[].finish: the client model has it, the server does not declare it" in text
    assert "card (WrongCard).rarity: client" in text
    assert len(found) == 4, text


def test_the_pinned_document_is_what_the_app_serves(document: dict[str, Any]) -> None:
    """The comparison runs against the live document; it is the pinned one (so the lead's regenerated
    copy after a merge is what the client is checked against)."""
    pinned = json.loads((Path(__file__).parents[1] / "catalog_api" / "openapi.json").read_text())
    assert document == pinned
