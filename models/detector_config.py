"""The card detector's architecture and inference knobs (`DetectorConfig`), stored inside its weights file
(and its ONNX export's metadata) so that serving matches training. Apart from `models.detector` (the
locate passes) and `models.detector_net` (the network), which both read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class DetectorConfig:
    """Architecture and inference knobs; stored inside the weights file so serving matches training."""

    input_size: int = 224
    zoom_fill: float = 0.78  # card height / view height in the zoomed pass
    widths: tuple[int, ...] = (16, 32, 64, 96, 128)
    decoder: tuple[int, ...] = (64, 48, 24, 16)
    refine_passes: int = 3  # zoomed passes; each starts from the previous quad
    min_area: float = 0.006  # mask component / view area, first pass
    min_score: float = 0.7  # mean card probability inside the final quad
    min_fit: float = 0.85  # area ratio between the mask blob's outline and its quad
    threshold: float = 0.3  # first-pass mask threshold
    close: int = 9  # first-pass morphological closing (px)
    geo: float = 3.0  # weight of photo side lengths against the band maps when telling long from short
    candidates: int = 3  # coarse blobs the first zoomed pass judges
    tta: bool = False  # also predict on mirrored views and average (steadier edges, twice the compute)
    rect_fallback: bool = False  # first pass: a blob no quad fits still yields its min-area rectangle
    extra_threshold: float = 0.0  # first pass: also take blobs at this threshold (splits card from paper)
    # A refinement pass that moved no corner more than this fraction of the card's height ends that photo's
    # refinement: a settled quad gains nothing from another look (0: always run every pass).
    settle: float = 0.0
    # Two coarse candidates whose corners all lie within this fraction of the card's size of each other are
    # one find (the extra threshold mostly outlines the same card again): the zoomed pass judges it once.
    # Chosen on validation photos (seeds 20M): same corners and finds as judging both, a view fewer.
    same_find: float = 0.03
    # The same for the first zoomed look against the coarse quad it was drawn from: when the coarse quad
    # was already that close, the next view would be drawn from nearly the same quad (0: always refine).
    # Off: on validation photos (`training.detector.evaluate --count 150 --seed-base 20000000`) 0.01 kept
    # every kind's corner errors (standard mean 0.199 -> 0.196%, hard 0.473 -> 0.474%, p95 equal) for 26%
    # less detector time on standard photos, but its slightly moved corners reshuffled reprint races on
    # the benchmark (`scan_accuracy.py`: standard top-1 99.6 -> 99.4%, hard shared-artwork true card among
    # the matches 99.2 -> 98.0%, one confident wrong answer): docs/scanner-performance.md.
    settle_coarse: float = 0.0
    # A photo whose first look found no card gets a second one: `search_tiles` x `search_tiles` overlapping
    # windows of the photo, each `search_span` of its long side, seen at the view's full resolution. A
    # small card (a sixth of the photo's height), partly under a finger or on a sheet of its own colour,
    # is ~35 px tall in the letterboxed first look: too few pixels for the mask (0: no second look).
    # Chosen on validation photos (`training.detector.evaluate --count 300 --seed-base 20000000`): hard-v1
    # found 98.7 -> 100%, within 5% 98.3 -> 99.0%; other card photos are found by the first look and
    # unchanged; no-card photos pay four more views (3x3 windows of 0.45: 99.3% within 5%, nine views).
    search_tiles: int = 2
    search_span: float = 0.6
    # A zoomed find whose band evidence (top band on its top side plus bottom band on its bottom, 0-2) is
    # below this is not a card's face (0: off): card backs, empty pockets and holders carry no name or
    # number band (#43). Chosen on validation photos (`training.detector.evaluate --validation --count 80`,
    # detector v8): at 0.9 a card is found in 2.5% of the empty scenes (card backs, sleeves, toploaders,
    # binder pages) instead of 18.75%, and in 0 of the look-alike scenes instead of 1.25%, with standard,
    # hard and hard-v1 photos unchanged and harsh ones found 78.75 -> 81.25% (a refused back-like find
    # lets the card's own candidate win); 1.2 lost harsh cards (73.75%). The page detector marks card
    # backs without bands on purpose and keeps 0 in its weights.
    min_bands: float = 0.9
    # Every card of a photo (`PageDetector.locate_all`, #48): the whole photo letterboxed to `page_input`
    # px, so that each card of a 3x4 binder page is ~100 px tall, as in the page detector's training
    # (training/detector/cpu-pages.yaml); blobs closed by `page_close` px at most (more merges pockets).
    page_input: int = 640
    page_close: int = 3
    # A page's find whose band evidence (top band on its top side plus bottom band on its bottom, 0-2) is
    # below this lies face down: the page detector marks a card back without bands.
    page_face_bands: float = 0.5
    # Zoomed passes per card of a page (0: `refine_passes`): each pass is a view per card.
    page_refine_passes: int = 0
    # A card of a page gets the next zoomed pass only while the last one moved a corner more than this
    # share of the card's shorter side (0: every pass for every card): a card found where it was looked
    # for gains nothing from another view of the same place. On 20 validation pages (151 cards) the first
    # pass moved a card 0.04-0.08 of its side (10th-90th percentile), and only two cards needed the
    # second, moved 0.084 and 0.172 by the first: 0.06 skips three in four second passes and loses none
    # (docs/pages.md).
    page_refine_moved: float = 0.06

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DetectorConfig:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key in ("widths", "decoder"):
            if key in known:
                known[key] = tuple(known[key])
        return cls(**known)
