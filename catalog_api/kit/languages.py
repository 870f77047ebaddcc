"""Names in every language the feed carries: the `lang` and `include=names` rules, in one place.

The feed names cards, expansions and series in up to seven languages (`names`: language -> name).
A read with `lang` serves `name` in that language where the record has one and its usual (English)
name otherwise; `include=names` adds the whole `names` object (`{}` for a record the feed names in no
language, such as a sealed product today). Every room that serves a `name` uses these helpers, so the
rule cannot drift between cards, reference tables, movers and scans.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.errors import BadRequest

LANGUAGES = ("en", "fr", "de", "it", "pt", "es", "es-mx")
LANG_DESCRIPTION = (
    "Serve `name` in this language where the record has one, English otherwise: "
    + ", ".join(f"`{code}`" for code in LANGUAGES)
    + ". Any other value is `400 bad_request`."
)


def parse_lang(raw: str | None) -> str | None:
    """The requested language (None: the usual name), or `400 bad_request` for one we do not serve."""
    if raw is None:
        return None
    if raw not in LANGUAGES:
        raise BadRequest(f"lang must be one of {', '.join(LANGUAGES)}.")
    return raw


def localized(name: str, names: Mapping[str, str] | None, lang: str | None) -> str:
    """`name` in `lang` where `names` has it, else `name` itself."""
    if lang is None or not names:
        return name
    return names.get(lang) or name


def dress(
    record: dict[str, Any], names: Mapping[str, str] | None, lang: str | None, with_names: bool
) -> None:
    """Apply `lang` to a record's `name` and add `names` when asked for (in place)."""
    record["name"] = localized(record["name"], names, lang)
    if with_names:
        record["names"] = dict(names or {})
