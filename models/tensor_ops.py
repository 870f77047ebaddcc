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


def _warp(image: torch.Tensor, to_source: np.ndarray, size: tuple[int, int], padding: str) -> torch.Tensor:
    """float (C, H, W) sampled bilinearly at `to_source` (3x3: output px -> image px, pixel centres) of
    every pixel of a size=(width, height) output: (C, height, width)."""
    w, h = size
    _, height, width = image.shape
    hom = torch.as_tensor(to_source, dtype=torch.float32, device=image.device)
    ys, xs = torch.meshgrid(
        torch.arange(h, device=image.device, dtype=torch.float32),
        torch.arange(w, device=image.device, dtype=torch.float32),
        indexing="ij",
    )
    points = torch.stack([xs, ys, torch.ones_like(xs)], dim=-1) @ hom.T
    source = points[..., :2] / points[..., 2:3]
    # grid_sample's -1..1 spans the outer pixel edges (align_corners=False): pixel centre x is at x + 0.5.
    grid = torch.stack([(source[..., 0] + 0.5) / width, (source[..., 1] + 0.5) / height], dim=-1) * 2 - 1
    out = F.grid_sample(image[None], grid[None], mode="bilinear", padding_mode=padding, align_corners=False)
    return out[0]


def rectify_tensor(image: torch.Tensor, quad: np.ndarray, size: tuple[int, int] = FACE_SIZE) -> np.ndarray:
    """`models.geometry.rectify` on a uint8 (3, H, W) tensor: the quad (TL, TR, BR, BL, in the tensor's
    pixels) warped to an upright size=(width, height) face, bilinear, edges replicated; HxWx3 uint8 out."""
    to_photo = cv2.getPerspectiveTransform(face_corners(size), np.asarray(quad, np.float32))  # face -> photo
    return _to_view(_warp(image.float(), to_photo, size, "border")).contiguous().cpu().numpy()


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
