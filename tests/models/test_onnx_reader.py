"""The print reader without torch: CTC scoring in NumPy (`models.ocr_text.ctc_scores`) against torch's own
`ctc_loss`, and the network in ONNX Runtime (`PrintReader(runtime="onnx")`, `models/weights/ocr.onnx`):
torch's log-probabilities at both crop widths, torch's reads and footer scores on real faces, an export
from other weights refused, and a process that reads this way without importing torch or docTR."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from cardcat.stack import REPO
from models.checkpoints import weights_version
from models.ocr import FOOTER, NAME, WEIGHTS, PrintReader
from models.ocr_text import ctc_greedy, ctc_scores
from models.sessions import onnx_path
from tests.faces import base1_faces
from training.ocr.export_onnx import INPUT, OUTPUT, TOLERANCE, export
from training.renders import SHARED

VOCAB = "ABCDEFGHIJ0123456789/ "
needs_shared = pytest.mark.skipif(
    not (SHARED / "catalog").exists(), reason=f"{SHARED}/catalog absent: no real card faces"
)


def torch_ctc_scores(log_probs: np.ndarray, texts: list[str], vocab: str) -> np.ndarray:
    """What the reader computed before it left torch: `ctc_loss` per (line, text), negated."""
    n, steps, _ = log_probs.shape
    index = {ch: i for i, ch in enumerate(vocab)}
    out = np.full((n, len(texts)), -math.inf)
    for k, text in enumerate(texts):
        if not text or any(ch not in index for ch in text):
            continue
        target = torch.tensor([[index[ch] for ch in text]] * n)
        loss = torch.nn.functional.ctc_loss(
            torch.from_numpy(log_probs).float().transpose(0, 1),
            target,
            torch.full((n,), steps, dtype=torch.long),
            torch.full((n,), len(text), dtype=torch.long),
            blank=len(vocab),
            reduction="none",
        )
        out[:, k] = -loss.numpy()
    return out


@pytest.mark.parametrize("steps", [1, 2, 7, 56, 72])
def test_numpy_ctc_scores_are_torchs(steps: int) -> None:
    """Random lines and texts that exercise the forward algorithm's cases: repeated glyphs (no skip over
    their blank), a text just short enough and one too long for the line, unspellable and empty texts."""
    rng = np.random.default_rng(steps)
    logits = torch.from_numpy(rng.normal(0, 3, (3, steps, len(VOCAB) + 1)).astype(np.float32))
    log_probs = logits.log_softmax(-1).numpy()
    texts = ["AB 012/100", "AA 011/100", "A", "00", "0" * ((steps + 1) // 2), "B" * steps, "Zz", "", "CD"]
    expected, got = torch_ctc_scores(log_probs, texts, VOCAB), ctc_scores(log_probs, texts, VOCAB)
    assert got.shape == (3, len(texts))
    assert (np.isfinite(got) == np.isfinite(expected)).all()
    finite = np.isfinite(expected)
    assert finite[:, 2].all() and not finite[:, 6:8].any()  # "A" spellable; "Zz" and "" are not
    # float32 (torch) against float64 (here): the log-likelihoods of random lines run to -200
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-5, atol=1e-4)


def test_a_line_that_spells_a_text_scores_it_near_zero_and_ranks_it_first() -> None:
    """A sharp line reading "AB 1": its own text at ~log 1, a one-glyph-off text far below."""
    blank = len(VOCAB)
    path = [VOCAB.index(ch) for ch in "AB 1"]
    steps = [path[0], blank, path[1], path[1], blank, path[2], path[3], blank]
    lines = np.full((1, len(steps), blank + 1), math.log(1e-6), np.float32)
    for t, k in enumerate(steps):
        lines[0, t, k] = math.log(1 - 1e-6 * blank)
    scores = ctc_scores(lines, ["AB 1", "AB 7", "A 1"], VOCAB)[0]
    assert scores[0] > -1e-3 and scores[0] - max(scores[1:]) > 10
    assert ctc_greedy(np.exp(lines), VOCAB)[0][0] == "AB 1"


@pytest.fixture(scope="module")
def readers() -> tuple[PrintReader, PrintReader]:
    return PrintReader(), PrintReader(runtime="onnx")


def test_the_shipped_export_gives_torchs_log_probabilities(readers: tuple[PrintReader, PrintReader]) -> None:
    by_torch, by_onnx = readers
    assert (by_onnx.vocab, by_onnx.mean, by_onnx.std) == (by_torch.vocab, by_torch.mean, by_torch.std)
    rng = np.random.default_rng(6)
    for region in (NAME, FOOTER):  # two widths, one export
        crops = [rng.integers(0, 256, (*region.size, 3), np.uint8) for _ in range(3)]
        (_, expected), (_, got) = by_torch.read_lines(crops), by_onnx.read_lines(crops)
        assert expected is not None and got is not None and got.shape == expected.shape
        assert np.abs(got - expected).max() < TOLERANCE
        assert (got.argmax(-1) == expected.argmax(-1)).mean() > 0.99


@needs_shared
def test_the_shipped_export_reads_real_faces_as_torch_does(
    readers: tuple[PrintReader, PrintReader], tmp_path: Path
) -> None:
    faces = base1_faces(4, tmp_path)
    footers = [["025/102", "1/102", "4/102", "XY 004/102"]] * len(faces)
    by_torch, by_onnx = readers
    for mine, theirs in zip(
        by_onnx.read_batch(faces, footers), by_torch.read_batch(faces, footers), strict=True
    ):
        assert (mine.name, mine.number, mine.set_code) == (theirs.name, theirs.number, theirs.set_code)
        assert mine.footer_scores.keys() == theirs.footer_scores.keys()
        for text, score in theirs.footer_scores.items():
            assert mine.footer_scores[text] == pytest.approx(score, abs=0.01)


def test_an_export_from_other_weights_or_none_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "ocr.pt"
    other.write_bytes(WEIGHTS.read_bytes() + b"\0")  # another file, so another version
    with pytest.raises(FileNotFoundError, match="export_onnx"):
        PrintReader(other, runtime="onnx")
    shutil.copy(onnx_path(WEIGHTS), onnx_path(other))
    with pytest.raises(ValueError, match="exported from weights"):
        PrintReader(other, runtime="onnx")
    with pytest.raises(ValueError, match="no checkpoint"):
        PrintReader(runtime="onnx", checkpoint=WEIGHTS)


def test_the_exporter_writes_what_the_reader_loads(tmp_path: Path) -> None:
    weights = tmp_path / "ocr.pt"
    shutil.copy(WEIGHTS, weights)
    out = export(weights)
    model = onnx.load(str(out))
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["cardcat_version"] == weights_version(WEIGHTS)
    assert json.loads(meta["cardcat_model"])["vocab"] == PrintReader().vocab
    assert [t.name for t in model.graph.input] == [INPUT] and [t.name for t in model.graph.output] == [OUTPUT]
    crops = [np.full((*FOOTER.size, 3), 120, np.uint8)]
    _, fresh = PrintReader(weights, runtime="onnx").read_lines(crops)
    _, shipped = PrintReader(runtime="onnx").read_lines(crops)
    assert fresh is not None and shipped is not None and np.abs(fresh - shipped).max() < TOLERANCE


def test_a_process_that_reads_in_onnx_runtime_never_imports_torch_or_doctr() -> None:
    """What the Reader replica imports (the app module, the model) and does."""
    code = (
        "import sys\n"
        "import numpy as np\n"
        "import serve_app.app\n"
        "from serve_app.app import _limit_threads\n"
        "from models.ocr import PrintReader\n"
        "_limit_threads('cpu', 1, torch_too=False)\n"
        "reader = PrintReader(runtime='onnx')\n"
        "reads = reader.read_batch([np.full((838, 600, 3), 200, np.uint8)], [['1/102']])\n"
        "print(len(reads), 'torch' in sys.modules, 'doctr' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[-2] == "1 False False", done.stdout + done.stderr


def test_compiling_new_weights_writes_their_onnx_export_too(tmp_path: Path) -> None:
    """`training.ocr.compile` (run after every retraining) writes the TorchScript file and the ONNX export,
    so a replica of either runtime serves the new weights."""
    from training.ocr import compile as compile_step

    weights = tmp_path / "ocr.pt"
    shutil.copy(WEIGHTS, weights)
    assert compile_step.main(["--weights", str(weights)]) == 0
    assert weights.with_suffix(".ts").exists() and onnx_path(weights).exists()
    compiled = PrintReader(weights, compiled=weights.with_suffix(".ts"))
    assert compiled.model is None  # the TorchScript file was used: compiled from these very weights
    assert PrintReader(weights, runtime="onnx").vocab == compiled.vocab  # and the export was not refused
