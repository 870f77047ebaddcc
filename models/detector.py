"""Card detector: find the card in a phone photo and return its four corners, then rectify it.

Why learned: classical edge/contour finding breaks on busy backgrounds, sleeves and glare. A small U-Net
predicts, per pixel, the card (channel 0) and bands along its top and bottom edges (channels 1, 2: name and
number ends, which say which sides are the short ones). First the whole photo letterboxed to `input_size`;
then `refine_passes` zoomed, roughly rectified views around the latest quad, where the card fills 78% of
the view and its edges are located with sub-pixel profiles of the mask. Corners are the intersections of
lines fitted to each side. The zoomed pass also vets the find (mask fit, score, aspect): None otherwise.
Training lives in `training/detector/`; the shipped weights are `models/weights/detector.pt`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from models.checkpoints import load_weights, read_weights, weights_version
from models.geometry import CARD_ASPECT
from models.inference import InferenceModel
from models.layers import conv_bn_relu
from models.sessions import Backend, Session, fold_batchnorm, open_graph

WEIGHTS = Path(__file__).resolve().parent / "weights" / "detector.pt"
PAD_VALUE = 114
BAND_DEPTH = 0.1  # top/bottom bands: this fraction of the card height
# Tensor names of the served graph; Triton's libtorch backend wants the <name>__<index> form.
INPUT, OUTPUT = "views__0", "probs__0"


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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DetectorConfig:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key in ("widths", "decoder"):
            if key in known:
                known[key] = tuple(known[key])
        return cls(**known)


# -------------------------------------------------------------------------------------------- network
class DetectorNet(nn.Module):
    """A small U-Net: five stride-2 stages down, four up; 3 logit maps at input resolution."""

    def __init__(
        self, widths: tuple[int, ...] = (16, 32, 64, 96, 128), decoder: tuple[int, ...] = (64, 48, 24, 16)
    ):
        super().__init__()
        self.down = nn.ModuleList()
        cin = 3
        for w in widths:
            self.down.append(nn.Sequential(conv_bn_relu(cin, w, 2), conv_bn_relu(w, w)))
            cin = w
        self.up = nn.ModuleList()
        for skip, w in zip(reversed(widths[:-1]), decoder, strict=True):
            self.up.append(conv_bn_relu(cin + skip, w))
            cin = w
        self.head = nn.Conv2d(cin, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for stage in self.down:
            x = stage(x)
            skips.append(x)
        for stage, skip in zip(self.up, reversed(skips[:-1]), strict=True):
            x = F.interpolate(x, size=skip.shape[-2:], mode="bilinear", align_corners=False)
            x = stage(torch.cat([x, skip], 1))
        return F.interpolate(self.head(x), scale_factor=2, mode="bilinear", align_corners=False)


def build_net(cfg: DetectorConfig) -> DetectorNet:
    return DetectorNet(cfg.widths, cfg.decoder)


def to_tensor(views: list[np.ndarray], device: str | torch.device = "cpu") -> torch.Tensor:
    """uint8 HxWx3 RGB views -> normalised NCHW float (channels_last: faster convolutions on CPU)."""
    return _normalise(torch.from_numpy(np.stack(views)).to(device))


def _normalise(views: torch.Tensor) -> torch.Tensor:
    x = views.permute(0, 3, 1, 2).float()
    return ((x - 127.5) / 64.0).contiguous(memory_format=torch.channels_last)


class DetectorGraph(nn.Module):
    """What a Session runs: uint8 NHWC views -> card and band probabilities (N, 3, H, W). Normalising
    inside the graph lets a Triton client send bytes, a quarter of the floats, with the same arithmetic."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, views: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.net(_normalise(views)))


# -------------------------------------------------------------------------------------------- views
def _pixel_scale(sx: float, sy: float) -> np.ndarray:
    """Resize matrix in the pixel-centre convention: x' = (x + 0.5) * s - 0.5."""
    return np.array([[sx, 0, 0.5 * sx - 0.5], [0, sy, 0.5 * sy - 0.5], [0, 0, 1]], np.float64)


