"""Query parameters shared by the list endpoints, declared once so OpenAPI documents them alike."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from catalog_api.kit.languages import LANG_DESCRIPTION, LANGUAGES

Limit = Annotated[
    str | None,
    Query(description="Page size 1..200 (default 50); larger clamps to 200, non-numeric falls back to 50."),
]
Cursor = Annotated[
    str | None,
    Query(description="`next_cursor` of the previous page. Opaque; a cursor not issued here is ignored."),
]
Search = Annotated[
    str | None,
    Query(min_length=1, max_length=200, description="Typo-tolerant search; rows gain a 0..1 `score`."),
]
Lang = Annotated[
    str | None,
    Query(description=LANG_DESCRIPTION, json_schema_extra={"enum": list(LANGUAGES)}),
]
