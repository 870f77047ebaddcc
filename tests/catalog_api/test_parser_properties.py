"""Hypothesis: the parsers that read what a client or a webhook receiver sends are total (issue 17).

Arbitrary text (any code point, surrogates included) goes into the `Retry-After` parser, the cursor
decoder and the snapshot signature check; none may raise, and each answers only in its documented shape.
"""

from __future__ import annotations

import base64
import math
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from catalog_api.events.deliverer import MAX_RETRY_AFTER_S, parse_retry_after
from catalog_api.kit.pagination import CursorCodec, PositionShape, parse_query_int
from catalog_api.kit.settings import Settings
from catalog_api.prices import snapshot_files as snapshots

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=80)
NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)
SHAPES: list[PositionShape] = [(str, str, int, int, str), (int, str), (float, str), (str, str), (int,)]
CODEC = CursorCodec(b"k" * 32)


# --- Retry-After --------------------------------------------------------------------------------------


def _check_retry_after(value: str | None) -> None:
    result = parse_retry_after(value, NOW)
    assert result is None or (isinstance(result, float) and math.isfinite(result) and result >= 0)


@given(ANY_TEXT)
@example("²")
@example("\u0661\u0662")
@example("9" * 5000)
@example("Fri, 31 Dec 99999 23:59:59 GMT")
@example("Mon, 01 Jan 0000 00:00:00 GMT")
@example("Sun, 22 Nov 2026 12:01:30 +9999")
def test_retry_after_of_any_text_is_seconds_or_none(value: str) -> None:
    _check_retry_after(value)


@given(st.from_regex(r"\A[0-9]{1,40}\Z"))
def test_retry_after_delay_seconds_are_read_exactly_up_to_the_cap(digits: str) -> None:
    result = parse_retry_after(digits, NOW)
    assert result == min(float(int(digits)), MAX_RETRY_AFTER_S)


@given(st.integers(min_value=-(10**6), max_value=10**6))
def test_retry_after_http_dates_are_read(offset_s: int) -> None:
    when = NOW + timedelta(seconds=offset_s)
    expected = min(max(0.0, float(offset_s)), MAX_RETRY_AFTER_S)
    assert parse_retry_after(format_datetime(when, usegmt=True), NOW) == expected


@given(st.text(st.characters(codec=None), min_size=1, max_size=12).filter(lambda s: not s.isascii()))
def test_retry_after_with_non_ascii_text_is_ignored(value: str) -> None:
    assert parse_retry_after(value, NOW) is None


# --- cursors ------------------------------------------------------------------------------------------


def _fits(position: list[Any] | None, shape: PositionShape) -> bool:
    """None, or a list of exactly the shape's types (float slots come back as floats)."""
    if position is None:
        return True
    return len(position) == len(shape) and all(
        type(value) is kind for value, kind in zip(position, shape, strict=True)
    )


@given(ANY_TEXT, st.sampled_from(SHAPES))
def test_cursor_of_any_text_decodes_to_none_or_its_shape(cursor: str, shape: PositionShape) -> None:
    assert _fits(CODEC.decode(cursor, ["cards", None, None], shape), shape)


@given(JSON, st.sampled_from(SHAPES))
def test_validly_signed_cursor_of_any_payload_decodes_to_none_or_its_shape(
    position: Any, shape: PositionShape
) -> None:
    scope = ["cards", None, None]
    decoded = CODEC.decode(CODEC.encode(scope, position), scope, shape)
    assert _fits(decoded, shape)
    assert decoded is None or decoded == position


@given(st.binary(max_size=200), st.sampled_from(SHAPES))
def test_validly_signed_cursor_of_any_bytes_decodes_to_none_or_its_shape(
    payload: bytes, shape: PositionShape
) -> None:
    cursor = base64.urlsafe_b64encode(payload + CODEC._mac(payload)).rstrip(b"=").decode()
    assert _fits(CODEC.decode(cursor, ["cards", None, None], shape), shape)


def test_cursor_round_trip_keeps_real_positions() -> None:
    scope = ["cards", None, None]
    for shape, position in [
        ((str, str, int, int, str), ["1999-01-09", "base1", 0, 4, "base1-4"]),
        ((float, str), [-1.0, "base1-4"]),
        ((float, str), [-0.9123, "x"]),
        ((int, str), [900004, "900004"]),
        ((int,), [17]),
    ]:
        assert CODEC.decode(CODEC.encode(scope, position), scope, shape) == position


# --- query integers -----------------------------------------------------------------------------------


@given(ANY_TEXT)
@example("1_0")
@example("\u0661\u0660")
@example("9" * 5000)
def test_query_int_is_ascii_digits_or_none(raw: str) -> None:
    value = parse_query_int(raw)
    digits = raw.removeprefix("-")
    if not (digits.isascii() and digits.isdigit()):
        assert value is None
    elif len(digits.lstrip("0")) <= 18:
        assert value == int(raw)
    else:
        assert value == (-(10**18) if raw.startswith("-") else 10**18)


# --- snapshot signatures ------------------------------------------------------------------------------


SNAPSHOT_SETTINGS = Settings(file_secret="property-test", data_dir=Path("/nonexistent"))
FILE_NAME = "card_prices-2026-01-01-0123456789abcdef.ndjson.gz"


@settings(max_examples=300)
@given(ANY_TEXT, ANY_TEXT, ANY_TEXT)
@example(FILE_NAME, "9999999999", "é" * 64)
@example(FILE_NAME, "\u0669" * 10, "0" * 64)
@example(FILE_NAME, "9" * 5000, "0" * 64)
@example("\ud800", "1", "\udfff")
def test_snapshot_signature_check_of_any_text_is_a_bool(file_name: str, expires: str, signature: str) -> None:
    assert snapshots.verify(SNAPSHOT_SETTINGS, file_name, expires, signature) in (True, False)


@given(ANY_TEXT)
def test_snapshot_signature_only_verifies_itself(signature: str) -> None:
    expires = 4_000_000_000
    good = snapshots.sign(SNAPSHOT_SETTINGS, FILE_NAME, expires)
    assert snapshots.verify(SNAPSHOT_SETTINGS, FILE_NAME, str(expires), good)
    assert snapshots.verify(SNAPSHOT_SETTINGS, FILE_NAME, str(expires), signature) == (signature == good)
    assert not snapshots.verify(SNAPSHOT_SETTINGS, FILE_NAME, f"{expires}_0", good)
