"""Scan intake: turn a `POST /v1/scan` request into the photo's bytes without trusting anything in it.

The two request shapes of the spec are handled here: a multipart upload (file field `image`) and a JSON
`{"url": ...}` that we fetch ourselves (`catalog_api.scan.url_fetch`). Both are capped at 10 MB while
streaming, photos never touch the disk and are never logged. The header check is `core.photo`
(bombs refused from the header, in the ingress and again in the scanner).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

from catalog_api.scan.url_fetch import FetchPolicy, fetch_image_url, size_text
from core.errors import (
    APIError,
    BadRequest,
    PayloadTooLarge,
)

# Multipart framing (boundaries, part headers, small extra fields) on top of the image itself.
MULTIPART_OVERHEAD_BYTES = 64 * 1024
# A JSON scan body only carries a URL; nothing legitimate comes close to this.
MAX_JSON_BYTES = 64 * 1024
# Sent with a 413: we stop reading mid-body, and without it uvicorn keeps draining the rest of the upload
# while the client, still sending, never sees the answer.
_CLOSE = {"Connection": "close"}


async def read_scan_upload(request: Request, policy: FetchPolicy) -> bytes:
    """Return the raw image bytes of a scan request, whichever of the two spec shapes it uses.

    multipart/form-data with a file in field `image`, or application/json `{"url": "..."}` (fetched under
    `policy`); anything else is a BadRequest. Extra form fields and JSON keys are ignored.
    """
    media_type, params = parse_options_header(request.headers.get("content-type", ""))
    media_type = media_type.strip()
    if media_type == b"multipart/form-data":
        return await _read_multipart(request, params.get(b"boundary", b""), policy.max_bytes)
    if media_type == b"application/json":
        url = await _read_json_url(request)
        return await fetch_image_url(url, policy)
    raise BadRequest(
        "The scan body must be multipart/form-data with the photo in the file field `image`, "
        'or application/json of the form {"url": "https://..."}.'
    )


def _declared_length(request: Request) -> int | None:
    raw = request.headers.get("content-length")
    if raw is None:
        return None
    raw = raw.strip()
    if not (raw.isascii() and raw.isdigit()):
        raise BadRequest("The Content-Length header is not a valid number.")
    return int(raw)


async def _read_capped(request: Request, limit: int, too_large: APIError) -> AsyncIterator[bytes]:
    """Yield body chunks, raising `too_large` as soon as more than `limit` bytes have arrived.

    Checking the declared Content-Length first answers an oversized upload before reading any of it.
    """
    declared = _declared_length(request)
    if declared is not None and declared > limit:
        raise too_large
    total = 0
    try:
        async for chunk in request.stream():
            total += len(chunk)
            if total > limit:
                raise too_large
            if chunk:
                yield chunk
    except ClientDisconnect:
        raise BadRequest("The request body ended before it was complete.") from None


async def _read_json_url(request: Request) -> str:
    too_large = PayloadTooLarge(
        f'The JSON body is larger than {MAX_JSON_BYTES // 1024} KiB; it should only hold {{"url": "..."}}.',
        headers=dict(_CLOSE),
    )
    body = bytearray()
    async for chunk in _read_capped(request, MAX_JSON_BYTES, too_large):
        body += chunk
    try:
        payload = json.loads(bytes(body))
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("The request body is not valid JSON.") from None
    except RecursionError:  # `[[[[...` nested past the parser's depth: 64 KiB holds thousands of levels
        raise BadRequest("The request body is nested too deeply to be the expected JSON.") from None
    if not isinstance(payload, dict) or "url" not in payload:
        raise BadRequest('The JSON body must be an object with a "url" key.')
    url = payload["url"]
    if not isinstance(url, str) or not url.strip():
        raise BadRequest('The "url" in the JSON body must be a non-empty string.')
    return url.strip()


class MultipartParts:
    """Multipart callbacks that read each part's `Content-Disposition` and hand its options (`name`,
    `filename`) to `_part_headers`; a subclass says what a part's data and end mean. Shared by the scan
    (one `image` part, in memory) and the batch uploads (every `image` part, to its own file)."""

    def __init__(self) -> None:
        self.finished = False
        self._field = bytearray()
        self._value = bytearray()
        self._disposition = b""

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self._part_begin,
            "on_header_field": lambda d, s, e: self._field.extend(d[s:e]),
            "on_header_value": lambda d, s, e: self._value.extend(d[s:e]),
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
            "on_end": self._end,
        }

    def _part_begin(self) -> None:
        self._disposition = b""
        self._field.clear()
        self._value.clear()

    def _header_end(self) -> None:
        if bytes(self._field).strip().lower() == b"content-disposition":
            self._disposition = bytes(self._value)
        self._field.clear()
        self._value.clear()

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        self._part_headers(options)

    def _part_headers(self, options: dict[bytes, bytes]) -> None:
        raise NotImplementedError

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        raise NotImplementedError

    def _part_end(self) -> None:
        pass

    def _end(self) -> None:
        self.finished = True


class _ImagePartCollector(MultipartParts):
    """Keeps only the first `image` part in memory; every other part is dropped."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__()
        self.max_bytes = max_bytes
        self.image: bytearray | None = None
        self.too_large = False
        self._in_image = False

    def _part_headers(self, options: dict[bytes, bytes]) -> None:
        self._in_image = options.get(b"name") == b"image" and self.image is None
        if self._in_image:
            self.image = bytearray()

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if not self._in_image or self.too_large:
            return
        assert self.image is not None
        if len(self.image) + (end - start) > self.max_bytes:
            self.too_large = True  # stop buffering; the caller raises after this write
            return
        self.image.extend(data[start:end])

    def _part_end(self) -> None:
        self._in_image = False


async def _read_multipart(request: Request, boundary: bytes, max_bytes: int) -> bytes:
    """Stream-parse the multipart body in memory (never Starlette's disk-spooling form parser)."""
    if not boundary:
        raise BadRequest("The multipart Content-Type header has no boundary.")
    too_large = PayloadTooLarge(f"The image is larger than {size_text(max_bytes)}.", headers=dict(_CLOSE))
    collector = _ImagePartCollector(max_bytes)
    try:
        parser = MultipartParser(boundary, collector.callbacks())
        async for chunk in _read_capped(request, max_bytes + MULTIPART_OVERHEAD_BYTES, too_large):
            parser.write(chunk)
            if collector.too_large:
                raise too_large
        parser.finalize()
    except FormParserError:
        raise BadRequest("The multipart body is malformed.") from None
    if collector.image is None:
        raise BadRequest("The multipart body has no file in the field `image`.")
    if not collector.finished:
        raise BadRequest("The multipart body ended before its closing boundary.")
    if not collector.image:
        raise BadRequest("The uploaded image file is empty.")
    return bytes(collector.image)
