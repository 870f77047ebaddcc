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
from models.first_look import first_look
from models.geometry import half_turn, rectify, shrink
from serve_app.decoding import decode_photo, decode_photos_tensor
from serve_app.fusion import Hits


@dataclass(frozen=True)
class Face:
    """A located card: its rectified 600x838 face (HxWx3 uint8) and, when one was asked for, the face
    shrunk for the embedder (`models.geometry.shrink`)."""

    pixels: np.ndarray
    thumbnail: np.ndarray | None = None
    # Found by the cheap first look (`models.first_look`), not the detector network: the scan keeps its
    # answer only when it is certain, and locates the photo again with the network otherwise.
    first_look: bool = False


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
) -> list[Found]:
    """Photos of any size and format in one batch, each decoded once, at working size, then located by
    `detector` (a `models.detector.CardDetector`), rectified and, given `thumbnails` (a (width, height)
    per photo), shrunk for the embedder too. `on_device`: decode (nvJPEG), cut the detector's views,
    rectify and shrink (`interpolate`, `grid_sample`, matrix products) on the detector's torch device
    instead of with Pillow and OpenCV on the host. `timings`, when given (one dict per photo), receives
    each photo's `decode` seconds (on a device, its share of the batch's one decode call) and its
    batch's `locate` seconds. `looks`, when given (one flag per photo; host decoding only): those photos
    first get the cheap first look (`models.first_look`), and only those it finds no card outline in go
    through the detector network; their `locate` is then their own look, rectification included."""
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
    if looks and not on_device:
        import os

        way = os.environ.get("CARDCAT_FIRST_LOOK_WAY", "outline")
        for i, image in list(images.items()):
            if not looks[i]:
                continue
            started = time.perf_counter()
            quad = first_look(image) if way in ("outline", "both") else None
            if quad is None and way in ("coarse", "both"):
                quad = detector.first_look_batch([image])[0]
            if quad is not None:
                face = rectify(image, quad)
                size = thumbnails[i] if thumbnails else None
                out[i] = Face(face, shrink(face, size) if size else None, first_look=True)
                del images[i]
            spent[i]["locate"] = time.perf_counter() - started
    started = time.perf_counter()
    quads = detector.locate_batch(list(images.values())) if images else []
    found = [(i, image, q) for (i, image), q in zip(images.items(), quads, strict=True) if q is not None]
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
        spent[i]["locate"] = spent[i].get("locate", 0.0) + located_s
    return out


def search_faces(embedder: Any, index: Any, faces: list[np.ndarray], top_k: int) -> list[tuple[Hits, Hits]]:
    """Each face's index hits upright and turned 180° (the detector leaves the top open), both ways
    embedded in one batch by `embedder` (a `models.embedder.CardEmbedder`) and searched in `index` (a
    `models.index.CardIndex`)."""
    both = [view for face in faces for view in (face, half_turn(face))]
    hits = index.search(embedder.embed_batch(both), top_k)
    return list(zip(hits[0::2], hits[1::2], strict=True))
