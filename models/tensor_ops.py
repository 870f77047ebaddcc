"""The scanner's pixel work in torch, for replicas that hold a GPU: decode, shrink, the detector's views,
rectify.

On a CPU replica Pillow's DCT-scaled JPEG decode and OpenCV's resizes and warps are the cheapest way
(`serve_app.decoding`, `models.quads`, `models.geometry`). On a GPU node those become the CPU-side limit
long before the networks are: on an H200 (docs/benchmarks.md, `scan_gpu.py`) a scan still cost ~27 ms of
a core with the decode and rectification already on the device, ~22 of them the detector's host side
(copying the working image back, cutting its views, fitting quads). So a GPU replica decodes JPEGs with
nvJPEG (`torchvision.io.decode_jpeg(device="cuda")`), shrinks with an antialiased resize, cuts the
detector's letterboxed and zoomed views with `interpolate` and `grid_sample` from a pyramid kept on the
device, and rectifies with `grid_sample`; only the views' probability maps (for the quad fit) and the
600x838 face come back to the host. The views follow `models.quads`' plans (the same crops, matrices and
pyramid levels), with torch's filters: close to OpenCV's pixels, not equal. Every function here runs
unchanged on the CPU, which is how CI checks them against the NumPy path.
"""

from __future__ import annotations

import functools

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from torchvision.io import ImageReadMode, decode_jpeg

from models.geometry import FACE_SIZE, face_corners
from models.quads import PAD_VALUE, letterbox_plan, zoom_plan, zoom_shrink


def decode_jpeg_on(data: bytes, device: torch.device | str) -> torch.Tensor:
    """A JPEG's pixels as uint8 (3, H, W) on `device`, EXIF orientation applied. The caller has checked
    the header (format, pixel budget); a corrupt body raises RuntimeError or ValueError."""
    return decode_jpegs_on([data], device)[0]


def decode_jpegs_on(photos: list[bytes], device: torch.device | str) -> list[torch.Tensor]:
    """`decode_jpeg_on` for several JPEGs in one call (on CUDA, nvJPEG's batched decode). One corrupt body
    fails the call."""
    encoded = [torch.frombuffer(bytearray(data), dtype=torch.uint8) for data in photos]
    images = decode_jpeg(encoded, mode=ImageReadMode.RGB, device=device, apply_exif_orientation=True)
    assert isinstance(images, list)
    return images


