"""Wire shapes of `/v1/scan/batches`, for OpenAPI and the tests."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from catalog_api.kit.schemas import ErrorBody, Strict
from catalog_api.scan.schemas import ScanResult

EventMode = Literal["batch", "per_photo"]
BatchStatus = Literal["open", "queued", "running", "done", "cancelled", "expired"]


class BatchPhotos(Strict):
    total: int = Field(description="Photos in the batch.")
    answered: int = Field(description="Photos answered so far (scanned, or failed with an error).")
    waiting: int = Field(description="Photos not answered yet (0 once the batch is finished).")


class BatchOutcomes(Strict):
    match: int = Field(description="Answered with one confident match.")
    race: int = Field(description="Answered with several matches, best first.")
    print_unreadable: int
    no_confident_match: int
    error: int = Field(description="Photos that could not be scanned (their `error` says why).")


class BatchTiers(Strict):
    certain: int = Field(description="Answered photos whose `analysis.tier` is `certain`.")
    likely: int
    review: int = Field(description="Races, photos with no match, and errors: for a person.")


class Batch(Strict):
    id: str
    status: BatchStatus
    page: bool = Field(description="Each photo scanned as a binder page (not available yet: always false).")
    events: EventMode = Field(description="`per_photo`: a `cardgame.scan.result` webhook event per answer.")
    photos: BatchPhotos
    outcomes: BatchOutcomes
    tiers: BatchTiers
    progress: float = Field(ge=0, le=1, description="answered / total (1 for an empty finished batch).")
    created_at: datetime
    closed_at: datetime | None = Field(description="When it stopped taking photos.")
    started_at: datetime | None = Field(description="When its first photo was taken for scanning.")
    finished_at: datetime | None
    expires_at: datetime = Field(description="Unfinished by then, it expires and its photos are deleted.")


class BatchCreate(Strict):
    urls: list[str] | None = Field(
        default=None,
        max_length=5000,
        description="Photos to fetch (https, public, as `POST /v1/scan`'s `url`): the batch is closed at "
        "once. Leave it out to open an empty batch and add photos with `POST .../photos`.",
    )
    page: bool = False
    events: EventMode = Field(
        default="batch",
        description="`batch`: `cardgame.scan.batch.completed` (or `.failed`) only; `per_photo`: also a "
        "`cardgame.scan.result` event for each photo as it is answered, in order (docs/events.md).",
    )


class BatchResult(ScanResult):
    index: int = Field(description="The photo's place in the batch, from 0, in the order it was added.")
    name: str = Field(description="The uploaded file's name, or the URL.")
    url: str | None = Field(description="The URL the photo was fetched from; null for an upload.")
    error: ErrorBody | None = Field(description="Why the photo could not be scanned; null when it was.")
