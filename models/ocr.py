"""Print reader: the name, set code and collector number read off a rectified card face.

The scanner rectifies a photo to the canonical 600x838 face (the canvas `../shared/tools/cardrender.py`
draws), so the text sits at fixed places: the name line at the top, the set code (white on a dark box, or
a set symbol instead) and the collector number at the bottom left. A docTR recognition model reads fixed
crops of those lines. Rectification is never exact, so each line is read at a few vertical offsets; the
model was trained to say nothing when its line is not centred in the crop, so off-line offsets drop out.
The name's offsets vote (`vote`: the read the other reads, weighted by confidence, agree with most); the
footer keeps its most confident read, which measured better there (see `FOOTER`). The crop geometry and
the model factory live here, once, and training imports them, so training and serving cannot drift.
Serving runs the shipped network's ONNX export in ONNX Runtime on a CPU node (`runtime="onnx"`: no torch
in the process; the network's torch side lives in `models.ocr_net`), or compiled to TorchScript
(`COMPILED`: torch without docTR); any other checkpoint goes through docTR.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from models.checkpoints import read_weights
from models.inference import InferenceModel
from models.ocr_text import ctc_greedy, ctc_scores, line_score, parse_footer, parse_name, vote
from models.sessions import OnnxSession, open_export

if TYPE_CHECKING:
    from models.ocr_net import Recognizer

WEIGHTS = Path(__file__).resolve().parent / "weights" / "ocr.pt"
# The shipped weights' network compiled to TorchScript (`python -m training.ocr.compile`): serving it needs
# torch alone, not docTR, whose import (scipy, matplotlib, h5py, huggingface_hub...) costs a replica
# ~300 MB. Used only while it was compiled from the weights being loaded (their SHA-256 is inside).
COMPILED = WEIGHTS.with_suffix(".ts")
CANVAS_W, CANVAS_H = 600, 838


@dataclass(frozen=True)
class Region:
    """A text line on the canonical face: its crop box, the model input size, the offsets searched."""

    name: str
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 on the 600x838 canvas
    size: tuple[int, int]  # model input (height, width); the box keeps this aspect ratio
    offsets: tuple[int, ...]  # vertical offsets (canvas px) tried at read time
    vote: bool = False  # combine the offsets' reads by `vote` rather than keep the most confident one
    # The offsets always read; the others only for a line none of these read surely (`SURE_LINE`).
    first: tuple[int, ...] = ()


# Name at (34,42) up to 32 px, HP at the right (read, then stripped); at scale 1/2 its glyphs are the
# footer's size (one model, one glyph scale) and keep ~2.4 CTC steps each.
# Voting on the name, exact reads (evaluate.py, 500 held-out cards; chosen on another 500-card draw): first
# weights 0.462 -> 0.508 clean, 0.400 -> 0.418 damaged; current weights 0.726 -> 0.756 clean, 0.714 ->
# 0.710 damaged (within 90% similarity 0.838 -> 0.856, 0.814 -> 0.820).
NAME = Region(
    "name", (12.0, 30.0, 588.0, 94.0), (32, 288), (-24, -12, 0, 12, 24), vote=True, first=(-12, 0, 12)
)
# Set-code box and number at y~776 in 15 px bold; native scale, so digits keep ~2.4 CTC steps each.
# No vote: a footer offset 8 px off still reads, but with the tops of glyphs cut (B -> R, P -> K), and
# such reads agree with each other more than with the centred one: this vote cost 2-10 points of exact
# numbers, and exact-string voting (confidence summed per distinct read) changed nothing.
FOOTER = Region("footer", (22.0, 770.0, 246.0, 802.0), (32, 224), (-16, -8, 0, 8, 16), first=(-8, 0, 8))
REGIONS = (NAME, FOOTER)
# A line whose best read among its region's `first` offsets scores at least this (geometric-mean glyph
# confidence, `line_score`) is not read at the outer offsets: on the scanner's rectified phone photos they
# never changed an answer, and skipping them saves ~30% of the reader's time on standard photos. Faces
# rectified far off (`training.ocr.evaluate`'s degraded faces) need them, and their reads are unsure
# (docs/scanner-performance.md, "... the reader's outer offsets"). Above 1: every offset, always.
SURE_LINE = 0.9


@dataclass(frozen=True)
class PrintRead:
    """What the face prints; a field is None (with its low confidence) when it could not be read."""

    name: str | None
    name_confidence: float
    number: str | None  # as printed before the slash, e.g. "025", "TG05", "SV001"
    number_confidence: float
    printed_total: str | None  # after the slash, e.g. "198", or None
    set_code: str | None  # None when the card prints a symbol or it is unreadable
    set_code_confidence: float
    # log P(footer line | crop) of each candidate footer the caller asked about (best offset); empty when
    # none were asked or the model is not CTC
    footer_scores: dict[str, float] = field(default_factory=dict)


def region_quad(region: Region, dx: float = 0.0, dy: float = 0.0) -> np.ndarray:
    """The region's box corners (TL, TR, BR, BL) on the canvas, shifted by (dx, dy)."""
    x0, y0, x1, y1 = region.box
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float32) + np.array([dx, dy], np.float32)


