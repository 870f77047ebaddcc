"""What the sync and async clients share: request shapes, the retry policy, the ETag cache and turning an
answer into data or a `CardcatError`. Only the sending and the sleeping differ between the two, so
each of them is a short loop over `Core.prepare` / `Core.settle`."""

from __future__ import annotations

import email.utils
import json
import os
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timezone
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from cardcat_client.errors import CardcatError
from cardcat_client.routes import RAW_ROUTES

USER_AGENT = "cardcat-client-python/0.2"

Params = Mapping[str, Any]
# Multipart files as httpx takes them: one part a field, or (field, part) pairs for a field repeated.
Part = tuple[str, bytes, str]
Files = dict[str, Part] | list[tuple[str, Part]]


@dataclass(frozen=True)
class Call:
    """One logical request; `idempotent` calls are retried on 5xx and lost connections, others only
    on 429 (refused before anything was done)."""

    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    idempotent: bool = True
    files: Files | None = None
    json: Any = None
    headers: dict[str, str] | None = None
    raw: bool = False  # the answer is a file: its bytes, not the envelope's data


@dataclass(frozen=True)
class Retry:
    """Wait `wait` seconds, then send the call again."""

    wait: float


@dataclass
class Stats:
    """Counters a caller can read (and tests do): every HTTP answer, how many were `304 Not Modified`
    served from the ETag cache, and how many requests were retries."""

    responses: int = 0
    not_modified: int = 0
    retries: int = 0


def query_params(params: Params) -> dict[str, str]:
    """Python values as the API's query strings: lists comma-joined (`include`, `ids`), booleans
    lowercase, dates ISO, None left out."""
    out: dict[str, str] = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, list | tuple | set | frozenset):
            out[key] = ",".join(str(v) for v in value)
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif hasattr(value, "isoformat"):
            out[key] = value.isoformat()
        else:
            out[key] = str(value)
    return out


class ScanFile(Protocol):
    """A file object opened for binary reading (`open(path, "rb")`, `io.BytesIO`)."""

    def read(self) -> bytes: ...


# What `scan()` takes. A `str` is only ever a URL: a path must be a `pathlib.Path` (any `os.PathLike`).
ScanSource = bytes | bytearray | memoryview | os.PathLike[str] | ScanFile | str
URL_SCHEMES = ("https://", "http://")


def scan_call(source: ScanSource, path: str = "/v1/scan") -> Call:
    """`POST /v1/scan` (or `path`: `/v1/scan/page`) for a photo given as bytes, a binary file object, a
    `pathlib.Path`, or an `https://` URL (a `str`) the server fetches.

    A `str` is never opened as a file: before 0.2 any string that was not a URL was read from the local
    disk and uploaded, so a URL-like value from an untrusted source (`"/etc/passwd"`, `"~/.ssh/id_rsa"`
    after a typo in the scheme) sent a local file to the server. Now such a string raises `TypeError`
    before anything is read or sent; wrap a path in `Path(...)` to upload it."""
    if isinstance(source, bytes | bytearray | memoryview):
        return _upload("photo", bytes(source), path)
    if isinstance(source, str):
        if not source[:8].lower().startswith(URL_SCHEMES):
            raise TypeError(
                "scan() takes a str only as an http(s) URL for the server to fetch; "
                "pass pathlib.Path(...) to upload a local file, or the photo's bytes"
            )
        return Call("POST", path, idempotent=False, json={"url": source})
    if isinstance(source, os.PathLike):
        file = Path(source)
        return _upload(file.name, file.read_bytes(), path)
    read = getattr(source, "read", None)
    if callable(read):
        data = read()
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError("scan() needs a file opened in binary mode ('rb'), not text")
        name = getattr(source, "name", None)
        return _upload(Path(name).name if isinstance(name, str) and name else "photo", bytes(data), path)
    raise TypeError(
        f"scan() takes bytes, a binary file, a pathlib.Path or an http(s) URL, not {type(source)}"
    )


