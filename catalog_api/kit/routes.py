"""The app's routes as the router tries them, for the middlewares that match a request before it does
(the metrics' route label, the access log, the response cache's declared parameters)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from starlette.types import Scope


def flat_routes(routes: Iterable[Any]) -> list[Any]:
    """The app's routes one level deep: FastAPI keeps an included router as one entry that lists its
    own (`effective_route_contexts`), each with the full path and its own `matches`."""
    flat: list[Any] = []
    for route in routes:
        contexts = getattr(route, "effective_route_contexts", None)
        flat.extend(contexts() if callable(contexts) else [route])
    return flat


def app_routes(scope: Scope) -> list[Any]:
    """`flat_routes` of the app serving `scope`, flattened once per app and kept on it, so every
    middleware that matches before the router shares one list."""
    app = scope.get("app")
    cached: list[Any] | None = getattr(app, "_cardcat_flat_routes", None)
    if cached is None:
        cached = flat_routes(getattr(getattr(app, "router", None), "routes", ()))
        if app is not None:
            app._cardcat_flat_routes = cached
    return cached
