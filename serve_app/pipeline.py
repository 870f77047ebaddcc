"""One scan composed from the scanner's three model deployments, wherever that composition runs.

`ScanPipeline` holds DeploymentHandles to the Detector, Embedder and Reader of one Serve application and
turns a photo's bytes into a decision: locate, search, read, fuse. Two callers share it, so the logic
exists once:

- the `/v1` ingress (`serve_app.ingress.ServeHandleScanClient`) runs it in the uvicorn worker
  itself: one Ray call per scan fewer than going through a ScanService replica (measured:
  docs/scanner-performance.md);
- the `ScanService` deployment (`serve_app.app`) runs it for Ray's HTTP proxy (`POST /scan`) and for
  Serve configs whose ingress is elsewhere (deploy/).

It loads no network runtime (no torch, no FAISS): the ingress imports it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any, Literal

import numpy as np
from ray.serve.handle import DeploymentHandle
from ray.serve.metrics import Histogram

from core.scan_contract import (
    CARD_BACK,
    EMPTY_SLOT,
    PAGE_CARDS,
    PageAnswer,
    PageCardDecision,
    ScanAnswer,
    ScanDecision,
    ScanPath,
    refusal,
)
from serve_app.fusion import (
    Decision,
    Hits,
    PrintTable,
    Read,
    Thresholds,
    better_turn,
    decide,
    first_look_answer,
    footer_candidates,
    picture_answer,
)
from serve_app.page_layout import arrange

# The application's deployment names (the classes in serve_app.app, and the names deploy/ configs use).
DETECTOR, EMBEDDER, READER, SERVICE = "Detector", "Embedder", "Reader", "ScanService"
TABLES_KEPT = 2
# The key of a Reader's answer for a face it could not fetch from the object store (`FaceLost`).
FACE_LOST = "face_lost"
# Stage latency buckets (seconds): a stage takes ~5 ms (search) to ~1 s (a 12 MP decode on a busy CPU).
# Ray exports it as `ray_cardcat_scanner_stage_seconds` (deploy/grafana/cardcat.json).
STAGE_METRIC = "cardcat_scanner_stage_seconds"
STAGE_BUCKETS = [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]


def _points(quad: np.ndarray) -> list[list[float]]:
    return [[round(float(x), 1), round(float(y), 1)] for x, y in quad]


def _place(reason: Literal["card_back", "empty_slot"], message: str) -> ScanDecision:
    """The decision for a card place with no face to name (a card back, an empty pocket), and why."""
    return {
        "matches": [],
        "unidentified": {"reason": reason, "message": message},
        "tier": "review",
        "path": "full",
    }


class FaceLost(RuntimeError):
    """The Reader could not fetch this scan's face from Ray's object store (freed early, or its Detector
    replica died). The scan as a whole can be tried again: the ingress does (`ATTEMPTS`)."""


@dataclasses.dataclass(frozen=True)
class Located:
    """The Detector's answer for one photo. `face` is a Ray object reference to the rectified 600x838 face
    (None: no card found): the pipeline passes it on to the Reader without ever fetching the 1.5 MB
    itself; `thumbnail` is the face already shrunk for the Embedder (38 KB, sent inline). `error` says why
    the bytes could not be decoded (the spec's code and message)."""

    face: Any = None
    thumbnail: np.ndarray | None = None
    error: tuple[str, str] | None = None
    # Seconds this photo spent in the replica's stages: `decode` (its own), `look` (its share of its
    # batch's first look), `locate` (its batch's full pipeline: detector passes and rectification).
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    # The face came from the cascade's first look (#47), and these are that look's candidates: a scan
    # whose answer from it is not certain sends them back (`LocateRequest.coarse`).
    first_look: bool = False
    candidates: list[np.ndarray] | None = None


@dataclasses.dataclass(frozen=True)
class LocateRequest:
    """What the Detector's `locate` takes for one photo."""

    photo: bytes
    thumbnail: tuple[int, int]  # (width, height) of the face shrunk for the Embedder
    first_look: bool = False  # try the cascade's first look before the full pipeline (#47)
    # A first look's candidates for this photo, sent back with it for the full pipeline: its whole-photo
    # view is not computed twice.
    coarse: list[np.ndarray] | None = None


@dataclasses.dataclass(frozen=True)
class PageRequest:
    """What the Detector's `locate_page` takes: one photo of many cards (#48)."""

    photo: bytes
    thumbnail: tuple[int, int]  # (width, height) of each face shrunk for the Embedder
    limit: int = PAGE_CARDS


@dataclasses.dataclass(frozen=True)
class LocatedPage:
    """The Detector's answer for a page photo: each card's corners (photo px, largest card first) with its
    face (a Ray object reference, as `Located.face`) and thumbnail, or why the bytes could not be
    decoded."""

    corners: list[np.ndarray] = dataclasses.field(default_factory=list)
    faces: list[Any] = dataclasses.field(default_factory=list)  # None: a card lying face down
    thumbnails: list[np.ndarray | None] = dataclasses.field(default_factory=list)
    truncated: bool = False
    error: tuple[str, str] | None = None
    timings: dict[str, float] = dataclasses.field(default_factory=dict)


class ScanPipeline:
    """Composes the three model deployments and fuses their answers."""

    def __init__(
        self,
        detector: DeploymentHandle,
        embedder: DeploymentHandle,
        reader: DeploymentHandle,
        thresholds: Thresholds | None = None,
        first_look: bool = True,
    ) -> None:
        self.detector, self.embedder, self.reader = detector, embedder, reader
        self.thresholds = thresholds or Thresholds()
        self.first_look = first_look
        # Print tables by build stamp: while Embedder replicas move to a new build, both are in use.
        self.tables: dict[str, PrintTable] = {}
        self.latest: PrintTable | None = None
        self.embed_size: tuple[int, int] | None = None
        # Exported through Ray's metrics (each node's metrics agent, `ray_` prefixed; in a ScanService
        # replica with the deployment's and replica's tags, in the ingress without); the same timings
        # travel back with each decision.
        self.stage_latency = Histogram(
            STAGE_METRIC,
            description="Scanner stage latency: decode and locate (in the Detector replica), search and "
            "read (each call as the composing process waits for it, queueing and batching included), "
            "fuse, total.",
            boundaries=STAGE_BUCKETS,
            tag_keys=("stage",),
        )

    async def _fetch_table(self) -> tuple[str, PrintTable]:
        stamp, table = await self.embedder.print_table.remote()
        self.tables = {s: t for s, t in self.tables.items() if s != stamp} | {stamp: table}
        while len(self.tables) > TABLES_KEPT:
            del self.tables[next(iter(self.tables))]
        self.latest = table
        return stamp, table

    async def scan_photo(self, data: bytes, background: bool = False) -> ScanAnswer:
        """The decision for a photo's bytes as JSON-ready data, with its stage `timings`, or
        `{"error": {code, message}}` when the bytes are not a photo we can decode. `background`: a batch
        photo, which the Detector lets in behind users' scans (`serve_app.priority`)."""
        started = time.perf_counter()
        if self.embed_size is None:
            self.embed_size = tuple(await self.embedder.input_size.remote())
        locate = self.detector.locate_background if background else self.detector.locate
        located: Located = await locate.remote(LocateRequest(data, self.embed_size, self.first_look))
        timings = dict(located.timings)
        if located.error is not None:
            self._observe(timings)
            code, message = located.error
            return refusal(code, message)
        path: ScanPath = "full"
        if located.first_look:
            # The cascade (#47): a first look's face answers only when the picture alone is certain of a
            # unique artwork; anything else goes through the full pipeline, from the same candidates, and
            # is decided as if the first look had never happened.
            quick = await self.quick_answer(located, timings)
            if quick is not None:
                decision, path = quick, "quick"
            else:
                located = await locate.remote(LocateRequest(data, self.embed_size, coarse=located.candidates))
                again = dict(located.timings)  # the same bytes decoded a moment ago: no error this time
                decision = await self.scan(located, again)
                for stage, seconds in again.items():
                    timings[stage] = timings.get(stage, 0.0) + seconds
        else:
            decision = await self.scan(located, timings)
        answer = decision.as_dict()
        answer["path"] = path
        timings["total"] = time.perf_counter() - started
        self._observe(timings)
        answer["timings"] = timings
        return answer

    async def scan_page(self, data: bytes) -> PageAnswer:
        """Every card in a photo (#48): the page detector finds them all in one pass, each face is decided
        as a single scan of it would be (`scan`, all at once, so the model deployments batch them), and
        the layout (`serve_app.page_layout`) orders them and names each pocket of a binder page; a pocket
        with no card found is listed as `empty_slot`."""
        started = time.perf_counter()
        if self.embed_size is None:
            self.embed_size = tuple(await self.embedder.input_size.remote())
        page: LocatedPage = await self.detector.locate_page.remote(PageRequest(data, self.embed_size))
        timings = dict(page.timings)
        if page.error is not None:
            return refusal(*page.error)
        spent: list[dict[str, float]] = [{} for _ in page.faces]
        decisions = await asyncio.gather(
            *(
                self._page_card(face, thumbnail, each)
                for face, thumbnail, each in zip(page.faces, page.thumbnails, spent, strict=True)
            )
        )
        for each in spent:
            for stage, seconds in each.items():
                timings[stage] = timings.get(stage, 0.0) + seconds
        layout = arrange(page.corners)
        cards: list[PageCardDecision] = []
        for i in layout.order:
            card: PageCardDecision = {"corners": _points(page.corners[i]), "decision": decisions[i]}
            if layout.slots is not None:
                row, col = layout.slots[i]
                card["slot"] = {"row": row, "col": col}
            cards.append(card)
        # A page cut to its largest cards lists no empty pocket: the cards left out may lie there.
        for (row, col), quad in [] if page.truncated else layout.empty or []:
            place: PageCardDecision = {
                "corners": _points(quad),
                "slot": {"row": row, "col": col},
                "decision": _place("empty_slot", EMPTY_SLOT),
            }
            cards.append(place)
        if layout.slots is not None:
            cards.sort(key=lambda c: (c["slot"]["row"], c["slot"]["col"]))
        timings["total"] = time.perf_counter() - started
        grid = {"rows": layout.grid[0], "cols": layout.grid[1]} if layout.grid else None
        return {
            "cards": cards,
            "layout": layout.layout,
            "grid": grid,
            "truncated": page.truncated,
            "timings": timings,
        }

    async def _page_card(
        self, face: Any, thumbnail: np.ndarray | None, spent: dict[str, float]
    ) -> ScanDecision:
        """One card of a page decided as a single scan of it would be; a card face down is not scanned."""
        if face is None:
            return _place("card_back", CARD_BACK)
        decision = (await self.scan(Located(face, thumbnail), spent)).as_dict()
        decision["path"] = "full"
        return decision

    def _observe(self, timings: dict[str, float]) -> None:
        for stage, seconds in timings.items():
            self.stage_latency.observe(seconds, tags={"stage": stage})

    async def _search(self, thumbnail: np.ndarray, spent: dict[str, float]) -> tuple[bool, Hits, PrintTable]:
        """The face's index hits, the better way up (whether that is turned 180°), and the print table of
        the build they came from; `spent` receives the `search` seconds."""
        started = time.perf_counter()
        for _ in range(2):
            upright, upside_down, stamp = await self.embedder.search.remote(thumbnail)
            known = self.tables.get(stamp)
            if known is None:
                fetched, table = await self._fetch_table()
                if fetched != stamp:  # another replica answered from another build: search again
                    continue
            else:
                table = known
            break
        else:
            raise RuntimeError(f"no print table for index build {stamp}")
        spent["search"] = time.perf_counter() - started
        turned, hits = better_turn(False, True, upright, upside_down)
        return turned, hits, table

    async def quick_answer(self, located: Located, timings: dict[str, float]) -> Decision | None:
        """A first look's answer (#47, `fusion.first_look_answer`: a unique artwork the picture is certain
        of), or None for the full pipeline. The face is never read."""
        assert located.thumbnail is not None
        _, hits, table = await self._search(located.thumbnail, timings)
        started = time.perf_counter()
        answer = first_look_answer(dict(hits), table, self.thresholds)
        timings["fuse"] = time.perf_counter() - started
        return answer

    async def scan(self, located: Located, timings: dict[str, float] | None = None) -> Decision:
        """The decision for a located photo; `timings` receives the `search`, `read` and `fuse` seconds.
        The face is read only where the print could change the answer (`picture_answer`: a photo of a
        card whose artwork has no reprint, which the picture alone answers, is not read), so `read` is
        absent from those scans' timings."""
        spent = timings if timings is not None else {}
        if located.face is None or located.thumbnail is None:
            latest = self.latest or (await self._fetch_table())[1]
            started = time.perf_counter()
            decision = decide({}, None, latest, self.thresholds)
            spent["fuse"] = time.perf_counter() - started
            return decision
        turned, hits, table = await self._search(located.thumbnail, spent)
        started = time.perf_counter()
        answer = picture_answer(dict(hits), table, self.thresholds)
        fused_s = time.perf_counter() - started
        if answer is not None:  # no read could change it: the face is never read
            spent["fuse"] = fused_s
            return answer
        footers = footer_candidates(hits, table, self.thresholds.race_window)
        started = time.perf_counter()
        read = await self.reader.read.remote((located.face, turned, footers))
        if FACE_LOST in read:
            raise FaceLost(read[FACE_LOST])
        spent["read"] = time.perf_counter() - started
        started = time.perf_counter()
        decision = decide(dict(hits), Read(**read), table, self.thresholds)
        spent["fuse"] = fused_s + time.perf_counter() - started
        return decision
