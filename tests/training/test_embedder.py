"""The shipped embedder and the FAISS index on real catalog faces (base1, drawn by ../shared's renderer)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from models.embedder import WEIGHTS, CardEmbedder, prepare
from models.geometry import read_face
from models.index import CardIndex
from training.embedder.data import EVAL_SEED_BASE, Card, PairDataset, PhotoMix, degrade
from training.renders import DEFAULT_CACHE, SHARED, read_manifest, render_catalog
from training.synth import Difficulty, photo_view

N_FACES = 30
# Measured with older weights (7a969b3bf66f) on these 30 faces: 30/30 for each of six sets of held-out
# seeds (180/180). Against the whole 21k catalog it is ~95.5% (models/weights/embedder.json); the bar
# leaves three misses of room for a retrained model.
MIN_TOP1 = 0.9

pytestmark = [
    pytest.mark.skipif(
        not (SHARED / "catalog").exists(), reason=f"{SHARED}/catalog absent: no real card faces"
    ),
    pytest.mark.skipif(
        not WEIGHTS.exists(), reason=f"{WEIGHTS} absent: train with python -m training.embedder.train"
    ),
]


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Path, str]]:
    """(card id, high.jpg, artwork key) for the first base1 cards: from the render cache, else rendered."""
    cache = DEFAULT_CACHE / "catalog"
    manifest = read_manifest(cache / "manifest.jsonl") if (cache / "manifest.jsonl").exists() else {}
    found = [
        (cid, cache / info["high"], info["artwork_key"])
        for cid, info in manifest.items()
        if cid.startswith("base1-") and (cache / info["high"]).exists()
    ]
    if len(found) >= N_FACES:
        return sorted(found, key=lambda f: int(f[0].split("-")[1]))[:N_FACES]
    out = tmp_path_factory.mktemp("renders")
    rendered = read_manifest(
        render_catalog(SHARED / "catalog", out, ["base1"], limit=N_FACES, progress=False)
    )
    return [(cid, out / info["high"], info["artwork_key"]) for cid, info in rendered.items()]


@pytest.fixture(scope="module")
def embedder() -> CardEmbedder:
    return CardEmbedder()


@pytest.fixture(scope="module")
def index(embedder: CardEmbedder, faces: list[tuple[str, Path, str]]) -> CardIndex:
    return CardIndex.build(embedder, [(cid, path) for cid, path, _ in faces], batch_size=8, progress=False)


def test_vectors_are_unit_norm_and_deterministic(
    embedder: CardEmbedder, faces: list[tuple[str, Path, str]]
) -> None:
    images = [read_face(path) for _, path, _ in faces[:8]]
    first, second = embedder.embed_batch(images), embedder.embed_batch(images)
    assert first.shape == (8, embedder.dim) and first.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(first, second)
    assert len(embedder.version) == 12
    int(embedder.version, 16)


def test_degraded_photo_finds_its_artwork(
    embedder: CardEmbedder, index: CardIndex, faces: list[tuple[str, Path, str]]
) -> None:
    art = {cid: key for cid, _, key in faces}
    photos = [degrade(read_face(path), EVAL_SEED_BASE + 777_000 + i) for i, (_, path, _) in enumerate(faces)]
    hits = index.search(embedder.embed_batch(photos), k=5)
    right = [art[row[0][0]] == key for row, (_, _, key) in zip(hits, faces, strict=True)]
    assert sum(right) / len(right) >= MIN_TOP1, f"{sum(right)}/{len(right)} photos found their artwork first"
    for row in hits:
        assert [s for _, s in row] == sorted((s for _, s in row), reverse=True)


def test_hard_phone_photo_finds_its_artwork(
    embedder: CardEmbedder, index: CardIndex, faces: list[tuple[str, Path, str]]
) -> None:
    """The scanner's own view of a hard photo (glare, heavy blur, small in frame, sleeve), rectified from
    corners off by up to 2% of the card's height: the pairs the GPU run trained on half of, and #13's
    harder bucket the CPU run after it (training/embedder/cpu-hard.yaml). Both buckets are asked for."""
    art = {cid: key for cid, _, key in faces}
    buckets: tuple[Difficulty, ...] = ("hard", "hard-v1")
    for bucket in buckets:
        photos = [
            photo_view(read_face(path), EVAL_SEED_BASE + 778_000 + i, bucket, 1.0, corner_error=0.02)
            for i, (_, path, _) in enumerate(faces)
        ]
        assert all(p.shape == (838, 600, 3) for p in photos)
        hits = index.search(embedder.embed_batch(photos), k=1)
        right = [art[row[0][0]] == key for row, (_, _, key) in zip(hits, faces, strict=True)]
        assert sum(right) / len(right) >= MIN_TOP1, f"{bucket}: {sum(right)}/{len(right)} found their artwork"


def test_save_load_round_trip(
    embedder: CardEmbedder, index: CardIndex, faces: list[tuple[str, Path, str]], tmp_path: Path
) -> None:
    queries = embedder.embed_batch(
        [degrade(read_face(p), EVAL_SEED_BASE + 778_000 + i) for i, (_, p, _) in enumerate(faces[:10])]
    )
    index.save(tmp_path / "index")
    index.save(tmp_path / "index")  # overwriting an existing index swaps it in whole
    loaded = CardIndex.load(tmp_path / "index")
    assert sorted(p.name for p in (tmp_path / "index").iterdir()) == ["index.faiss", "meta.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["index"], "no temp or old directories left behind"
    meta = json.loads((tmp_path / "index" / "meta.json").read_text())
    assert (
        meta["count"] == N_FACES
        and meta["dim"] == embedder.dim
        and meta["embedder_version"] == embedder.version
    )
    assert loaded.card_ids == index.card_ids and loaded.embedder_version == index.embedder_version
    assert loaded.search(queries, k=5) == index.search(queries, k=5)


def test_upsert_replaces_a_cards_vector(embedder: CardEmbedder, faces: list[tuple[str, Path, str]]) -> None:
    pairs = [(cid, path) for cid, path, _ in faces[:10]]
    index = CardIndex.build(embedder, pairs, progress=False)
    (a, face_a), (b, face_b) = pairs[0], pairs[1]
    query = embedder.embed_batch([read_face(face_b)])
    assert index.search(query, k=1)[0][0][0] == b
    assert index.upsert(embedder, [(a, face_b)]) == 1  # card a now carries b's face
    top = dict(index.search(query, k=2)[0])
    assert set(top) == {a, b} and top[a] == pytest.approx(top[b], abs=1e-5)
    assert len(index) == 10 and index.card_ids[0] == a
    assert index.upsert(embedder, [(a, face_a), ("new-1", face_b)]) == 2
    assert len(index) == 11 and index.search(embedder.embed_batch([read_face(face_a)]), k=1)[0][0][0] == a


class _Flaky:
    """An embedder that dies after `fail_after` batches and counts the batches it embeds."""

    def __init__(self, inner: CardEmbedder, fail_after: int | None) -> None:
        self.inner, self.fail_after, self.calls = inner, fail_after, 0
        self.dim, self.version = inner.dim, inner.version

    def embed_batch(self, images: list[np.ndarray]) -> np.ndarray:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise KeyboardInterrupt("simulated interruption")
        self.calls += 1
        return self.inner.embed_batch(images)


def test_interrupted_build_resumes(
    embedder: CardEmbedder, index: CardIndex, faces: list[tuple[str, Path, str]], tmp_path: Path
) -> None:
    pairs = [(cid, path) for cid, path, _ in faces]  # 30 faces, batches of 8: 4 batches
    with pytest.raises(KeyboardInterrupt):
        CardIndex.build(_Flaky(embedder, 2), pairs, batch_size=8, checkpoint_dir=tmp_path, progress=False)  # type: ignore[arg-type]
    assert len(list(tmp_path.glob("batch-*.npz"))) == 2
    resumed = _Flaky(embedder, None)
    rebuilt = CardIndex.build(resumed, pairs, batch_size=8, checkpoint_dir=tmp_path, progress=False)  # type: ignore[arg-type]
    assert resumed.calls == 2, "only the two unfinished batches are embedded again"
    queries = embedder.embed_batch([read_face(p) for _, p in pairs[::3]])
    assert rebuilt.card_ids == index.card_ids
    assert rebuilt.search(queries, k=3) == index.search(queries, k=3)


def test_training_pairs_draw_hard_v1_and_harsh_only_when_asked(faces: list[tuple[str, Path, str]]) -> None:
    """`PhotoMix.hard_v1_p` and `harsh_p` turn that share of the hard photo pairs into hard-v1 or harsh
    (#43) ones; at 0 (every run before training/embedder/cpu-hard.yaml) each pair's photo is #13's hard
    view of the same seed."""
    cards = [Card(cid, key, path, path) for cid, path, key in faces[:3]]
    items = [(i, 4_000 + i) for i in range(len(cards))]
    photos = {}
    cases: tuple[tuple[float, float, Difficulty], ...] = (
        (0.0, 0.0, "hard"),
        (1.0, 0.0, "hard-v1"),
        (0.0, 1.0, "harsh"),
    )
    for hard_v1_p, harsh_p, bucket in cases:
        mix = PhotoMix(photo_p=1.0, hard_p=1.0, hard_v1_p=hard_v1_p, harsh_p=harsh_p)
        dataset = PairDataset(cards, mix=mix)
        photos[bucket] = [dataset[item][1] for item in items]
        for (i, seed), photo in zip(items, photos[bucket], strict=True):
            view = photo_view(read_face(cards[i].high), 2 * seed, bucket, 0.5, 0.02)
            np.testing.assert_array_equal(photo, prepare(view, dataset.size))
    for a, b in (("hard", "hard-v1"), ("hard", "harsh"), ("hard-v1", "harsh")):
        assert not any(np.array_equal(x, y) for x, y in zip(photos[a], photos[b], strict=True)), (a, b)


def test_training_pairs_draw_foil_and_holders_only_when_asked(faces: list[tuple[str, Path, str]]) -> None:
    """`PhotoMix.foil_p` prints that share of the photos' cards on foil and `holder_p` puts that share of
    the harsh photos' cards in a toploader or a binder pocket (#43); at 0 each pair is what it was."""
    cards = [Card(cid, key, path, path) for cid, path, key in faces[:2]]
    items = [(i, 5_000 + i) for i in range(len(cards))]

    def photos(**mix: float) -> list[np.ndarray]:
        dataset = PairDataset(cards, mix=PhotoMix(photo_p=1.0, hard_p=1.0, harsh_p=1.0, **mix))
        return [dataset[item][1] for item in items]

    plain, foil, held = photos(), photos(foil_p=1.0), photos(holder_p=1.0)
    size = PairDataset(cards).size
    for (i, seed), photo in zip(items, plain, strict=True):
        view = photo_view(read_face(cards[i].high), 2 * seed, "harsh", 0.5, 0.02)
        np.testing.assert_array_equal(photo, prepare(view, size))
    assert not any(np.array_equal(x, y) for x, y in zip(plain, foil, strict=True))
    assert not any(np.array_equal(x, y) for x, y in zip(plain, held, strict=True))


def test_evaluation_draws_held_and_foil_queries_as_the_detectors_evaluation_does(
    faces: list[tuple[str, Path, str]],
) -> None:
    """`training.embedder.evaluate --photos held|foil` (#43): a held query is the harsh photo of the same
    seed with the card in a holder, a foil query the standard photo with the card printed on foil."""
    from training.embedder.evaluate import PHOTO_KINDS, query_photo

    assert {"held", "foil"} <= set(PHOTO_KINDS)
    card = Card(faces[0][0], faces[0][2], faces[0][1], faces[0][1])
    seed = EVAL_SEED_BASE + 31_000
    for kind, plain in (("held", "harsh"), ("foil", "standard")):
        view, base = query_photo(card, seed, kind), query_photo(card, seed, plain)
        assert view.shape == base.shape
        assert float(np.abs(view.astype(np.float32) - base.astype(np.float32)).mean()) > 2.0, kind


def test_evaluation_moves_the_query_corners_as_far_as_asked(faces: list[tuple[str, Path, str]]) -> None:
    """`training.embedder.evaluate --corner-error` (#43): unset, the queries are the photo pairs' own view
    (PhotoMix's corner error); set higher, the same photo is cut with its corners further off, the
    detector's residue on glared and held photos."""
    from training.embedder.evaluate import query_photo

    card = Card(faces[0][0], faces[0][2], faces[0][1], faces[0][1])
    seed = EVAL_SEED_BASE + 32_000
    default = query_photo(card, seed, "harsh")
    np.testing.assert_array_equal(default, query_photo(card, seed, "harsh", PhotoMix().corner_error))
    far = query_photo(card, seed, "harsh", 0.08)
    assert far.shape == default.shape
    assert float(np.abs(far.astype(np.float32) - default.astype(np.float32)).mean()) > 2.0


def test_a_teacher_holds_the_clean_faces_while_photos_learn(faces: list[tuple[str, Path, str]]) -> None:
    """`train.teacher`: the frozen teacher embeds clean faces as the shipped embedder does; a training step
    moves the student, never the teacher; and the distillation term is what pulls the student's clean
    faces back where the teacher has them (zero where they agree)."""
    import torch

    from models.embedder_net import build_net, to_tensor
    from training.embedder.train import distill_loss, info_nce, load_teacher

    model = torch.load(WEIGHTS, map_location="cpu", weights_only=False)["model"]
    teacher = load_teacher(str(WEIGHTS), model, torch.device("cpu"))  # an absolute path, or the repo's
    assert teacher is not None and load_teacher("", model, torch.device("cpu")) is None
    size = tuple(model["input_size"])
    clean = to_tensor([prepare(read_face(path), size) for _, path, _ in faces[:8]])
    photos = to_tensor(
        [
            prepare(degrade(read_face(path), EVAL_SEED_BASE + i), size)
            for i, (_, path, _) in enumerate(faces[:8])
        ]
    )
    shipped = CardEmbedder().embed_batch([read_face(path) for _, path, _ in faces[:8]])
    with torch.no_grad():
        teacher_k = teacher(clean)
    assert np.allclose(teacher_k.numpy(), shipped, atol=1e-3)

    student = build_net(model)
    student.load_state_dict(teacher.state_dict())
    student.eval()  # batch norm's running statistics fixed: 8 faces are no batch to learn them from
    with torch.no_grad():
        assert float(distill_loss(student(clean), teacher_k)) < 1e-6
    before = [p.detach().clone() for p in teacher.parameters()]
    opt = torch.optim.SGD(student.parameters(), lr=0.1)
    arts = torch.arange(8)
    for _ in range(3):
        # a soft temperature: at training's 0.05 eight such photos already sit on their faces (loss ~1e-6)
        loss = info_nce(student(photos), teacher_k, arts, None, 1.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert all(torch.equal(a, b) for a, b in zip(before, teacher.parameters(), strict=True))
    with torch.no_grad():
        drift = float(distill_loss(student(clean), teacher_k))
    assert drift > 1e-4  # the photo loss alone moved the student's clean faces off the teacher's
    for _ in range(5):
        loss = distill_loss(student(clean), teacher_k)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        assert float(distill_loss(student(clean), teacher_k)) < drift / 2
