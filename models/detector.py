"""Card detector: find the card in a phone photo and return its four corners, then rectify it.

Why learned: classical edge/contour finding breaks on busy backgrounds, sleeves and glare. A small U-Net
predicts, per pixel, the card (channel 0) and bands along its top and bottom edges (channels 1, 2: name and
number ends, which say which sides are the short ones). First the whole photo letterboxed to `input_size`;
then `refine_passes` zoomed, roughly rectified views around the latest quad, where the card fills 78% of
the view and its edges are located with sub-pixel profiles of the mask. Corners are the intersections of
lines fitted to each side. The zoomed pass also vets the find (mask fit, score, aspect): None otherwise.
A photo the whole-photo view finds no card in gets a second look through overlapping windows at the view's
full resolution (`search_tiles`), for cards too small for the first. A photo still without a card may go to
a second opinion (`second`: another detector, `models/weights/detector_second.pt`, trained on harsher
photos than these weights could learn without losing some of #13's hard ones), so every photo these
weights find keeps their corners. Every find, of either, may be put to the face check (`check`,
`models.face_check`): a card back or an empty holder is card-shaped, and is no card.
Training lives in `training/detector/`; the shipped weights are `models/weights/detector.pt`. The network
itself lives in `models.detector_net` (torch), apart from this geometry, so that a replica running its ONNX
export (`models/weights/detector.onnx`, `Backend(kind="onnx")`) never imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import cv2
import numpy as np

from models.checkpoints import load_weights, read_weights, weights_version
from models.detector_config import DetectorConfig
from models.face_check import FaceCheck, cut
from models.geometry import CARD_ASPECT
from models.inference import InferenceModel
from models.quads import (
    Pyramid,
    apply,
    band_scores,
    corner_shift,
    fit_quads,
    letterbox,
    orient,
    orient_roll,
    same_quad,
    zoom_view,
)
from models.sessions import Backend, Session, open_export, open_graph

if TYPE_CHECKING:  # imported where used: torch only on its path, torchvision only where a device decodes
    import torch
    from torch import nn

    from models.detector_net import DetectorGraph
    from models.tensor_ops import TensorPyramid

WEIGHTS = Path(__file__).resolve().parent / "weights" / "detector.pt"
SECOND_WEIGHTS = WEIGHTS.with_name("detector_second.pt")
# A photo's pixels as the detector takes them: HxWx3 uint8 on the host, or uint8 (3, H, W) on a torch device.
Pixels: TypeAlias = "np.ndarray | torch.Tensor"
# Tensor names of the served graph; Triton's libtorch backend wants the <name>__<index> form.
INPUT, OUTPUT = "views__0", "probs__0"
# A zoomed view's find: the card's quad in photo px, its score (mask inside the quad, and half the band
# evidence), and the band evidence alone (top band on the top side plus bottom band on the bottom, 0-2).
Find: TypeAlias = tuple[np.ndarray, float, float]


# ------------------------------------------------------------------------------------------ serving
@dataclass(frozen=True)
class FirstLook:
    """What the whole-photo view alone says of a photo (`CardDetector.first_look_batch`): the card's
    quad, unrefined (None: no blob a quad fits), and every candidate the full pipeline would judge."""

    quad: np.ndarray | None
    candidates: list[np.ndarray]


class CardDetector(InferenceModel[Pixels, list[np.ndarray | None]]):
    """Batched two-pass card localisation; `locate_batch` returns TL,TR,BR,BL per photo or None."""

    default_weights = WEIGHTS  # what `weights=None` loads
    # How a zoomed view's card map becomes its quad (`_accept`): the blob above this threshold, fitted by
    # four of its outline's corners, or with `accept_enclose` by its sides extended to four.
    accept_threshold = 0.5
    accept_enclose = False
    cfg: DetectorConfig
    version: str
    net: nn.Module  # the torch path only
    graph: DetectorGraph  # the torch path only
    session: Session

    def __init__(
        self,
        weights: Path | None = None,
        device: str = "cpu",
        backend: Backend | None = None,
        *,
        load: bool = True,
        second: CardDetector | None = None,
        check: FaceCheck | None = None,
    ) -> None:
        """`backend` (default: torch, in-process) picks where the network runs; the weights file is read
        either way, for its version, which a Triton model or an ONNX export must carry. The inference knobs
        come from the weights file, or from the ONNX export's metadata (`Backend(kind="onnx")`: this
        process then never imports torch). `second`: the detector asked about the photos this one finds no
        card in (`SECOND_WEIGHTS` in the scanner; none by default). `check`: the face check
        (`models.face_check`), asked about every find of this detector and of `second`: a find it refuses
        (a back, an empty holder) is no find, and a photo whose own find it refuses goes to `second`."""
        self.weights = Path(weights) if weights is not None else self.default_weights
        self.device = str(device)
        self.backend = backend or Backend()
        self.second = second
        self.check = check
        self.refused = 0  # finds the check refused so far (what `training.detector.evaluate` reports)
        self._training: tuple[nn.Module, DetectorConfig] | None = None
        self.views_run = 0  # network views seen so far (what a page costs: training.detector.evaluate_pages)
        super().__init__(load=load)

    @classmethod
    def from_net(cls, net: nn.Module, cfg: DetectorConfig, device: str = "cpu") -> CardDetector:
        """Wrap a network being trained (validation during training uses the serving path)."""
        self = cls(device=device, load=False)
        self._training = (net, cfg)
        self.load()
        return self

    def _load(self) -> None:
        if self._training is None and self.backend.kind == "onnx":
            self._load_onnx()
            return
        import torch

        from models.detector_net import DetectorGraph, build_net
        from models.sessions import fold_batchnorm

        if self._training is not None:
            net, self.cfg = self._training
            self.version = "training"
        else:
            self.version = weights_version(self.weights)
            blob = read_weights(self.weights)
            self.cfg = DetectorConfig.from_dict(blob["config"])
            net = fold_batchnorm(load_weights(build_net(self.cfg), blob).eval())
        self.net = net.to(torch.device(self.device)).eval().to(memory_format=torch.channels_last)
        self.graph = DetectorGraph(self.net)
        self.session = open_graph(
            self.backend, "detector", self.graph, (INPUT, OUTPUT), self.device, self.version
        )

    def _load_onnx(self) -> None:
        """The export beside the weights (refused when made from other weights), with the inference knobs
        it records (`training.detector.export_onnx` copies them from the weights file)."""
        self.version = weights_version(self.weights)
        self.session, meta = open_export(self.weights, "training.detector.export_onnx", self.backend.threads)
        self.cfg = DetectorConfig.from_dict(meta)

    def _warm_batch(self) -> list[Pixels]:
        """A blank photo; on a GPU also as a tensor there, for a replica that cuts its views on the device."""
        blank = np.zeros((480, 360, 3), np.uint8)
        if self.device == "cpu":
            return [blank]
        import torch

        return [blank, torch.from_numpy(blank).permute(2, 0, 1).to(self.device)]

    def _infer_views(self, views: Sequence[Pixels]) -> np.ndarray:
        """The network on same-size uint8 HxWx3 views (NumPy arrays, or tensors cut on a torch device):
        card and band probabilities (N, 3, H, W)."""
        self.views_run += len(views)
        if not all(isinstance(v, np.ndarray) for v in views):
            import torch

            return self._infer_tensor(torch.stack([torch.as_tensor(v).to(self.device) for v in views]))
        x = np.stack(views)
        out = self.session.run({INPUT: x})[OUTPUT]
        if self.cfg.tta:  # a mirrored card keeps its top on top: the maps just flip back
            flipped = self.session.run({INPUT: np.ascontiguousarray(x[:, :, ::-1])})[OUTPUT]
            out = 0.5 * (out + flipped[..., ::-1])
        return out

    def _infer_tensor(self, x: torch.Tensor) -> np.ndarray:
        """`_infer_views` for views already on a torch device: straight into an in-process graph; another
        session (Triton) takes them as NumPy."""
        from models.sessions import TorchSession

        session = self.session

        def run(views: torch.Tensor) -> np.ndarray:
            if isinstance(session, TorchSession):
                return session.run_tensors({INPUT: views})[OUTPUT]
            return session.run({INPUT: views.cpu().numpy()})[OUTPUT]

        out = run(x)
        if self.cfg.tta:
            out = 0.5 * (out + run(x.flip(2))[..., ::-1])
        return out

    def locate_batch(
        self, images: Sequence[Pixels], coarse: Sequence[list[np.ndarray]] | None = None
    ) -> list[np.ndarray | None]:
        """Corners for each RGB photo: long side vertical; the top may be off by 180 degrees. A photo is an
        HxWx3 uint8 array, or a uint8 (3, H, W) tensor on a torch device (a GPU replica's decode), whose
        views are then cut on that device (`models.tensor_ops`). `coarse`: each photo's whole-photo
        candidates from `first_look_batch`, so that view is not computed again."""
        return self.predict_batch(images, coarse=coarse)

    def _predict_batch(
        self, photos: list[Pixels], coarse: Sequence[list[np.ndarray]] | None = None
    ) -> list[np.ndarray | None]:
        # Zoomed views start from the photo's pyramid: each photo is averaged down once (quads.Pyramid),
        # and the face check cuts from the same levels.
        images = [_pyramid(photo) for photo in photos]
        found = self._checked(images, self._own_finds(images, coarse))
        missed = [i for i, quad in enumerate(found) if quad is None]
        if self.second is not None and missed:
            again = self.second.locate_batch([photos[i] for i in missed])
            for i, quad in zip(missed, self._checked([images[i] for i in missed], again), strict=True):
                found[i] = quad
        return found

    def _checked(self, images: list[AnyPyramid], found: list[np.ndarray | None]) -> list[np.ndarray | None]:
        """`found` with every find the face check refuses (a back, an empty holder) made None."""
        if self.check is None:
            return found
        asked = [(i, quad) for i, quad in enumerate(found) if quad is not None]
        out = list(found)
        for (i, _), face in zip(asked, self.check.passes([cut(images[i], q) for i, q in asked]), strict=True):
            if not face:
                out[i] = None
                self.refused += 1
        return out

    def _own_finds(
        self, images: list[AnyPyramid], coarse: Sequence[list[np.ndarray]] | None
    ) -> list[np.ndarray | None]:
        """`locate_batch` with these weights alone, on the photos' pyramids."""
        cfg = self.cfg
        if not images:
            return []
        # The first zoomed look judges every coarse candidate (a sheet of paper can out-mask the card at
        # low resolution); the best-scoring one is refined further.
        candidates = self._coarse(images) if coarse is None else coarse
        items = [(i, q) for i, qs in enumerate(candidates) for q in qs]
        best: dict[int, Find] = {}
        start: dict[int, np.ndarray] = {}
        self._judge(images, items, best, start)
        missed = [i for i in range(len(images)) if i not in best]
        if cfg.search_tiles > 0 and missed:
            self._judge(images, self._search(images, missed), best, start)
        moving = set(best)
        if cfg.settle_coarse > 0:
            moving = {i for i in moving if corner_shift(start[i], best[i][0]) > cfg.settle_coarse}
        for _ in range(max(1, cfg.refine_passes) - 1):
            for i, result in self._zoom(images, [(i, best[i][0]) for i in sorted(moving)]):
                if result is None:
                    del best[i]
                    moving.discard(i)
                    continue
                if corner_shift(best[i][0], result[0]) <= cfg.settle:
                    moving.discard(i)
                best[i] = result
        return [best[i][0] if i in best else None for i in range(len(images))]

    def first_look_batch(self, images: Sequence[np.ndarray]) -> list[FirstLook]:
        """The scan cascade's cheap look (#47): the whole-photo view alone, one network view a photo where
        `locate_batch` takes ~4. Each photo's largest card-like blob that a quad fits, oriented as
        `locate_batch` orients (None without one), and the view's candidates, which `locate_batch` takes
        back (`coarse`) for a photo the scanner sends on to the full pipeline, so no view is looked at
        twice. Its corners are within ~1% of the card's height on most easy photos; the scanner keeps an
        answer from them only when it is certain (docs/scanner-performance.md, "The first look")."""
        if not images:
            return []
        self.load()
        cfg = self.cfg
        views, mats = zip(*(_letterbox(_pyramid(image), cfg.input_size) for image in images), strict=True)
        looks: list[FirstLook] = []
        for p, m in zip(self._infer_views(list(views)), mats, strict=True):
            back = np.linalg.inv(m)
            fitted = fit_quads(p[0], cfg.min_area, cfg.min_fit, cfg.threshold, cfg.close, 1, False)
            quad = apply(back, orient(fitted[0], p[1:], apply(back, fitted[0]), cfg.geo)) if fitted else None
            looks.append(FirstLook(quad, self._candidates(p, m)))
        return looks

    def _judge(
        self,
        images: list[AnyPyramid],
        items: list[tuple[int, np.ndarray]],
        best: dict[int, Find],
        start: dict[int, np.ndarray],
    ) -> None:
        """The first zoomed look at each (photo, candidate): a photo keeps its best-scoring find in `best`
        and the candidate it came from in `start`."""
        for (i, candidate), (_, result) in zip(items, self._zoom(images, items), strict=True):
            if result is not None and (i not in best or result[1] > best[i][1]):
                best[i] = result
                start[i] = candidate

    def _coarse(self, images: list[AnyPyramid]) -> list[list[np.ndarray]]:
        """Candidate quads (photo px) from the letterboxed photos: the first, unrectified look."""
        cfg = self.cfg
        views, mats = zip(*(_letterbox(img, cfg.input_size) for img in images), strict=True)
        return [self._candidates(p, m) for p, m in zip(self._infer_views(list(views)), mats, strict=True)]

    def _search(self, images: list[AnyPyramid], missed: list[int]) -> list[tuple[int, np.ndarray]]:
        """Candidates from the second look (`search_tiles`) at the photos in `missed`: (photo, quad)."""
        cfg = self.cfg
        windows = [(i, w) for i in missed for w in search_windows(*_size(images[i]), cfg)]
        views = [_zoom_view(images[i], w, cfg.input_size, cfg.zoom_fill) for i, w in windows]
        probs = self._infer_views([v for v, _ in views])
        return [
            (i, q)
            for (i, _), p, (_, m) in zip(windows, probs, views, strict=True)
            for q in self._candidates(p, m)
        ]

    def _candidates(self, p: np.ndarray, m: np.ndarray) -> list[np.ndarray]:
        """Card-like blobs of an unrectified view's probability maps `p` as quads in photo px (`m`: photo
        px -> view px), oriented by the band maps."""
        cfg = self.cfg
        back = np.linalg.inv(m)
        quads: list[np.ndarray] = []
        for t in (cfg.threshold, cfg.extra_threshold):
            if t <= 0:
                continue
            for q in fit_quads(
                p[0], cfg.min_area, cfg.min_fit * 0.9, t, cfg.close, cfg.candidates, cfg.rect_fallback
            ):
                if not any(same_quad(q, kept, cfg.same_find) for kept in quads):
                    quads.append(q)
        return [apply(back, orient(q, p[1:], apply(back, q), cfg.geo)) for q in quads]

    def _zoom(
        self, images: list[AnyPyramid], items: list[tuple[int, np.ndarray]]
    ) -> list[tuple[int, Find | None]]:
        """One zoomed pass over (photo index, quad) items: each its `Find`, or None."""
        maps = self._zoom_maps(images, items)
        return [(i, self._accept(p, m)) for (i, _), (p, m) in zip(items, maps, strict=True)]

    def _zoom_maps(
        self, images: list[AnyPyramid], items: list[tuple[int, np.ndarray]]
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """One zoomed pass's maps: (the view's probabilities, photo px -> view px) per item."""
        if not items:
            return []
        cfg = self.cfg
        zoomed = [_zoom_view(images[i], q, cfg.input_size, cfg.zoom_fill) for i, q in items]
        probs = self._infer_views([v for v, _ in zoomed])
        return [(p, m) for p, (_, m) in zip(probs, zoomed, strict=True)]

    def _accept(self, p: np.ndarray, m: np.ndarray) -> Find | None:
        """The zoomed view's find (`Find`), or None when it is not the expected card."""
        cfg = self.cfg
        quads = fit_quads(p[0], 0.1, cfg.min_fit, self.accept_threshold, enclose=self.accept_enclose)
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
        scores = band_scores(p[1:], q)
        r = orient_roll(q, scores, apply(back, q), cfg.geo)
        # The oriented quad's top band is side r of q, its bottom side r + 2 (orient_roll).
        top_and_bottom = float(scores[0, r] + scores[1, (r + 2) % 4])
        if top_and_bottom < cfg.min_bands:  # no name or number band: a back, a pocket, not a face
            return None
        return apply(back, np.roll(q, -r, axis=0)), inside + 0.5 * top_and_bottom, top_and_bottom

    def locate(self, image: np.ndarray) -> np.ndarray | None:
        return self.locate_batch([image])[0]


def search_windows(h: int, w: int, cfg: DetectorConfig) -> list[np.ndarray]:
    """The second look's windows over an h x w photo as card-shaped quads: a zoomed view drawn for such a
    quad (`zoom_view`) shows a square of `search_span` of the photo's long side around it, upright and
    unrectified, as the letterbox shows the whole photo."""
    side = cfg.search_span * max(h, w)
    tall = cfg.zoom_fill * side
    wide = tall / CARD_ASPECT
    n = cfg.search_tiles
    out = []
    for cy in _spread(h, side, n):
        for cx in _spread(w, side, n):
            x0, y0 = cx - wide / 2, cy - tall / 2
            corners = [[x0, y0], [x0 + wide, y0], [x0 + wide, y0 + tall], [x0, y0 + tall]]
            out.append(np.array(corners, np.float32))
    return out


def _spread(length: float, side: float, n: int) -> list[float]:
    """Centres of n windows of `side` along `length`, first and last flush with its ends (one in the middle
    when the side covers it all)."""
    if side >= length or n == 1:
        return [length / 2]
    return [side / 2 + k * (length - side) / (n - 1) for k in range(n)]


# A photo's pyramid on the host (quads.Pyramid) or on a torch device (tensor_ops.TensorPyramid).
AnyPyramid: TypeAlias = "Pyramid | TensorPyramid"


def _pyramid(photo: Pixels) -> AnyPyramid:
    if isinstance(photo, np.ndarray):
        return Pyramid(photo)
    from models.tensor_ops import TensorPyramid  # torchvision, only where photos are decoded on a device

    return TensorPyramid(photo)


def _size(photo: AnyPyramid) -> tuple[int, int]:
    """(height, width) of the photo under a pyramid: HxWx3 on the host, (3, H, W) on a device."""
    shape = photo.image.shape
    return (shape[0], shape[1]) if isinstance(photo, Pyramid) else (shape[1], shape[2])


def _letterbox(photo: AnyPyramid, size: int) -> tuple[Any, np.ndarray]:
    if isinstance(photo, Pyramid):
        return letterbox(photo, size)
    from models.tensor_ops import letterbox_tensor

    return letterbox_tensor(photo, size)


def _zoom_view(photo: AnyPyramid, quad: np.ndarray, size: int, fill: float) -> tuple[Any, np.ndarray]:
    if isinstance(photo, Pyramid):
        return zoom_view(photo, quad, size, fill)
    from models.tensor_ops import zoom_view_tensor

    return zoom_view_tensor(photo, quad, size, fill)