def letterbox(image: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The whole photo shrunk into a size x size view; returns it and the 3x3 photo->view matrix."""
    h, w = image.shape[:2]
    s = size / max(h, w)
    nw, nh = max(1, round(w * s)), max(1, round(h * s))
    small = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_AREA)
    view = np.full((size, size, 3), PAD_VALUE, np.uint8)
    ox, oy = (size - nw) // 2, (size - nh) // 2
    view[oy : oy + nh, ox : ox + nw] = small
    m = _pixel_scale(nw / w, nh / h)
    m[0, 2] += ox
    m[1, 2] += oy
    return view, m


def zoom_target(size: int, fill: float) -> np.ndarray:
    """Where the zoomed pass puts the card: a centred upright rectangle (edge convention corners)."""
    h = fill * size
    w = h / CARD_ASPECT
    x0, y0 = (size - w) / 2 - 0.5, (size - h) / 2 - 0.5
    return np.array([[x0, y0], [x0 + w, y0], [x0 + w, y0 + h], [x0, y0 + h]], np.float32)


def zoom_view(image: np.ndarray, quad: np.ndarray, size: int, fill: float) -> tuple[np.ndarray, np.ndarray]:
    """A size x size view in which `quad` becomes the upright card rectangle; returns it and photo->view.

    Only the photo region the view covers is cropped and, when the view shrinks it a lot, pre-shrunk with
    INTER_AREA so the warp does not alias.
    """
    h, w = image.shape[:2]
    hom = cv2.getPerspectiveTransform(quad.astype(np.float32), zoom_target(size, fill)).astype(np.float64)
    edges = np.array(
        [[-0.5, -0.5], [size - 0.5, -0.5], [size - 0.5, size - 0.5], [-0.5, size - 0.5]], np.float32
    )
    try:
        foot = cv2.perspectiveTransform(edges.reshape(-1, 1, 2), np.linalg.inv(hom)).reshape(-1, 2)
    except np.linalg.LinAlgError:
        foot = np.array([[0, 0], [w, h]], np.float32)
    if not np.isfinite(foot).all():
        foot = np.array([[0, 0], [w, h]], np.float32)
    x0, y0 = np.clip(np.floor(foot.min(0)) - 2, 0, [w - 1, h - 1]).astype(int)
    x1, y1 = np.clip(np.ceil(foot.max(0)) + 3, [x0 + 1, y0 + 1], [w, h]).astype(int)
    crop = image[y0:y1, x0:x1]
    shift = np.array([[1, 0, -x0], [0, 1, -y0], [0, 0, 1]], np.float64)
    card_h = float(0.5 * (np.linalg.norm(quad[3] - quad[0]) + np.linalg.norm(quad[2] - quad[1])))
    shrink = min(1.0, 1.5 * fill * size / max(card_h, 1.0))
    if shrink < 0.75:
        nw, nh = max(1, round(crop.shape[1] * shrink)), max(1, round(crop.shape[0] * shrink))
        crop = cv2.resize(crop, (nw, nh), interpolation=cv2.INTER_AREA)
        shift = _pixel_scale(nw / (x1 - x0), nh / (y1 - y0)) @ shift
    m = hom @ np.linalg.inv(shift)
    view = cv2.warpPerspective(
        crop,
        m,
        (size, size),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=(PAD_VALUE,) * 3,
    )
    return view, m @ shift


def apply(m: np.ndarray, pts: np.ndarray) -> np.ndarray:
    return (
        cv2.perspectiveTransform(pts.reshape(-1, 1, 2).astype(np.float64), m)
        .reshape(-1, 2)
        .astype(np.float32)
    )


# ------------------------------------------------------------------------------------- quad fitting
def _shoelace(q: np.ndarray) -> float:
    x, y = q[:, 0], q[:, 1]
    return float(0.5 * (np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y)))


def _intersect(l1: np.ndarray, l2: np.ndarray) -> np.ndarray | None:
    """Lines as (vx, vy, x0, y0)."""
    d1, p1, d2, p2 = l1[:2], l1[2:], l2[:2], l2[2:]
    den = d1[0] * d2[1] - d1[1] * d2[0]
    if abs(den) < 1e-6:
        return None
    t = ((p2[0] - p1[0]) * d2[1] - (p2[1] - p1[1]) * d2[0]) / den
    return p1 + t * d1


def _refine_sides(prob: np.ndarray, quad: np.ndarray, samples: int = 32) -> np.ndarray | None:
    """Move each side onto the mask's 0.5 crossing, measured sub-pixel along normals, then intersect."""
    lines = []
    centre = quad.mean(0)
    for i in range(4):
        a, b = quad[i], quad[(i + 1) % 4]
        length = float(np.linalg.norm(b - a))
        if length < 4:
            return None
        d = (b - a) / length
        n = np.array([d[1], -d[0]])
        if np.dot(n, (a + b) / 2 - centre) < 0:
            n = -n
        reach = max(3.0, 0.06 * length)
        t = np.linspace(0.12, 0.88, samples)[:, None]
        offs = np.arange(-reach, reach + 1e-6, 0.25, dtype=np.float32)
        pts = (a + (b - a) * t)[:, None, :] + offs[None, :, None] * n  # (samples, K, 2)
        prof = cv2.remap(
            prob,
            pts[..., 0].astype(np.float32),
            pts[..., 1].astype(np.float32),
            cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=0.0,
        )
        inside = prof >= 0.5
        good = []
        for k in range(samples):
            row, ins = prof[k], inside[k]
            if not ins[0]:
                continue
            j = int(np.argmin(ins))  # first outside sample
            if j == 0 or ins[j]:
                continue
            frac = (row[j - 1] - 0.5) / max(row[j - 1] - row[j], 1e-6)
            good.append(pts[k, j - 1] + frac * 0.25 * n)
        if len(good) < samples // 3:
            line = np.array([d[0], d[1], a[0], a[1]], np.float64)
        else:
            line = (
                cv2.fitLine(np.array(good, np.float32), cv2.DIST_HUBER, 0, 0.01, 0.01)
                .ravel()
                .astype(np.float64)
            )
        lines.append(line)
    corners = []
    for i in range(4):
        p = _intersect(lines[i - 1], lines[i])
        if p is None:
            return None
        corners.append(p)
    out = np.array(corners, np.float32)
    if np.abs(out - quad).max() > 0.25 * math.sqrt(abs(_shoelace(quad))):
        return None
    return out


def fit_quads(
    prob: np.ndarray,
    min_area: float,
    min_fit: float,
    threshold: float = 0.5,
    close: int = 0,
    limit: int = 1,
    fallback: bool = False,
) -> list[np.ndarray]:
    """Sub-pixel corners (positive shoelace, view px) of up to `limit` card-like blobs, largest first.

    `close` (px) bridges the gaps an unsure mask leaves inside a blob (glare, dark art), one blob at a
    time so that a card and a sheet of paper beside it never merge; the blob's outline, not its pixel
    count, is compared with the quad, so holes inside the card do not count against it. With `fallback`, a
    blob no quad fits (a ragged or merged mask) gives its minimum-area rectangle, for the zoomed pass to
    judge and correct.
    """
    binary = (prob > threshold).astype(np.uint8)
    _, labels, stats, _ = cv2.connectedComponentsWithStats(binary, connectivity=4)
    out = []
    for label in 1 + np.argsort(-stats[1:, cv2.CC_STAT_AREA])[:limit]:
        if stats[label, cv2.CC_STAT_AREA] < min_area * prob.size:
            break
        blob = (labels == label).astype(np.uint8)
        if close > 1:
            kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (close, close))
            blob = cv2.morphologyEx(blob, cv2.MORPH_CLOSE, kernel)
        quad = _blob_quad(prob, blob, min_fit)
        if quad is None and fallback:
            box = cv2.boxPoints(cv2.minAreaRect(cv2.findNonZero(blob))).astype(np.float32)
            quad = box if _shoelace(box) > 0 else box[::-1].copy()
        if quad is not None:
            out.append(quad)
    return out