def warp(image: np.ndarray, quad: np.ndarray, size: tuple[int, int], origin_y: float = 0.0) -> np.ndarray:
    """Warp a canvas quad out of a canvas-scale image (a face, or a band whose top is canvas y=origin_y)."""
    h, w = size
    src = (quad - np.array([0.0, origin_y], np.float32)).astype(np.float32)
    scale = w / float(np.linalg.norm(src[1] - src[0]))
    if scale < 0.9:  # shrinking (the name line): area-average first, or thin strokes alias away
        x0, y0 = np.maximum(np.floor(src.min(axis=0)).astype(int) - 2, 0)
        x1, y1 = np.ceil(src.max(axis=0)).astype(int) + 3
        band = image[y0:y1, x0:x1]
        if band.size:
            image = cv2.resize(band, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
            src = ((src - np.array([x0, y0], np.float32) + 0.5) * scale - 0.5).astype(np.float32)
    dst = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32)
    matrix = cv2.getPerspectiveTransform(src, dst)
    return cv2.warpPerspective(image, matrix, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def to_canvas(face: np.ndarray) -> np.ndarray:
    """Any-size RGB face -> 600x838 uint8, so the fixed crop boxes apply."""
    if face.ndim == 2:
        face = np.repeat(face[..., None], 3, axis=2)
    if face.shape[:2] != (CANVAS_H, CANVAS_W):
        shrink = face.shape[1] > CANVAS_W
        face = cv2.resize(
            face, (CANVAS_W, CANVAS_H), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR
        )
    return np.ascontiguousarray(face, dtype=np.uint8)


class PrintReader(InferenceModel[np.ndarray, list[PrintRead]]):
    """Reads batches of rectified faces; weights load once, at construction unless `load=False`."""

    model: Recognizer
    arch: str
    vocab: str
    is_ctc: bool
    mean: tuple[float, ...]
    std: tuple[float, ...]
    _log_probs: Any
    session: OnnxSession | None

    def __init__(
        self,
        weights: Path | None = None,
        device: str = "cpu",
        checkpoint: Path | None = None,
        arch: str = "crnn_mobilenet_v3_small",
        vocab: str | None = None,
        compiled: Path | None = COMPILED,
        *,
        load: bool = True,
        sure_line: float = SURE_LINE,
        jit_optimize: bool | None = None,
        runtime: str = "torch",
        threads: int = 1,
    ) -> None:
        """`compiled`: a TorchScript file from `compile_reader`, used instead of building the docTR model
        when it was compiled from these very weights (never for a `checkpoint` or another `vocab`).
        `sure_line`: see `SURE_LINE`. `jit_optimize`: let TorchScript specialise and fuse the compiled
        network for each new input shape (None: on a CPU only; on a GPU every new batch size cost a fusion
        compile on the host, and a reader's batch sizes keep changing). `runtime="onnx"`: the weights'
        ONNX export beside them (`python -m training.ocr.export_onnx`) in ONNX Runtime on the CPU with
        `threads` threads, and no torch in this process; refused when it was exported from other
        weights, and for a `checkpoint` or another `vocab`, which have none."""
        if runtime not in ("torch", "onnx"):
            raise ValueError(f"unknown reader runtime {runtime!r} (expected 'torch' or 'onnx')")
        if runtime == "onnx" and (checkpoint is not None or vocab is not None):
            raise ValueError("the ONNX reader runs the shipped weights' export: no checkpoint or vocab")
        self.device = "cpu" if runtime == "onnx" else str(device)
        on_cpu = self.device.split(":")[0] == "cpu"
        self.jit_optimize = on_cpu if jit_optimize is None else jit_optimize
        self.sure_line = sure_line
        self.weights, self.checkpoint, self.compiled = Path(weights or WEIGHTS), checkpoint, compiled
        self._arch, self._vocab = arch, vocab
        self.runtime, self.threads = runtime, threads
        self.session = None
        super().__init__(load=load)

    def _load(self) -> None:
        if self.runtime == "onnx":
            self._load_onnx()
            return
        import torch

        from models.checkpoints import as_float32, state_dict_of
        from models.ocr_net import CTCLogProbs, build_model, default_vocab, load_compiled
        from models.sessions import fold_batchnorm

        source, checkpoint, vocab = self.weights, self.checkpoint, self._vocab
        found = None
        if self.compiled is not None and checkpoint is None and vocab is None:
            found = load_compiled(Path(self.compiled), source, self.device)
        if found is not None:
            self._log_probs, meta = found
            self.model = None
            self.arch, self.vocab, self.is_ctc = str(meta["arch"]), str(meta["vocab"]), True
            self.mean, self.std = tuple(meta["mean"]), tuple(meta["std"])
            return
        blob = read_weights(checkpoint or source)
        meta = blob if isinstance(blob, dict) and "arch" in blob else {}
        self.arch = str(meta.get("arch", self._arch))
        self.vocab = vocab or str(meta.get("vocab") or default_vocab())
        state = state_dict_of(blob)
        kwargs = dict(meta.get("model_kwargs") or {})
        if self.arch.startswith("crnn") and "decoder.weight_hh_l0" in state:
            kwargs["rnn_units"] = int(state["decoder.weight_hh_l0"].shape[1])  # any width a team trained
        if "linear.weight" in state and state["linear.weight"].shape[0] != len(self.vocab) + 1:
            raise ValueError(
                f"checkpoint has {state['linear.weight'].shape[0] - 1} classes, vocab {len(self.vocab)}"
            )
        self.model = build_model(self.arch, self.vocab, **kwargs)
        self.model.load_state_dict(as_float32(state))
        fold_batchnorm(self.model.to(torch.device(self.device)).eval())
        if isinstance(getattr(self.model, "decoder", None), torch.nn.RNNBase):
            # cuDNN's LSTM wants its weights in one buffer, or it copies them into one at every call
            self.model.decoder.flatten_parameters()
        self.mean, self.std = self.model.cfg["mean"], self.model.cfg["std"]
        self.is_ctc = self.arch.startswith("crnn")
        self._log_probs = CTCLogProbs(self.model) if self.is_ctc else None

    def _load_onnx(self) -> None:
        """The export beside the weights (refused when made from other weights), with the vocabulary and
        normalisation it records (`training.ocr.export_onnx` copies them)."""
        self.session, meta = open_export(self.weights, "training.ocr.export_onnx", self.threads)
        self.model, self._log_probs = None, None
        self.arch, self.vocab, self.is_ctc = str(meta["arch"]), str(meta["vocab"]), True
        self.mean, self.std = tuple(meta["mean"]), tuple(meta["std"])

    def read_lines(
        self, crops: Sequence[np.ndarray]
    ) -> tuple[list[tuple[str, list[float]]], np.ndarray | None]:
        """Raw reads of same-size crops (text and per-glyph confidence), and for CTC models the lines'
        log-probabilities (N, T, C) as float32 NumPy, which `ctc_scores` takes."""
        if not crops:
            return [], None
        if self.session is not None:
            (log_probs,) = self.session.run({self.session.input_names[0]: np.stack(crops)}).values()
            return ctc_greedy(np.exp(log_probs), self.vocab), log_probs
        import torch

        from models.ocr_net import to_tensor

        if not self.is_ctc:  # fixed-shape archs (ViTSTR, PARSeq...) want their own input size
            h, w = self.model.cfg["input_shape"][1:]
            crops = [cv2.resize(c, (w, h), interpolation=cv2.INTER_AREA) for c in crops]
        x = to_tensor(crops, self.mean, self.std).to(self.device)
        with torch.inference_mode(), torch.jit.optimized_execution(self.jit_optimize):
            if self._log_probs is not None:
                lines = self._log_probs(x).cpu().numpy()
                return ctc_greedy(np.exp(lines), self.vocab), lines
            preds = self.model(x)["preds"]
        return [(text, [float(conf)] * len(text)) for text, conf in preds], None

    def _warm_batch(self) -> list[np.ndarray]:
        return [np.full((838, 600, 3), 200, np.uint8)]

    def transform(self, item: np.ndarray) -> np.ndarray:
        return to_canvas(item)

    def read_batch(
        self, faces: list[np.ndarray], footers: Sequence[Sequence[str]] | None = None
    ) -> list[PrintRead]:
        """RGB uint8 faces (canonical 600x838, or any size of that aspect) -> what each prints.

        `footers`, one list per face: candidate footer lines to score (`PrintRead.footer_scores`)."""
        return self.predict_batch(faces, footers=footers)

    def _read_region(
        self, faces: list[np.ndarray], region: Region
    ) -> tuple[list[list[tuple[str, list[float]]]], list[np.ndarray | None]]:
        """Each face's reads of the region's line at its offsets (in offset order), and for CTC models their
        log-probabilities (offsets, T, C): the `first` offsets for every face, the rest only for faces
        whose line those did not read surely."""
        every = self.sure_line > 1 or not region.first
        first = list(region.offsets) if every else [dy for dy in region.offsets if dy in region.first]
        rest = [dy for dy in region.offsets if dy not in first]
        reads: list[dict[int, tuple[str, list[float]]]] = [{} for _ in faces]
        lines: list[dict[int, np.ndarray]] = [{} for _ in faces]

        def look(which: list[int], offsets: list[int]) -> None:
            crops = [warp(faces[i], region_quad(region, dy=dy), region.size) for i in which for dy in offsets]
            texts, log_probs = self.read_lines(crops)
            for k, (i, dy) in enumerate((i, dy) for i in which for dy in offsets):
                reads[i][dy] = texts[k]
                if log_probs is not None:
                    lines[i][dy] = log_probs[k]

        look(list(range(len(faces))), first)
        unsure = [i for i in range(len(faces)) if max(map(line_score, reads[i].values())) < self.sure_line]
        if rest and unsure:
            look(unsure, rest)
        ordered = [[read[dy] for dy in region.offsets if dy in read] for read in reads]
        stacked = [
            np.stack([line[dy] for dy in region.offsets if dy in line]) if line else None for line in lines
        ]
        return ordered, stacked

    def _predict_batch(
        self, faces: list[np.ndarray], footers: Sequence[Sequence[str]] | None = None
    ) -> list[PrintRead]:
        best: dict[str, list[tuple[str, list[float]]]] = {}
        scores: list[dict[str, float]] = [{} for _ in faces]
        for region in REGIONS:
            reads, log_probs = self._read_region(faces, region)
            best[region.name] = [
                vote(group) if region.vote else max(group, key=line_score) for group in reads
            ]
            if region is FOOTER and footers is not None:
                for i, texts in enumerate(footers):
                    lines = log_probs[i]
                    if lines is None:
                        continue
                    unique = sorted(set(texts))
                    best_offset = ctc_scores(lines, unique, self.vocab).max(axis=0).tolist()
                    scores[i] = dict(zip(unique, best_offset, strict=True))
        out = []
        for (name_text, name_conf), (foot_text, foot_conf), footer_scores in zip(
            best["name"], best["footer"], scores, strict=True
        ):
            name, name_c = parse_name(name_text, name_conf)
            (code, code_c), (number, num_c) = parse_footer(foot_text, foot_conf)
            head, _, total = (number or "").partition("/")
            out.append(
                PrintRead(
                    name=name,
                    name_confidence=name_c,
                    number=head or None,
                    number_confidence=num_c,
                    printed_total=total if number and total.isdigit() else None,
                    set_code=code,
                    set_code_confidence=code_c,
                    footer_scores=footer_scores,
                )
            )
        return out
