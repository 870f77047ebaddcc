"""What the scanner's Detector and Embedder replicas do to one batch, with no Ray in sight.

The deployments in `serve_app.app` wrap these in `@serve.batch`; `benchmarks/scan_gpu.py` calls them
in-process on a GPU box that has the models but no Ray, so the code it measures is the code served.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import APIError
from models.geometry import half_turn, rectify, shrink
from serve_app.decoding import decode_photo, decode_photos_tensor, upright_size
from serve_app.fusion import Hits


@dataclass(frozen=True)
class Face:
    """A located card: its rectified 600x838 face (HxWx3 uint8) and, when one was asked for, the face
    shrunk for the embedder (`models.geometry.shrink`)."""

    pixels: np.ndarray
    thumbnail: np.ndarray | None = None
    # Found by the cascade's first look (the detector's whole-photo view alone, #47), with that view's
    # candidates: the scan keeps its answer only when it is certain, and otherwise sends the photo back
    # with the candidates for the full pipeline.
    first_look: bool = False
    candidates: list[np.ndarray] | None = None


# A photo's outcome in the Detector: its Face, None when no card was found, or the spec's (code, message)
# when the bytes are not a photo we can decode.
Found = Face | tuple[str, str] | None


def locate_photos(
    detector: Any,
    photos: list[bytes],
    on_device: bool,
    timings: list[dict[str, float]] | None = None,
    thumbnails: list[tuple[int, int]] | None = None,
    looks: list[bool] | None = None,
    coarse: list[list[np.ndarray] | None] | None = None,
) -> list[Found]:
    """Photos of any size and format in one batch, each decoded once, at working size, then located by
    `detector` (a `models.detector.CardDetector`), rectified and, given `thumbnails` (a (width, height)
    per photo), shrunk for the embedder too. `on_device`: decode (nvJPEG), cut the detector's views,
    rectify and shrink (`interpolate`, `grid_sample`, matrix products) on the detector's torch device
    instead of with Pillow and OpenCV on the host. `timings`, when given (one dict per photo), receives
    each photo's `decode` seconds (on a device, its share of the batch's one decode call), its share of
    the first look (`look`) and its batch's `locate` seconds (the full pipeline).

    The cascade (#47; host decoding only): a photo whose `looks` flag is set gets the first look, the
    detector's whole-photo view alone (`CardDetector.first_look_batch`); where that view fits a card,
    the face is cut from its quad and marked `first_look`. Every other photo goes through the full
    pipeline, starting from that view's candidates, or from `coarse` (a photo sent back after a first
    look whose answer was not certain), so no photo's whole-photo view is computed twice."""
    rectify_tensors: Any = None
    if on_device:  # torchvision's decoders only where they run
        from models.tensor_ops import rectify_tensors
    # Working images: HxWx3 arrays on the host, or uint8 (3, h, w) tensors on the detector's device,
    # which then cuts its views there too: the pixels never come back to the host.
    images: dict[int, Any] = {}
    out: list[Found] = [None for _ in photos]
    spent: list[dict[str, float]] = timings if timings is not None else [{} for _ in photos]
    if on_device:  # the batch's JPEGs in one call: nvJPEG's batched decode costs the host far less
        started = time.perf_counter()
        decoded = decode_photos_tensor(photos, detector.device)
        each_s = (time.perf_counter() - started) / max(1, len(photos))
        for i, image in enumerate(decoded):
            spent[i]["decode"] = each_s
            if isinstance(image, APIError):
                out[i] = (image.code, image.message)
            else:
                images[i] = image
    else:
        for i, data in enumerate(photos):
            started = time.perf_counter()
            try:
                images[i] = decode_photo(data)
            except APIError as error:
                out[i] = (error.code, error.message)
            spent[i]["decode"] = time.perf_counter() - started
    hints = {} if on_device else {i: c for i, c in enumerate(coarse or []) if c is not None and i in images}
    if looks and not on_device:
        asked = [i for i in images if looks[i] and i not in hints]
        started = time.perf_counter()
        for i, look in zip(asked, detector.first_look_batch([images[i] for i in asked]), strict=True):
            if look.quad is None:
                hints[i] = look.candidates
                continue
            face = rectify(images.pop(i), look.quad)
            size = thumbnails[i] if thumbnails else None
            out[i] = Face(face, shrink(face, size) if size else None, True, look.candidates)
        each_s = (time.perf_counter() - started) / max(1, len(asked))
        for i in asked:
            spent[i]["look"] = each_s
    started = time.perf_counter()
    quads: dict[int, np.ndarray | None] = {}
    plain = [i for i in images if i not in hints]
    for group, candidates in ((plain, None), (list(hints), list(hints.values()))):
        if group:
            found_now = detector.locate_batch([images[i] for i in group], coarse=candidates)
            quads.update(zip(group, found_now, strict=True))
    found = [(i, images[i], q) for i, q in quads.items() if q is not None]
    sizes = [thumbnails[i] if thumbnails else None for i, _, _ in found]
    if on_device:  # the batch's faces (and thumbnails) come back to the host in one copy (a size)
        faces = rectify_tensors([image for _, image, _ in found], [q for _, _, q in found], thumbnails=sizes)
        for (i, _, _), (face, thumbnail) in zip(found, faces, strict=True):
            out[i] = Face(face, thumbnail)
    else:
        for (i, image, quad), size in zip(found, sizes, strict=True):
            face = rectify(image, quad)
            out[i] = Face(face, shrink(face, size) if size else None)
    located_s = time.perf_counter() - started
    for i in images:
        spent[i]["locate"] = located_s
    return out


