"""The face check (#43): the detector's finds that are card backs or empty holders are no card; faces are."""

from __future__ import annotations

import numpy as np
import pytest

from tests.models.conftest import require_weights
from tests.models.test_first_look import lay

BACKS = 12  # card backs at their true corners, benchmark seeds (never trained on)


@pytest.fixture(scope="module")
def photos(faces: list[tuple[str, np.ndarray]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each reference face laid on a surface, a little turned, with its true corners."""
    return [lay(face, (960, 1280), 0.6, 8.0) for _, face in faces]


def test_the_shipped_check_passes_real_faces_and_refuses_card_backs(
    photos: list[tuple[np.ndarray, np.ndarray]],
) -> None:
    """Real catalog faces pass at their true corners, either way up (the detector leaves the top open);
    `training.synth`'s card backs at theirs are refused, nearly all (the manifest's validation figures)."""
    from models.face_check import FaceCheck, cut
    from training.synth import BENCH_SEED_BASE, make_empty_photo

    require_weights("face_check.onnx", "face_check.json")
    check = FaceCheck()
    assert 0 < check.bound < 1
    cuts = [cut(photo, np.roll(corners, turn, axis=0)) for photo, corners in photos for turn in (0, 2)]
    assert all(check.passes(cuts))
    backs = [make_empty_photo(BENCH_SEED_BASE + 7_000_000 + i, scale=0.5, kind="back") for i in range(BACKS)]
    back_cuts = [cut(b.image, b.back) for b in backs if b.back is not None]
    assert len(back_cuts) == BACKS
    refused = BACKS - sum(check.passes(back_cuts))
    assert refused >= BACKS - 2, f"only {refused} of {BACKS} card backs refused"


def test_a_refused_find_is_no_find_and_goes_to_the_second_opinion(
    photos: list[tuple[np.ndarray, np.ndarray]],
) -> None:
    from models.detector import CardDetector
    from models.face_check import FaceCheck

    require_weights("detector.pt", "face_check.onnx", "face_check.json")
    images = [photo for photo, _ in photos]
    expected = CardDetector().locate_batch(images)
    assert all(q is not None for q in expected)

    check = FaceCheck()
    passed = CardDetector(check=check).locate_batch(images)
    assert all(a is not None and np.allclose(a, b) for a, b in zip(passed, expected, strict=True))

    second = CardDetector()
    refusing = FaceCheck()
    refusing.bound = 1.01  # more than any score: every find is refused
    detector = CardDetector(second=second, check=refusing)
    assert detector.locate_batch(images) == [None] * len(images)
    assert second.views_run > 0  # each photo whose own find was refused went to the second opinion
    assert detector.refused == 2 * len(images)  # the first's find and the second's, each refused
