"""Pydantic models of the wire shapes every room shares: the envelope, pages, images, prices, and the
error responses routes declare. They document the API in OpenAPI (`/openapi.json`); handlers serialise
plain dicts with orjson for speed, and the tests validate responses against these models. Each room's
own shapes are in its `schemas.py`."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(Strict):
    code: str = Field(description="Stable machine token; branch on it.")
    message: str = Field(min_length=1)


class ErrorEnvelope(Strict):
    data: None
    error: ErrorBody


class Envelope(Strict, Generic[T]):
    data: T
    error: None


class Page(Strict, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class Image(Strict):
    low: str
    high: str


class Price(Strict):
    condition: str
    currency: Literal["USD"]
    market: int | None
    low: int | None
    high: int | None
    listing_count: int | None = Field(le=25)
    observed_on: str


class ProductPrice(Price):
    variant: str


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorEnvelope, "description": "bad_request"},
    401: {
        "model": ErrorEnvelope,
        "description": "unauthorized",
        "headers": {"WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}},
    },
    429: {"model": ErrorEnvelope, "description": "rate_limited (see Retry-After)"},
    500: {"model": ErrorEnvelope, "description": "internal"},
}
# A single record by id takes no query and no body: nothing in it can be a bad request.
BY_ID: dict[int | str, dict[str, Any]] = {status: body for status, body in ERRORS.items() if status != 400}
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorEnvelope, "description": "not_found"}}


def file_responses(media_type: str, signed: bool = False) -> dict[int | str, dict[str, Any]]:
    """The statuses of a file route (Starlette's FileResponse, outside `/v1`: no key, no rate limit).

    FileResponse answers `Range` itself: `206` for a satisfiable range, `416` for one past the end and a
    plain-text `400` for a malformed one; it does not answer conditional requests (no `304`). A `signed`
    route also answers `401` to a URL whose signature or expiry is wrong."""
    responses: dict[int | str, dict[str, Any]] = {
        200: {
            "description": "The file",
            "content": {media_type: {"schema": {"type": "string", "format": "binary"}}},
        },
        206: {"description": "Partial Content: the byte range `Range` asked for"},
        400: {"description": "Malformed `Range` header (plain text)"},
        404: {"model": ErrorEnvelope, "description": "not_found"},
        416: {"description": "Range Not Satisfiable (plain text, with `Content-Range: bytes */size`)"},
        500: {"model": ErrorEnvelope, "description": "internal"},
    }
    if signed:
        responses[401] = {
            "model": ErrorEnvelope,
            "description": "unauthorized: the URL's `expires` or `signature` is wrong or expired",
        }
    return responses