def shrink_tensor(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """uint8 (3, H, W) shrunk to size=(height, width) with an antialiased (area-like) filter, so the detector
    sees the same kind of pixels as from a DCT-scaled decode."""
    if tuple(image.shape[1:]) == tuple(size):
        return image
    return _shrink_float(image.float(), size).round_().clamp_(0, 255).to(torch.uint8)


class TensorPyramid:
    """`models.quads.Pyramid` for a uint8 (3, H, W) photo on a torch device: float levels, each a 2x2 mean
    of the one above (what OpenCV's INTER_AREA does at exactly half), made once, when first asked for."""

    def __init__(self, image: torch.Tensor) -> None:
        self.levels = [image.float()]

    @property
    def image(self) -> torch.Tensor:
        return self.levels[0]

    def level(self, scale: float) -> tuple[torch.Tensor, float]:
        """The smallest level at least `scale` times the photo's size, and its scale (a power of 1/2)."""
        i = 0
        while 2.0 ** -(i + 1) >= scale and min(self.levels[i].shape[1:]) >= 2:
            if i + 1 == len(self.levels):  # an odd last row or column is left out, as on the host
                self.levels.append(F.avg_pool2d(self.levels[i][None], 2)[0])
            i += 1
        return self.levels[i], 2.0**-i


def _shrink_float(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """float (3, H, W) -> (3, height, width), antialiased bilinear (area-like when shrinking)."""
    return F.interpolate(image[None], size=size, mode="bilinear", antialias=True, align_corners=False)[0]


def _to_view(pixels: torch.Tensor) -> torch.Tensor:
    """float (3, H, W) -> uint8 (H, W, 3): the layout the detector's graph takes, and a face's."""
    return pixels.round().clamp_(0, 255).to(torch.uint8).permute(1, 2, 0)


def letterbox_tensor(photo: TensorPyramid, size: int) -> tuple[torch.Tensor, np.ndarray]:
    """`models.quads.letterbox` on the device: the whole photo shrunk into a size x size view (uint8
    (size, size, 3)) and the photo->view matrix, the same matrix as the host's."""
    image = photo.image
    (nw, nh), (ox, oy), m = letterbox_plan(int(image.shape[1]), int(image.shape[2]), size)
    view = torch.full((3, size, size), float(PAD_VALUE), device=image.device)
    view[:, oy : oy + nh, ox : ox + nw] = _shrink_float(image, (nh, nw))
    return _to_view(view), m


def zoom_view_tensor(
    photo: TensorPyramid, quad: np.ndarray, size: int, fill: float
) -> tuple[torch.Tensor, np.ndarray]:
    """`models.quads.zoom_view` on the device: the same pyramid level, crop, pre-shrink and warp
    (`models.quads.zoom_plan`), bilinear, PAD_VALUE outside the photo; uint8 (size, size, 3) and the
    photo->view matrix."""
    shrink = zoom_shrink(quad, size, fill)
    image, scale = photo.level(shrink)
    plan = zoom_plan(int(image.shape[1]), int(image.shape[2]), scale, quad, size, fill, shrink)
    x0, y0, x1, y1 = plan.box
    crop = image[:, y0:y1, x0:x1]
    if plan.resize is not None:
        crop = _shrink_float(crop, (plan.resize[1], plan.resize[0]))
    # Sampling (crop - PAD_VALUE) with zeros outside and adding PAD_VALUE back is OpenCV's constant border.
    view = _warp(crop - PAD_VALUE, np.linalg.inv(plan.warp), (size, size), "zeros") + PAD_VALUE
    return _to_view(view), plan.to_view


@functools.cache
def _pixel_grid(width: int, height: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Every output pixel's x and y, (height, width) each, made once per size and device."""
    ys, xs = torch.meshgrid(
        torch.arange(height, device=device, dtype=torch.float32),
        torch.arange(width, device=device, dtype=torch.float32),
        indexing="ij",
    )
    return xs, ys


def _warp(image: torch.Tensor, to_source: np.ndarray, size: tuple[int, int], padding: str) -> torch.Tensor:
    """float (C, H, W) sampled bilinearly at `to_source` (3x3: output px -> image px, pixel centres) of
    every pixel of a size=(width, height) output: (C, height, width).

    The matrix enters the kernels as nine scalars, never as a tensor: copying it to a GPU from ordinary
    (pageable) memory would wait for everything queued on the stream first, a stall per view that kept
    the host from running ahead of the device."""
    w, h = size
    _, height, width = image.shape
    # grid_sample's -1..1 spans the outer pixel edges (align_corners=False), so image px x sits at
    # (x + 0.5) * 2 / width - 1: folded into the matrix, which then maps output px straight to the grid.
    to_grid = np.array(
        [[2 / width, 0, 1 / width - 1], [0, 2 / height, 1 / height - 1], [0, 0, 1]], np.float64
    ) @ np.asarray(to_source, np.float64)
    xs, ys = _pixel_grid(w, h, image.device)
    (a, b, c), (d, e, f), (g, k, m) = to_grid.tolist()
    x = (xs * a).add_(ys, alpha=b).add_(c)
    y = (xs * d).add_(ys, alpha=e).add_(f)
    z = (xs * g).add_(ys, alpha=k).add_(m)
    grid = torch.stack([x.div_(z), y.div_(z)], dim=-1)
    out = F.grid_sample(image[None], grid[None], mode="bilinear", padding_mode=padding, align_corners=False)
    return out[0]


def rectify_tensor(image: torch.Tensor, quad: np.ndarray, size: tuple[int, int] = FACE_SIZE) -> np.ndarray:
    """`models.geometry.rectify` on a uint8 (3, H, W) tensor: the quad (TL, TR, BR, BL, in the tensor's
    pixels) warped to an upright size=(width, height) face, bilinear, edges replicated; HxWx3 uint8 out."""
    return rectify_tensors([image], [quad], size)[0][0]


def rectify_tensors(
    images: list[torch.Tensor],
    quads: list[np.ndarray],
    size: tuple[int, int] = FACE_SIZE,
    thumbnails: list[tuple[int, int] | None] | None = None,
) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """`rectify_tensor` for several photos on one device, each face with its thumbnail (`thumbnails`: a
    (width, height) per photo, or None for none), shrunk on the device as `models.geometry.shrink` does
    on the host. The faces come back to the host in one copy, and the thumbnails in one per size: each
    copy back waits for the device, so a wait or two a batch instead of two a face. On a GPU node the
    thumbnail's area average was ~10% of a scan's host CPU when OpenCV did it (600x838 -> 96x134)."""
    if not images:
        return []
    wanted = thumbnails or [None] * len(images)
    faces: list[torch.Tensor] = []
    small: dict[tuple[int, int], list[tuple[int, torch.Tensor]]] = {}
    for n, (image, quad, thumbnail) in enumerate(zip(images, quads, wanted, strict=True)):
        face_to_photo = cv2.getPerspectiveTransform(face_corners(size), np.asarray(quad, np.float32))
        face = _warp(image.float(), face_to_photo, size, "border").round_().clamp_(0, 255)
        faces.append(face.to(torch.uint8).permute(1, 2, 0))
        if thumbnail is not None:
            width, height = thumbnail
            small.setdefault((width, height), []).append((n, area_shrink(face, thumbnail)))
    out: list[tuple[np.ndarray, np.ndarray | None]] = [(f, None) for f in torch.stack(faces).cpu().numpy()]
    for shrunk in small.values():
        for (n, _), pixels in zip(shrunk, torch.stack([t for _, t in shrunk]).cpu().numpy(), strict=True):
            out[n] = (out[n][0], pixels)
    return out


def area_shrink(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """float (3, H, W) with integer values -> uint8 (height, width, 3) at size=(width, height): OpenCV's
    INTER_AREA when shrinking (each output pixel the mean of the input area it covers, partial pixels
    weighed by their share), as two matrix products. Within a grey level of `cv2.resize`'s rounding."""
    width, height = size
    _, h, w = image.shape
    if (w, h) == (width, height):
        return _to_view(image)
    rows, cols = _area_weights(h, height, image.device), _area_weights(w, width, image.device)
    return _to_view(rows @ image @ cols.T)  # (3, height, width) before the view's layout


@functools.cache
def _area_weights(source: int, target: int, device: torch.device) -> torch.Tensor:
    """(target, source): the share of each of `source` pixels in each of `target` equal cells (each row
    sums to 1), INTER_AREA's weights along one axis. Shrinking only: INTER_AREA grows bilinearly."""
    if target > source:
        raise ValueError(f"area_shrink only shrinks ({source} -> {target} px)")
    scale = source / target
    starts = np.arange(target, dtype=np.float64)[:, None] * scale
    pixels = np.arange(source, dtype=np.float64)[None, :]
    overlap = np.clip(np.minimum(starts + scale, pixels + 1) - np.maximum(starts, pixels), 0, None)
    return torch.as_tensor(overlap / overlap.sum(1, keepdims=True), dtype=torch.float32, device=device)


class ExactSearch:
    """Cosine search as one matrix product on a torch device: the index's unit vectors (N x d) times the
    queries, then top-k. For 21k x 128 that is ~5 MFLOP a face, nothing for a GPU, and simpler than
    faiss-gpu (whose wheels are built for another CUDA than torch's)."""

    def __init__(self, vectors: np.ndarray, ids: np.ndarray, device: torch.device | str) -> None:
        self.vectors = torch.as_tensor(np.ascontiguousarray(vectors, np.float32), device=device)
        self.ids = np.asarray(ids, np.int64)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """faiss's answer shape: (similarities, ids), each (queries, k), best first."""
        q = torch.as_tensor(np.ascontiguousarray(queries, np.float32), device=self.vectors.device)
        sims, rows = torch.topk(q @ self.vectors.T, min(k, len(self.ids)), dim=1)
        return sims.cpu().numpy(), self.ids[rows.cpu().numpy()]
