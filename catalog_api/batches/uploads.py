"""Reading `POST /v1/scan/batches/{id}/photos`: a multipart body with the file field `image` repeated
once a photo, each streamed straight to a private staged file (never held whole in memory, never
Starlette's spooling form parser), each capped at `/v1/scan`'s 10 MB and checked as `/v1/scan` checks a
photo. Any refusal removes every file this request staged and changes nothing else."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request

from catalog_api.batches.photo_files import STAGED_PREFIX
from catalog_api.kit.private_files import open_private
from catalog_api.scan.intake import MultipartParts
from catalog_api.scan.url_fetch import size_text
from core.errors import APIError, BadRequest, PayloadTooLarge
from core.photo import probe_image

# Multipart framing per part (boundary, headers) on top of the photo itself.
PART_OVERHEAD_BYTES = 16 * 1024
_CLOSE = {"Connection": "close"}
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]")
MAX_NAME_CHARS = 255


@dataclass
class StagedPhoto:
    name: str
    path: Path
    size: int = 0
    sha256: Any = field(default_factory=hashlib.sha256)


@dataclass
class StagedUpload:
    """What one request staged. `digest` names its photos (each one's name and bytes, in order), not the
    body's bytes, whose multipart boundary a client draws anew when it sends the same photos again: it
    is what `Idempotency-Key` compares."""

    photos: list[StagedPhoto] = field(default_factory=list)
    digest: str = ""

    def discard(self) -> None:
        for photo in self.photos:
            photo.path.unlink(missing_ok=True)


def photo_name(filename: bytes | None, index: int) -> str:
    """The upload's file name as the photo's name: its last path component, printable, at most 255
    characters; `photo-<n>` when it has none."""
    text = (filename or b"").decode("utf-8", "replace")
    text = _UNPRINTABLE.sub("", text.replace("\\", "/").rsplit("/", 1)[-1]).strip()
    return text[:MAX_NAME_CHARS] or f"photo-{index + 1}"


class _PhotoWriter(MultipartParts):
    """Writes each `image` part to its own staged file; other parts are dropped."""

    def __init__(self, directory: Path, max_photos: int, max_bytes: int, upload: StagedUpload) -> None:
        super().__init__()
        self.directory, self.upload = directory, upload
        self.max_photos, self.max_bytes = max_photos, max_bytes
        self.error: APIError | None = None
        self._file: IO[bytes] | None = None
        self._current: StagedPhoto | None = None
        self._token = secrets.token_hex(6)

    def _part_headers(self, options: dict[bytes, bytes]) -> None:
        if options.get(b"name") != b"image" or self.error:
            return
        index = len(self.upload.photos)
        if index >= self.max_photos:
            self.error = PayloadTooLarge(
                f"One upload takes at most {self.max_photos} photos; send the rest in another.",
                headers=dict(_CLOSE),
            )
            return
        path = self.directory / f"{STAGED_PREFIX}{self._token}-{index}"
        self._current = StagedPhoto(photo_name(options.get(b"filename"), index), path)
        self.upload.photos.append(self._current)
        self._file = open_private(path)

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._file is None or self._current is None or self.error:
            return
        self._current.size += end - start
        if self._current.size > self.max_bytes:
            self.error = PayloadTooLarge(
                f"Photo {self._current.name!r} is larger than {size_text(self.max_bytes)}.",
                headers=dict(_CLOSE),
            )
            return
        self._file.write(data[start:end])
        self._current.sha256.update(data[start:end])

    def _part_end(self) -> None:
        self.close_file()

    def close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._current = None


async def stage_photos(request: Request, directory: Path, *, max_photos: int, max_bytes: int) -> StagedUpload:
    """Every `image` part of the request, staged in `directory`, each checked like a `/v1/scan` photo."""
    media_type, params = parse_options_header(request.headers.get("content-type", ""))
    if media_type.strip() != b"multipart/form-data":
        raise BadRequest("Photos are added as multipart/form-data, one file field `image` per photo.")
    boundary = params.get(b"boundary", b"")
    if not boundary:
        raise BadRequest("The multipart Content-Type header has no boundary.")
    upload = StagedUpload()
    writer = _PhotoWriter(directory, max_photos, max_bytes, upload)
    limit = max_photos * (max_bytes + PART_OVERHEAD_BYTES)
    received = 0
    try:
        parser = MultipartParser(boundary, writer.callbacks())
        try:
            async for chunk in request.stream():
                received += len(chunk)
                if received > limit:
                    raise PayloadTooLarge(
                        f"One upload takes at most {max_photos} photos of {size_text(max_bytes)}.",
                        headers=dict(_CLOSE),
                    )
                parser.write(chunk)
                if writer.error:
                    raise writer.error
            parser.finalize()
        except ClientDisconnect:
            raise BadRequest("The request body ended before it was complete.") from None
        except FormParserError:
            raise BadRequest("The multipart body is malformed.") from None
        finally:
            writer.close_file()
        if not upload.photos:
            raise BadRequest("The multipart body has no file in the field `image`.")
        if not writer.finished:
            raise BadRequest("The multipart body ended before its closing boundary.")
        for photo in upload.photos:
            await run_in_threadpool(_check, photo)
    except BaseException:
        upload.discard()
        raise
    listing = "".join(f"{photo.name}\0{photo.sha256.hexdigest()}\n" for photo in upload.photos)
    upload.digest = hashlib.sha256(listing.encode("utf-8", "surrogatepass")).hexdigest()
    return upload


def _check(photo: StagedPhoto) -> None:
    """`/v1/scan`'s header check (format, pixel cap, decompression bombs), naming the photo it refuses."""
    if photo.size == 0:
        raise BadRequest(f"Photo {photo.name!r} is empty.")
    try:
        probe_image(photo.path.read_bytes())
    except APIError as error:
        raise type(error)(f"Photo {photo.name!r}: {error.message}") from None
