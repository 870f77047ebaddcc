"""The scanner's pixel work in torch, for replicas that hold a GPU: decode, shrink, rectify.

On a CPU replica Pillow's DCT-scaled JPEG decode and OpenCV's warp are the cheapest way
(`serve_app.decoding`, `models.geometry`). On a GPU node those become the CPU-side limit long before the
networks are (a 12 MP decode is ~57 ms of a core, the detector's views ~6 ms), so a GPU replica decodes
JPEGs with nvJPEG (`torchvision.io.decode_jpeg(device="cuda")`), shrinks with an antialiased resize and
rectifies with `grid_sample`, all on the device, and hands only the small working image and the 600x838
face back to the host. Every function here runs unchanged on the CPU, which is how CI checks them
against the NumPy path.
"""

from __future__ import annotations

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from torchvision.io import ImageReadMode, decode_jpeg

from models.geometry import FACE_SIZE, face_corners


def decode_jpeg_on(data: bytes, device: torch.device | str) -> torch.Tensor:
    """A JPEG's pixels as uint8 (3, H, W) on `device`, EXIF orientation applied. The caller has checked
    the header (format, pixel budget); a corrupt body raises RuntimeError or ValueError."""
    encoded = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    image = decode_jpeg(encoded, mode=ImageReadMode.RGB, device=device, apply_exif_orientation=True)
    assert isinstance(image, torch.Tensor)
    return image


def shrink_tensor(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """uint8 (3, H, W) shrunk to size=(height, width) with an antialiased (area-like) filter, so the detector
    sees the same kind of pixels as from a DCT-scaled decode."""
    if tuple(image.shape[1:]) == tuple(size):
        return image
    small = F.interpolate(
        image[None].float(), size=size, mode="bilinear", antialias=True, align_corners=False
    )
    return small[0].round_().clamp_(0, 255).to(torch.uint8)


def rectify_tensor(image: torch.Tensor, quad: np.ndarray, size: tuple[int, int] = FACE_SIZE) -> np.ndarray:
    """`models.geometry.rectify` on a uint8 (3, H, W) tensor: the quad (TL, TR, BR, BL, in the tensor's
    pixels) warped to an upright size=(width, height) face, bilinear, edges replicated; HxWx3 uint8 out."""
    w, h = size
    _, height, width = image.shape
    to_photo = cv2.getPerspectiveTransform(face_corners(size), np.asarray(quad, np.float32))  # face -> photo
    hom = torch.as_tensor(to_photo, dtype=torch.float32, device=image.device)
    ys, xs = torch.meshgrid(
        torch.arange(h, device=image.device, dtype=torch.float32),
        torch.arange(w, device=image.device, dtype=torch.float32),
        indexing="ij",
    )
    points = torch.stack([xs, ys, torch.ones_like(xs)], dim=-1) @ hom.T
    photo = points[..., :2] / points[..., 2:3]
    # grid_sample's -1..1 spans the outer pixel edges (align_corners=False): pixel centre x is at x + 0.5.
    grid = torch.stack([(photo[..., 0] + 0.5) / width, (photo[..., 1] + 0.5) / height], dim=-1) * 2 - 1
    face = F.grid_sample(
        image[None].float(), grid[None], mode="bilinear", padding_mode="border", align_corners=False
    )
    return face[0].round_().clamp_(0, 255).to(torch.uint8).permute(1, 2, 0).contiguous().cpu().numpy()


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
