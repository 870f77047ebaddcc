"""The scanner models' one life cycle (`models.inference.InferenceModel`), on the real classes and the
shipped weights: load exactly once however many threads ask at once, warm, predict batches of any size."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from models.detector import CardDetector
from models.embedder import CardEmbedder
from models.inference import InferenceModel
from models.ocr import PrintReader
from tests.models.conftest import require_weights
from training.synth import BENCH_SEED_BASE, make_photo


class CountingEmbedder(CardEmbedder):
    """The real embedder, counting how often its weights were loaded."""

    loads = 0

    def _load(self) -> None:
        type(self).loads += 1
        super()._load()


def test_the_three_models_share_the_life_cycle() -> None:
    for cls in (CardDetector, PrintReader, CardEmbedder):
        assert issubclass(cls, InferenceModel)
        # a subclass supplies only the steps; the life cycle itself is the base's
        for method in ("load", "warm", "predict_batch"):
            assert method not in vars(cls), f"{cls.__name__} overrides {method}"


def test_load_runs_once_when_many_threads_ask_at_once() -> None:
    require_weights("embedder.pt")
    model = CountingEmbedder(load=False)
    assert not model.loaded and CountingEmbedder.loads == 0
    face = np.full((838, 600, 3), 120, np.uint8)
    start = threading.Barrier(8)

    def first_call(_: int) -> np.ndarray:
        start.wait()
        return model.predict_batch([face])

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(first_call, range(8)))
    assert CountingEmbedder.loads == 1 and model.loaded
    for answer in answers[1:]:
        np.testing.assert_array_equal(answer, answers[0])
    model.load()
    assert CountingEmbedder.loads == 1  # idempotent


def test_a_deferred_model_loads_on_warm() -> None:
    require_weights("detector.pt")
    model = CardDetector(load=False)
    assert not model.loaded
    model.warm()
    assert model.loaded and model.version == CardDetector().version


def test_embedder_batches_of_any_size_give_the_same_rows(faces: list[tuple[str, np.ndarray]]) -> None:
    """Batches smaller, equal to and larger than the session batch (chunked inside) and faces of other
    sizes (shrunk by `transform`) give each face the vector it gets alone."""
    require_weights("embedder.pt")
    model = CardEmbedder(batch_size=3)
    images = [face for _, face in faces]
    mixed = [images[i % len(images)] for i in range(7)]
    mixed[5] = mixed[5][::2, ::2].copy()  # a half-size face
    singles = np.concatenate([model.predict_batch([face]) for face in mixed])
    for size in (1, 3, 4, 7):
        got = model.predict_batch(mixed[:size])
        assert got.shape == (size, model.dim) and got.dtype == np.float32
        np.testing.assert_allclose(got, singles[:size], rtol=0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(singles, axis=1), 1.0, atol=1e-5)
    assert model.predict_batch([]).shape == (0, model.dim)
    np.testing.assert_array_equal(model.embed_batch(mixed[:2]), model.predict_batch(mixed[:2]))


def test_detector_batches_of_any_size_find_the_same_corners(faces: list[tuple[str, np.ndarray]]) -> None:
    require_weights("detector.pt")
    model = CardDetector()
    photos = [
        make_photo(face, BENCH_SEED_BASE + 77 + i, "standard", cid).image
        for i, (cid, face) in enumerate(faces)
    ]
    photos.append(np.full((300, 400, 3), 90, np.uint8))  # no card, another size
    together = model.predict_batch(photos)
    alone = [model.predict_batch([photo])[0] for photo in photos]
    assert len(together) == len(photos) and together[-1] is None and alone[-1] is None
    for a, b in zip(together[:-1], alone[:-1], strict=True):
        assert a is not None and b is not None and a.shape == (4, 2) and a.dtype == np.float32
        # oneDNN sums in a batch-size-dependent order; on an AVX-512 Xeon that moved a corner 0.0011 px.
        # A hundredth of a pixel still catches any real mix-up between a batch's photos.
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-2)
    assert model.predict_batch([]) == [] and model.locate(photos[0]) is not None


def test_reader_batches_of_any_size_read_the_same(faces: list[tuple[str, np.ndarray]]) -> None:
    require_weights("ocr.pt")
    model = PrintReader()
    images = [face for _, face in faces] + [faces[0][1][::2, ::2].copy()]  # and a half-size face
    together = model.predict_batch(images, footers=[["BS 001/102"]] * len(images))
    alone = [model.read_batch([face], [["BS 001/102"]])[0] for face in images]
    assert [r.name for r in together] == [r.name for r in alone]
    assert [(r.set_code, r.number, r.printed_total) for r in together] == [
        (r.set_code, r.number, r.printed_total) for r in alone
    ]
    for a, b in zip(together, alone, strict=True):
        assert a.name_confidence == pytest.approx(b.name_confidence, abs=1e-4)
        assert a.footer_scores.keys() == {"BS 001/102"}
        assert a.footer_scores["BS 001/102"] == pytest.approx(b.footer_scores["BS 001/102"], abs=1e-2)
    assert model.predict_batch([]) == []
