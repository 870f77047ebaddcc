"""The shipped weights give the outputs recorded before the models were refactored (`reference.json`).

Recorded on the CPU from the original code; on this machine the refactored code matches it bit for bit.
The tolerance (1e-5) only leaves room for another CPU's kernels; texts and found/not-found are exact.
The detector's quads were re-recorded on 2026-11-25, when its zoomed views began to start from a photo
pyramid (`models.quads.Pyramid`, a deliberate change of pixels: corners moved by at most 0.4 px), and again
that day for the detector retrained on #13's hard photos (unet224-v7-cpu: corners moved by at most 2.3 px),
and the vectors once more for the embedder retrained on them (cardnet-v3-cpu), and the quads for the
detector trained longer on them (unet224-v8-cpu: corners moved by at most 3.1 px), and the vectors again
for the embedder held to those vectors' clean faces on glared photos (cardnet-v6-cpu, 2026-12-07; only
the vectors were rewritten), and for it trained on off-centre corners (cardnet-v7-cpu, the same day, the
same way); the reader's outputs stay as first recorded.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from tests.models.conftest import require_weights
from tests.models.reference import outputs

ATOL = 1e-5


def test_detector_embedder_and_reader_answer_as_before(
    faces: list[tuple[str, np.ndarray]], reference: dict[str, Any]
) -> None:
    require_weights("detector.pt", "embedder.pt", "ocr.pt", "ocr.ts")
    got = outputs(faces)
    assert [q is None for q in got["quads"]] == [q is None for q in reference["quads"]]
    for mine, theirs in zip(got["quads"], reference["quads"], strict=True):
        if theirs is not None:
            np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-3)  # photo pixels
    np.testing.assert_allclose(got["vectors"], reference["vectors"], rtol=0, atol=ATOL)
    for mine, theirs in zip(got["reads"], reference["reads"], strict=True):
        for key in ("name", "number", "printed_total", "set_code"):
            assert mine[key] == theirs[key], key
        for key in ("name_confidence", "number_confidence", "set_code_confidence"):
            assert abs(mine[key] - theirs[key]) <= ATOL, key
        assert mine["footer_scores"].keys() == theirs["footer_scores"].keys()
        for line, score in theirs["footer_scores"].items():
            assert abs(mine["footer_scores"][line] - score) <= 1e-3, line


def test_reference_reads_are_plain_data() -> None:
    """`PrintRead` stays a dataclass of plain values: the scanner ships it as `dataclasses.asdict`."""
    from models.ocr import PrintRead

    fields = {f.name for f in dataclasses.fields(PrintRead)}
    assert fields == {
        "name",
        "name_confidence",
        "number",
        "number_confidence",
        "printed_total",
        "set_code",
        "set_code_confidence",
        "footer_scores",
    }