# A page of many cards (#48) is worked on at up to full resolution: a card of a 12-pocket page is a twelfth
# of the photo, and at the single scan's working size (~1,000 px) its print would be a few pixels tall. A
# 12 MP photo is decoded whole (36 MB), a 40 MP one at half scale, both no larger than PAGE_MAX_SIDE.
PAGE_MIN_SIDE, PAGE_MAX_SIDE = 3000, 4096


@dataclass(frozen=True)
class PageFaces:
    """Every card found in a page photo (`locate_page`), largest first: its quad in the photo's upright
    full-resolution px (`size`, width and height), its rectified face and the face shrunk for the
    embedder (None for a card lying face down)."""

    size: tuple[int, int]
    quads: list[np.ndarray]
    faces: list[np.ndarray | None]  # None: the card lies face down, nothing to rectify
    thumbnails: list[np.ndarray | None]
    truncated: bool = False  # more than `limit` cards were found


def locate_page(
    detector: Any, photo: bytes, thumbnail: tuple[int, int], limit: int, timings: dict[str, float]
) -> PageFaces | tuple[str, str]:
    """Every card in one photo (`detector`: the page detector, `PageDetector.locate_all`), up to `limit`,
    or the spec's (code, message) when the bytes are not a photo we can decode. `timings` receives the
    `decode` and `locate` seconds."""
    started = time.perf_counter()
    try:
        image = decode_photo(photo, min_side=PAGE_MIN_SIDE, max_side=PAGE_MAX_SIDE)
        width, height = upright_size(photo)
    except APIError as error:
        return error.code, error.message
    timings["decode"] = time.perf_counter() - started
    started = time.perf_counter()
    found = detector.locate_all(image)
    kept = found[:limit]
    faces = [rectify(image, f.quad) if f.face_up else None for f in kept]
    timings["locate"] = time.perf_counter() - started
    # Pixel centres: working px x is full-resolution px (x + 0.5) * scale - 0.5.
    scale = np.array([width / image.shape[1], height / image.shape[0]], np.float32)
    in_photo = [(f.quad + 0.5) * scale - 0.5 for f in kept]
    thumbnails = [None if face is None else shrink(face, thumbnail) for face in faces]
    return PageFaces((width, height), in_photo, faces, thumbnails, len(found) > limit)


def search_faces(embedder: Any, index: Any, faces: list[np.ndarray], top_k: int) -> list[tuple[Hits, Hits]]:
    """Each face's index hits upright and turned 180° (the detector leaves the top open), both ways
    embedded in one batch by `embedder` (a `models.embedder.CardEmbedder`) and searched in `index` (a
    `models.index.CardIndex`)."""
    both = [view for face in faces for view in (face, half_turn(face))]
    hits = index.search(embedder.embed_batch(both), top_k)
    return list(zip(hits[0::2], hits[1::2], strict=True))
