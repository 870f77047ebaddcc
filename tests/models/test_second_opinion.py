"""The detector's second opinion (#43): another detector, asked only about the photos the first finds no
card in, so every photo the first finds keeps the first's corners."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.models.conftest import require_weights
from tests.models.test_first_look import lay


@pytest.fixture(scope="module")
def photos(faces: list[tuple[str, np.ndarray]]) -> list[np.ndarray]:
    """Each reference face laid on a surface, a little turned."""
    return [lay(face, (960, 1280), 0.6, 8.0)[0] for _, face in faces]


def test_the_second_opinion_answers_only_where_the_first_finds_no_card(photos: list[np.ndarray]) -> None:
    from models.detector import CardDetector

    require_weights("detector.pt")
    expected = CardDetector().locate_batch(photos)
    assert all(q is not None for q in expected)

    second = CardDetector()
    finds_all = CardDetector(second=second)
    assert _same(finds_all.locate_batch(photos), expected)
    assert second.views_run == 0  # never asked

    finds_none = CardDetector(second=second)
    finds_none.cfg = dataclasses.replace(finds_none.cfg, min_bands=2.01)  # more than any find can score
    assert _same(finds_none.locate_batch(photos), expected)  # every answer is the second's
    assert second.views_run > 0

    blank = np.full_like(photos[0], 90)
    second.views_run = 0
    mixed = finds_all.locate_batch([photos[0], blank])
    assert _same(mixed[:1], expected[:1]) and mixed[1] is None
    assert second.views_run > 0  # asked about the blank photo alone
    alone = CardDetector()
    alone.locate_batch([blank])
    assert second.views_run == alone.views_run


def _same(found: list[np.ndarray | None], expected: list[np.ndarray | None]) -> bool:
    return all(
        a is not None and b is not None and np.allclose(a, b, atol=1e-3)
        for a, b in zip(found, expected, strict=True)
    )


def test_the_shipped_second_opinion_loads_from_its_onnx_export() -> None:
    """The export beside `detector_second.pt` is made from those weights (a stale one is refused) and
    answers as the weights do in torch."""
    from models.detector import SECOND_WEIGHTS, CardDetector
    from models.sessions import Backend

    require_weights("detector_second.pt", "detector_second.onnx")
    views = np.random.default_rng(5).integers(0, 256, (2, 224, 224, 3), np.uint8)
    torch_maps = CardDetector(SECOND_WEIGHTS)._infer_views(list(views))
    onnx_maps = CardDetector(SECOND_WEIGHTS, backend=Backend(kind="onnx"))._infer_views(list(views))
    assert np.abs(torch_maps - onnx_maps).max() < 1e-4