def _corner_shift(before: np.ndarray, after: np.ndarray) -> float:
    """How far the corners moved between two passes, as a fraction of the card's long side."""
    height = max(float(np.linalg.norm(after[0] - after[3])), float(np.linalg.norm(after[0] - after[1])), 1.0)
    return float(np.linalg.norm(after - before, axis=1).max()) / height


def _same_quad(a: np.ndarray, b: np.ndarray, tolerance: float) -> bool:
    """Whether every corner of `a` lies within `tolerance` x the quad's size of a corner of `b`."""
    if tolerance <= 0:
        return False
    size = math.sqrt(max(abs(_shoelace(b)), 1e-6))
    gaps = np.linalg.norm(a[:, None, :] - b[None, :, :], axis=2).min(axis=1)
    return bool(gaps.max() <= tolerance * size)


def _blob_quad(prob: np.ndarray, blob: np.ndarray, min_fit: float) -> np.ndarray | None:
    contours, _ = cv2.findContours(blob, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    outline = max(contours, key=cv2.contourArea)
    area = float(cv2.contourArea(outline))
    hull = cv2.convexHull(outline)
    perimeter = cv2.arcLength(hull, True)
    approx = None
    for eps in (0.02, 0.03, 0.045, 0.06, 0.08, 0.1):
        cand = cv2.approxPolyDP(hull, eps * perimeter, True)
        if len(cand) == 4:
            approx = cand.reshape(4, 2).astype(np.float32)
            break
        if len(cand) < 4:
            break
    if approx is None:
        return None
    if _shoelace(approx) < 0:
        approx = approx[::-1].copy()
    quad_area = abs(_shoelace(approx))
    if min(area, quad_area) / max(area, quad_area, 1e-6) < min_fit:
        return None
    refined = _refine_sides(prob, approx)
    if refined is None or _shoelace(refined) <= 0 or not cv2.isContourConvex(refined.reshape(-1, 1, 2)):
        return approx
    return refined


def _band_scores(maps: np.ndarray, quad: np.ndarray) -> np.ndarray:
    """Mean top/bottom band probability next to each side k (corners k -> k+1): shape (2, 4)."""
    h, w = maps.shape[1:]
    scores = np.zeros((2, 4), np.float32)
    for k in range(4):
        a, b, c, d = quad[k], quad[(k + 1) % 4], quad[(k + 2) % 4], quad[(k + 3) % 4]
        band = np.array([a, b, b + BAND_DEPTH * (c - b), a + BAND_DEPTH * (d - a)], np.float32)
        mask = np.zeros((h, w), np.uint8)
        cv2.fillPoly(mask, [np.round(band * 4).astype(np.int32)], 1, cv2.LINE_8, shift=2)
        if mask.any():
            scores[:, k] = maps[:, mask > 0].mean(1)
    return scores


def orient(
    quad: np.ndarray, bands: np.ndarray, photo_quad: np.ndarray | None = None, geo: float = 0.0
) -> np.ndarray:
    """Roll the corners so side 0 is the top (name) and side 2 the bottom (number): TL, TR, BR, BL.

    Which pair of sides is short comes from the band maps plus `geo` times the log ratio of side lengths
    in the photo (a tilted card is still longer than wide unless the tilt is steep); which end is up
    comes from the bands alone (the caller tries both anyway).
    """
    s = _band_scores(bands, quad)
    votes = [s[0, r] + s[1, (r + 2) % 4] + 0.5 * (s[0, (r + 2) % 4] + s[1, r]) for r in range(4)]
    evidence = (votes[0] + votes[2]) - (votes[1] + votes[3])
    if geo and photo_quad is not None:
        sides = np.linalg.norm(photo_quad - np.roll(photo_quad, -1, axis=0), axis=1)
        evidence += geo * math.log(max(sides[1] + sides[3], 1e-6) / max(sides[0] + sides[2], 1e-6))
    r = 0 if evidence >= 0 else 1
    r = r if votes[r] >= votes[r + 2] else r + 2
    return np.roll(quad, -r, axis=0)


# ------------------------------------------------------------------------------------------ serving
class CardDetector(InferenceModel[np.ndarray, list[np.ndarray | None]]):
    """Batched two-pass card localisation; `locate_batch` returns TL,TR,BR,BL per photo or None."""

    cfg: DetectorConfig
    version: str
    net: nn.Module
    graph: DetectorGraph
    session: Session

    def __init__(
        self,
        weights: Path | None = None,
        device: str = "cpu",
        backend: Backend | None = None,
        *,
        load: bool = True,
    ) -> None:
        """`backend` (default: torch, in-process) picks where the network runs; the weights file is read
        either way, for the inference knobs and to check that a Triton model was exported from it."""
        self.weights = Path(weights) if weights is not None else WEIGHTS
        self.device = torch.device(device)
        self.backend = backend or Backend()
        self._training: tuple[nn.Module, DetectorConfig] | None = None
        super().__init__(load=load)

    @classmethod
    def from_net(cls, net: nn.Module, cfg: DetectorConfig, device: str = "cpu") -> CardDetector:
        """Wrap a network being trained (validation during training uses the serving path)."""
        self = cls(device=device, load=False)
        self._training = (net, cfg)
        self.load()
        return self

    def _load(self) -> None:
        if self._training is not None:
            net, self.cfg = self._training
            self.version = "training"
        else:
            self.version = weights_version(self.weights)
            blob = read_weights(self.weights)
            self.cfg = DetectorConfig.from_dict(blob["config"])
            net = fold_batchnorm(load_weights(build_net(self.cfg), blob).eval())
        self.net = net.to(self.device).eval().to(memory_format=torch.channels_last)
        self.graph = DetectorGraph(self.net)
        self.session = open_graph(
            self.backend, "detector", self.graph, (INPUT, OUTPUT), self.device, self.version
        )

    def _warm_batch(self) -> list[np.ndarray]:
        return [np.zeros((480, 360, 3), np.uint8)]

    def _infer_views(self, views: list[np.ndarray]) -> np.ndarray:
        """The network on same-size uint8 views: card and band probabilities (N, 3, H, W)."""
        x = np.stack(views)
        out = self.session.run({INPUT: x})[OUTPUT]
        if self.cfg.tta:  # a mirrored card keeps its top on top: the maps just flip back
            flipped = self.session.run({INPUT: np.ascontiguousarray(x[:, :, ::-1])})[OUTPUT]
            out = 0.5 * (out + flipped[..., ::-1])
        return out

    def locate_batch(self, images: list[np.ndarray]) -> list[np.ndarray | None]:
        """Corners for each RGB photo: long side vertical; the top may be off by 180 degrees."""
        return self.predict_batch(images)

    def _predict_batch(self, images: list[np.ndarray]) -> list[np.ndarray | None]:
        cfg = self.cfg
        if not images:
            return []
        # The first zoomed look judges every coarse candidate (a sheet of paper can out-mask the card at
        # low resolution); the best-scoring one is refined further.
        found = self._zoom(images, [(i, q) for i, qs in enumerate(self._coarse(images)) for q in qs])
        best: dict[int, tuple[np.ndarray, float]] = {}
        for i, result in found:
            if result is not None and (i not in best or result[1] > best[i][1]):
                best[i] = result
        moving = set(best)
        for _ in range(max(1, cfg.refine_passes) - 1):
            for i, result in self._zoom(images, [(i, best[i][0]) for i in sorted(moving)]):
                if result is None:
                    del best[i]
                    moving.discard(i)
                    continue
                if _corner_shift(best[i][0], result[0]) <= cfg.settle:
                    moving.discard(i)
                best[i] = result
        return [best[i][0] if i in best else None for i in range(len(images))]

    def _coarse(self, images: list[np.ndarray]) -> list[list[np.ndarray]]:
        """Candidate quads (photo px) from the letterboxed photos: the first, unrectified look."""
        cfg = self.cfg
        views, mats = zip(*(letterbox(img, cfg.input_size) for img in images), strict=True)
        out = []
        for p, m in zip(self._infer_views(list(views)), mats, strict=True):
            back = np.linalg.inv(m)
            quads: list[np.ndarray] = []
            for t in (cfg.threshold, cfg.extra_threshold):
                if t <= 0:
                    continue
                for q in fit_quads(
                    p[0], cfg.min_area, cfg.min_fit * 0.9, t, cfg.close, cfg.candidates, cfg.rect_fallback
                ):
                    if not any(_same_quad(q, kept, cfg.same_find) for kept in quads):
                        quads.append(q)
            out.append([apply(back, orient(q, p[1:], apply(back, q), cfg.geo)) for q in quads])
        return out

    def _zoom(
        self, images: list[np.ndarray], items: list[tuple[int, np.ndarray]]
    ) -> list[tuple[int, tuple[np.ndarray, float] | None]]:
        """One zoomed pass over (photo index, quad) items: (refined quad in photo px, score) or None."""
        if not items:
            return []
        cfg = self.cfg
        zoomed = [zoom_view(images[i], q, cfg.input_size, cfg.zoom_fill) for i, q in items]
        probs = self._infer_views([v for v, _ in zoomed])
        return [(i, self._accept(p, m)) for (i, _), p, (_, m) in zip(items, probs, zoomed, strict=True)]

    def _accept(self, p: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, float] | None:
        """The zoomed view's quad in photo px and a card score, or None when it is not the expected card."""
        cfg = self.cfg
        quads = fit_quads(p[0], 0.1, cfg.min_fit)
        if not quads:
            return None
        q = quads[0]
        mask = np.zeros(p.shape[1:], np.uint8)
        cv2.fillPoly(mask, [np.round(q * 4).astype(np.int32)], 1, cv2.LINE_8, shift=2)
        inside = float(p[0][mask > 0].mean())
        if inside < cfg.min_score:
            return None
        sides = np.linalg.norm(q - np.roll(q, -1, axis=0), axis=1)
        pairs = sorted((sides[0] + sides[2], sides[1] + sides[3]))
        if not 1.1 < pairs[1] / max(pairs[0], 1e-6) < 1.8:  # the view was drawn for a card-shaped quad
            return None
        back = np.linalg.inv(m)
        oriented = orient(q, p[1:], apply(back, q), cfg.geo)
        bands = _band_scores(p[1:], oriented)
        return apply(back, oriented), inside + 0.5 * float(bands[0, 0] + bands[1, 2])

    def locate(self, image: np.ndarray) -> np.ndarray | None:
        return self.locate_batch([image])[0]
