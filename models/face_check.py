"""Face check: is the card-shaped thing the detector found a card's face, or a back or an empty holder?

Why: a card back, an empty sleeve, toploader or binder pocket is card-shaped, and under a lamp's glare the
detector cannot tell it from a face whose name and number bands are washed out (#43: the `min_bands`
bound refuses most such finds, not all; the detector's second opinion, trained on harsher photos, finds
more of them). The embedder cannot tell either: trained to say which artwork it sees, it places an empty
scene's best faces at 0.75-0.81 against catalog faces, as close as a glared card's picture
(docs/hard-photos.md), so no similarity bound separates the two. This small network looks at the found
quad's pixels instead, rectified to a thumbnail (`cut`), and says how likely they are a face.

It is trained by `training.face_check.train` on `training.synth`'s card photos (every difficulty, held and
foil) against its backs and empty holders, and ships as an ONNX graph (`models/weights/face_check.onnx`)
run by OpenCV's DNN module: no torch and no ONNX Runtime, so it runs in every Detector replica whatever its
runtime. Its manifest (`face_check.json`) records the bound chosen on validation photos.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from models.checkpoints import weights_version
from models.geometry import card_height, rectify
from models.inference import InferenceModel
from models.quads import Pyramid

if TYPE_CHECKING:
    from models.tensor_ops import TensorPyramid

WEIGHTS = Path(__file__).resolve().parent / "weights" / "face_check.onnx"
INPUT_SIZE = (64, 90)  # (width, height): the face's 600:838 aspect; a back's emblem and a face's frame show
MEAN, STD = 0.5, 0.25  # the network sees (pixels / 255 - MEAN) / STD


def cut(
    photo: np.ndarray | Pyramid | TensorPyramid, quad: np.ndarray, size: tuple[int, int] = INPUT_SIZE
) -> np.ndarray:
    """The quad (TL, TR, BR, BL, photo px) rectified to the check's HxWx3 uint8 input, warped from the
    photo's pyramid level that still shows the card at least twice the input's height, so a large card
    does not alias. A photo on a torch device (`TensorPyramid`) is cut there and comes back as NumPy."""
    wanted = min(1.0, 2 * size[1] / max(card_height(quad), 1.0))
    if isinstance(photo, np.ndarray | Pyramid):
        image, scale = (Pyramid(photo) if isinstance(photo, np.ndarray) else photo).level(wanted)
        return rectify(image, _at(quad, scale), size)
    from models.tensor_ops import rectify_tensors

    level, scale = photo.level(wanted)
    return rectify_tensors([level], [_at(quad, scale)], size)[0][0]


def _at(quad: np.ndarray, scale: float) -> np.ndarray:
    """Photo px -> px of a pyramid level `scale` of its size (pixel centres)."""
    return (np.asarray(quad, np.float32) + 0.5) * scale - 0.5


class FaceCheck(InferenceModel[np.ndarray, np.ndarray]):
    """P(face) for each cut (`cut`); `bound` (the manifest's) is the score under which a find is refused."""

    net: Any  # cv2.dnn.Net
    version: str
    bound: float

    def __init__(self, weights: Path | None = None, *, load: bool = True) -> None:
        self.weights = Path(weights) if weights is not None else WEIGHTS
        self._net_lock = threading.Lock()  # a cv2.dnn.Net is not safe to run from two threads at once
        super().__init__(load=load)

    def _load(self) -> None:
        if not self.weights.exists():
            raise FileNotFoundError(f"{self.weights} absent: `python -m training.face_check.train`")
        self.net = cv2.dnn.readNetFromONNX(str(self.weights))
        self.version = weights_version(self.weights)
        manifest = json.loads(self.weights.with_suffix(".json").read_text())
        self.bound = float(manifest["bound"])

    def _warm_batch(self) -> list[np.ndarray]:
        return [np.full((INPUT_SIZE[1], INPUT_SIZE[0], 3), 128, np.uint8)]

    def transform(self, item: np.ndarray) -> np.ndarray:
        if (item.shape[1], item.shape[0]) != INPUT_SIZE:
            item = cv2.resize(item, INPUT_SIZE, interpolation=cv2.INTER_AREA)
        return item

    def scores(self, cuts: list[np.ndarray]) -> np.ndarray:
        """P(face) per cut, (N,) float32."""
        return self.predict_batch(cuts)

    def _predict_batch(self, cuts: list[np.ndarray]) -> np.ndarray:
        if not cuts:
            return np.zeros(0, np.float32)
        x = (np.stack(cuts).astype(np.float32).transpose(0, 3, 1, 2) / 255.0 - MEAN) / STD
        with self._net_lock:
            self.net.setInput(np.ascontiguousarray(x))
            logits = self.net.forward().reshape(-1)
        return (1.0 / (1.0 + np.exp(-logits))).astype(np.float32)

    def passes(self, cuts: list[np.ndarray]) -> list[bool]:
        """Whether each cut is a face by the manifest's bound."""
        return [bool(s >= self.bound) for s in self.scores(cuts)]
