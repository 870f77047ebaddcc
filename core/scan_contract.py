"""The typed contract between the `/v1` ingress and the Ray Serve scanner: what crosses between them.

The ingress sends a photo's bytes; the scanner answers with card ids and scores, or says why it has
none (`unidentified`), or refuses bytes it cannot decode (`error`). Both sides build and read these
shapes from here (the scanner in `serve_app`, the ingress in `catalog_api.scan`), so the answer is typed
at both ends and the "unidentified" vocabulary is written once. On the wire (a Ray handle call, or JSON
over Ray's HTTP proxy) they are plain dicts: the shapes cost nothing at run time.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from core.errors import APIError, BadRequest, ScanUnavailable, UnsupportedImage

UnidentifiedReason = Literal["print_unreadable", "no_confident_match"]
# `POST /v1/scan/page` only (#48): a card place of a page with no face to name.
PageUnidentifiedReason = Literal["print_unreadable", "no_confident_match", "card_back", "empty_slot"]

# Why a scan has no answer, in the words a client reads.
PRINT_UNREADABLE = "Could not read the card's name, number or set code, and no catalog card looked close."
PRINT_MATCHES_NOTHING = "Read the card's print, but no card it points at matches the picture."
# The scanner named cards, but none is in the catalog any more (or it gave no reason at all).
CATALOG_MATCHES_NOTHING = "No catalog card matched."
EMPTY_SLOT = "No card was found in this pocket."
CARD_BACK = "The card lies face down: its back is showing."
# Cards a page answer names at most (#48): a photo of more lists the largest and says `truncated`.
PAGE_CARDS = 24


class ScannedCard(TypedDict):
    card_id: str
    score: float


class Unidentified(TypedDict):
    reason: UnidentifiedReason | PageUnidentifiedReason
    message: str


# How far a scan client may trust an answer (`serve_app.fusion.with_tier`): `certain` goes straight to
# inventory, `likely` is right nearly always, `review` (a race, or no answer) goes to a person.
Tier = Literal["certain", "likely", "review"]
# How the scanner found the card (#47's cascade): `quick`, the detector's first look alone (kept only when
# the picture is certain of a unique artwork); `full`, the full pipeline.
ScanPath = Literal["quick", "full"]


class ScanDecision(TypedDict):
    """The scanner's answer for a photo it could decode: matches best first, else why there are none."""

    matches: list[ScannedCard]
    unidentified: Unidentified | None
    details: NotRequired[dict[str, Any]]  # how fusion decided (thresholds' inputs): for tests and tuning
    tier: NotRequired[Tier]  # absent from a scanner older than tiers: read as `review`
    path: NotRequired[ScanPath]  # absent from a scanner older than the cascade: read as `full`
    # Seconds per scanner stage (decode, locate, search, read, fuse, total): the ingress's metrics.
    timings: NotRequired[dict[str, float]]


class PageSlot(TypedDict):
    row: int
    col: int


class PageCardDecision(TypedDict):
    """One card place of a page (#48): its corners (TL, TR, BR, BL of the card, photo px after EXIF
    rotation), its pocket on a grid, and the decision a single scan of that card would give; an empty
    pocket's is no match with reason `empty_slot`."""

    corners: list[list[float]]
    slot: NotRequired[PageSlot]
    decision: ScanDecision


class PageDecision(TypedDict):
    """The scanner's answer for a photo of many cards: every card in reading order."""

    cards: list[PageCardDecision]
    layout: Literal["grid", "free"]
    grid: dict[str, int] | None  # {"rows", "cols"} on a grid
    truncated: bool  # more than PAGE_CARDS were found: the largest are listed
    timings: NotRequired[dict[str, float]]


class ScanError(TypedDict):
    code: str  # the spec's error code: `unsupported_image` or `bad_request`
    message: str


class ScanRefusal(TypedDict):
    """The scanner's answer for bytes that are not a photo it can decode."""

    error: ScanError


ScanAnswer = ScanDecision | ScanRefusal
PageAnswer = PageDecision | ScanRefusal


# The errors a scanner may refuse a photo with; any other code reads as `unsupported_image`.
REFUSALS: dict[str, type[APIError]] = {cls.code: cls for cls in (BadRequest, UnsupportedImage)}


def refusal(code: str, message: str) -> ScanRefusal:
    return {"error": {"code": code, "message": message}}


def refusal_error(error: ScanError) -> APIError:
    """The API error a scanner's refusal stands for: what the ingress raises, and whose status the
    scanner's own HTTP route answers with."""
    cls = REFUSALS.get(str(error.get("code")), UnsupportedImage)
    return cls(str(error.get("message") or "The image could not be decoded."))


def unidentified_answer(decision: ScanDecision) -> Unidentified:
    """Why a scan answers no card: the scanner's reason, else that no catalog card matched."""
    return decision["unidentified"] or {"reason": "no_confident_match", "message": CATALOG_MATCHES_NOTHING}


# A scan is a pure function of its photo, so a call that died with its replica (or hit an app being
# redeployed) is tried once more, when Ray has routed around the dead replica; if that fails too the
# client is told when to come back: replicas restart in seconds.
ATTEMPTS = 2
RETRY_AFTER_S = 2
# A call Ray cannot place (the app deleted, or every replica gone and none yet restarted) waits for a
# replica rather than failing; past this the client is told to come back instead of waiting on.
CALL_TIMEOUT_S = 60.0


def unavailable(message: str) -> ScanUnavailable:
    """`503 scan_unavailable` with the Retry-After both scan clients send (`catalog_api.scan.client`,
    `serve_app.ingress`)."""
    return ScanUnavailable(message, headers={"Retry-After": str(RETRY_AFTER_S)})