# What `add_photos()` takes for each photo: bytes, a binary file object or a `pathlib.Path` (no URLs:
# a URL batch is made by `create_batch(urls=...)`).
PhotoSource = bytes | bytearray | memoryview | os.PathLike[str] | ScanFile
# Photos a batch upload request carries (the server's CARDCAT_BATCH_UPLOAD_MAX_PHOTOS default).
BATCH_UPLOAD_PHOTOS = 100


def create_batch_call(urls: list[str] | None, idempotency_key: str, events: str = "batch") -> Call:
    """`POST /v1/scan/batches`: empty, or closed at once holding `urls`. The key makes it safe to retry."""
    body: dict[str, Any] = {"events": events} if urls is None else {"urls": list(urls), "events": events}
    return Call("POST", "/v1/scan/batches", json=body, headers={"Idempotency-Key": idempotency_key})


def add_photos_calls(batch_id: str, photos: Iterable[PhotoSource], idempotency_key: str) -> Iterator[Call]:
    """`POST .../photos` in requests of up to 100 photos, each with its own key derived from
    `idempotency_key`, so a retried request never adds its photos twice. Photos are read a request at a
    time, so a 5,000-photo batch is never held in memory whole."""
    path = f"/v1/scan/batches/{quote(batch_id, safe='')}/photos"
    parts: list[tuple[str, Part]] = []
    request = 0
    for index, photo in enumerate(photos):
        parts.append(("image", _photo_part(photo, index)))
        if len(parts) == BATCH_UPLOAD_PHOTOS:
            yield Call("POST", path, files=parts, headers={"Idempotency-Key": f"{idempotency_key}-{request}"})
            parts, request = [], request + 1
    if parts:
        yield Call("POST", path, files=parts, headers={"Idempotency-Key": f"{idempotency_key}-{request}"})


def export_call(batch_id: str, params: Params) -> Call:
    """`GET .../export`: the batch's answers as CSV or NDJSON bytes."""
    method, path = RAW_ROUTES["export_batch"]
    return Call(method, path.format(batch_id=quote(batch_id, safe="")), query_params(params), raw=True)


def _photo_part(photo: PhotoSource, index: int) -> Part:
    if isinstance(photo, bytes | bytearray | memoryview):
        return _part(f"photo-{index + 1}.jpg", bytes(photo))
    if isinstance(photo, os.PathLike):
        path = Path(photo)
        return _part(path.name, path.read_bytes())
    read = getattr(photo, "read", None)
    if callable(read) and not isinstance(photo, str):
        data = read()
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError("add_photos() needs files opened in binary mode ('rb'), not text")
        name = getattr(photo, "name", None)
        return _part(
            Path(name).name if isinstance(name, str) and name else f"photo-{index + 1}.jpg", bytes(data)
        )
    raise TypeError(f"add_photos() takes bytes, binary files or pathlib.Paths, not {type(photo)}")


def _upload(name: str, data: bytes, path: str) -> Call:
    return Call("POST", path, idempotent=False, files={"image": _part(name, data)})


def _part(name: str, data: bytes) -> Part:
    kinds = {b"\xff\xd8\xff": "image/jpeg", b"\x89PNG": "image/png", b"RIFF": "image/webp"}
    kind = next((mime for magic, mime in kinds.items() if data.startswith(magic)), "application/octet-stream")
    return (name, data, kind)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """`Retry-After` as seconds: RFC 9110's delay-seconds (ASCII digits only) or an HTTP-date; None when
    absent or anything else. Only ASCII is read: `str.isdigit`, `int` and the date parser also take
    other scripts' digits (`²`, `١٢`), and `float("²")` raises, so an odd header from a proxy must not
    become an exception the caller never asked for (it is ignored: the usual backoff applies)."""
    if not value:
        return None
    value = value.strip(" \t")
    if not value.isascii():
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    if when.tzinfo is None:  # `-0000`: UTC without a zone (RFC 5322), never the local time
        when = when.replace(tzinfo=timezone.utc)  # noqa: UP017 (the client runs on Python 3.10)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def error_from(response: httpx.Response) -> CardcatError:
    """The envelope's `{code, message}`, or `http_<status>` with the start of the body when the answer
    is not the envelope (a proxy in between)."""
    retry_after = retry_after_seconds(response.headers.get("retry-after"))
    code, message = f"http_{response.status_code}", response.text[:200] or response.reason_phrase
    try:
        error = response.json().get("error")
        if isinstance(error, dict) and isinstance(error.get("code"), str):
            code, message = error["code"], str(error.get("message") or "")
    except (ValueError, AttributeError):
        pass
    return CardcatError(
        response.status_code, code, message, retry_after=retry_after, headers=dict(response.headers)
    )


