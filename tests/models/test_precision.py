"""bf16 arithmetic for the detector: what `precision` means where, and that it finds the same corners.

An operator may run the scanner's detector in bf16 (`CARDCAT_SCAN_DETECTOR_PRECISION`; fp32 by default);
these tests hold bf16 to fp32's answers on real photos, whatever CPU runs them (autocast to bf16 works
everywhere, only slower where it is emulated).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.detector import INPUT, OUTPUT, CardDetector
from models.sessions import Backend, autocast_dtype, native_bf16
from tests.models.conftest import require_weights
from training.detector.evaluate import corner_error_pct
from training.synth import make_photo

SEED = 21_500_000  # validation seeds
# Corner disagreement allowed between bf16 and fp32, in % of the card's height; the detector's own
# error on standard photos is ~0.2%, and 1% is ~8 px on the 838-px face the reader sees.
MAX_SHIFT_PCT = 1.0


def test_precision_names_resolve_per_device() -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert autocast_dtype("fp32", cpu) is None
    assert autocast_dtype("bf16", cpu) is torch.bfloat16
    assert autocast_dtype("auto", cuda) is None  # GPUs stay fp32 until measured there
    assert autocast_dtype("auto", cpu) is (torch.bfloat16 if native_bf16(cpu) else None)
    with pytest.raises(ValueError, match="precision"):
        autocast_dtype("fp8", cpu)


def test_bf16_session_answers_in_fp32_close_to_fp32() -> None:
    require_weights("detector.pt")
    exact = CardDetector(backend=Backend(precision="fp32"))
    fast = CardDetector(backend=Backend(precision="bf16"))
    views = np.random.default_rng(3).integers(0, 256, (2, 224, 224, 3), dtype=np.uint8)
    want = exact.session.run({INPUT: views})[OUTPUT]
    got = fast.session.run({INPUT: views})[OUTPUT]
    assert got.dtype == np.float32 and got.shape == want.shape
    assert float(np.abs(got - want).max()) < 0.05
    assert not np.array_equal(got, want)  # it really ran in another precision


def test_bf16_detector_finds_the_same_corners(faces: list[tuple[str, np.ndarray]]) -> None:
    require_weights("detector.pt")
    exact = CardDetector(backend=Backend(precision="fp32"))
    fast = CardDetector(backend=Backend(precision="bf16"))
    photos = [
        make_photo(face, SEED + n, kind, cid)
        # hard-v1: the bucket the shipped detector was trained on (#13's harder `hard` is for its retraining)
        for n, (kind, (cid, face)) in enumerate((k, f) for k in ("standard", "hard-v1") for f in faces * 2)
    ]
    images = [p.image for p in photos]
    for photo, want, got in zip(photos, exact.locate_batch(images), fast.locate_batch(images), strict=True):
        assert (want is None) == (got is None)
        if want is not None and got is not None:
            assert corner_error_pct(got, want) < MAX_SHIFT_PCT
            assert photo.corners is not None and corner_error_pct(got, photo.corners) < 2 * MAX_SHIFT_PCT