class Core:
    """The policy both clients run.

    Retries: a `429` is retried after its `Retry-After` (any method: the server refused it before doing
    anything) unless that wait exceeds `max_retry_wait`; a `5xx` or a lost connection is retried with
    exponential backoff (`backoff_base × 2^n`, capped, ±25 % jitter) for idempotent reads only; at most
    `max_retries` retries per call. ETags: the last `ETag` and body of each GET URL are kept (LRU, at most
    `etag_cache_size` URLs); the next GET sends `If-None-Match` and a `304` reuses the kept body."""

    def __init__(
        self,
        *,
        max_retries: int = 3,
        max_retry_wait: float = 60.0,
        backoff_base: float = 0.5,
        backoff_cap: float = 8.0,
        etag_cache_size: int = 256,
    ) -> None:
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.etag_cache_size = etag_cache_size
        self.stats = Stats()
        self._etags: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
        self._lock = threading.Lock()  # a sync client may be shared by threads

    def prepare(self, request: httpx.Request) -> None:
        """Make a GET conditional when an earlier answer for the same URL is kept."""
        if request.method != "GET":
            return
        with self._lock:
            kept = self._etags.get(str(request.url))
        if kept:
            request.headers["If-None-Match"] = kept[0]

    def backoff(self, attempt: int) -> float:
        wait = min(self.backoff_cap, self.backoff_base * 2**attempt)
        return float(wait * random.uniform(0.75, 1.25))

    def settle(self, call: Call, request: httpx.Request, response: httpx.Response, attempt: int) -> Any:
        """The envelope's `data`, or a `Retry`, or raises the `CardcatError`."""
        self.stats.responses += 1
        url = str(request.url)
        if response.status_code == 304 and (kept := self._kept(url)) is not None:
            self.stats.not_modified += 1
            return self._data(kept, response)
        if 200 <= response.status_code < 300:
            etag = response.headers.get("etag")
            if call.raw:
                return response.content
            if request.method == "GET" and etag and self.etag_cache_size > 0:
                self._keep(url, etag, response.content)
            return self._data(response.content, response)
        error = error_from(response)
        if attempt < self.max_retries:
            if response.status_code == 429:
                wait = error.retry_after if error.retry_after is not None else self.backoff(attempt)
                if wait <= self.max_retry_wait:
                    return Retry(wait)
            elif response.status_code >= 500 and call.idempotent:
                hinted = error.retry_after
                bounded = hinted is not None and hinted <= self.max_retry_wait
                return Retry(hinted if hinted is not None and bounded else self.backoff(attempt))
        raise error

    def _kept(self, url: str) -> bytes | None:
        with self._lock:
            kept = self._etags.get(url)
            if kept is not None:
                self._etags.move_to_end(url)
            return None if kept is None else kept[1]

    def _keep(self, url: str, etag: str, body: bytes) -> None:
        with self._lock:
            self._etags[url] = (etag, body)
            self._etags.move_to_end(url)
            while len(self._etags) > self.etag_cache_size:
                self._etags.popitem(last=False)

    def lost_connection(self, call: Call, attempt: int) -> Retry | None:
        """A retry after a transport failure, for idempotent calls with attempts left."""
        return Retry(self.backoff(attempt)) if call.idempotent and attempt < self.max_retries else None

    @staticmethod
    def _data(content: bytes, response: httpx.Response) -> Any:
        try:
            body = json.loads(content)
        except ValueError as exc:
            raise CardcatError(response.status_code, "invalid_response", "the answer is not JSON") from exc
        if not isinstance(body, dict) or "data" not in body:
            raise CardcatError(response.status_code, "invalid_response", "the answer is not the envelope")
        return body["data"]
