"""Training the face check end to end on a few real faces: cuts, a short run, the bound, the export that
serving loads (OpenCV's DNN module), and a manifest that says what it was trained and chosen on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from training.renders import SHARED, render_catalog

needs_faces = pytest.mark.skipif(
    not (SHARED / "catalog").exists(), reason=f"{SHARED}/catalog absent: no real card faces"
)


def test_choose_bound_refuses_at_most_the_share_asked_pooled_and_per_kind() -> None:
    from training.face_check.train import choose_bound

    faces = {"standard": np.linspace(0.5, 1.0, 200), "harsh": np.linspace(0.01, 1.0, 100)}
    bound = choose_bound(faces, 0.01)
    pooled = np.concatenate(list(faces.values()))
    assert (pooled < bound).mean() <= 0.01
    assert all((s < bound).mean() <= 0.02 for s in faces.values())
    assert bound > 0.01  # not simply zero: one harsh face may be refused (1% of it)
    assert choose_bound(faces, 0.0) <= 0.01


@needs_faces
def test_a_short_run_writes_a_check_that_serving_loads(tmp_path: Path) -> None:
    from models.face_check import INPUT_SIZE, FaceCheck
    from training.face_check import train

    renders = tmp_path / "renders"
    manifest = render_catalog(SHARED / "catalog", renders, ["base2"], limit=30, progress=False)
    out = tmp_path / "face_check.onnx"
    argv = ["--manifest", str(manifest), "--out", str(out), "--data", str(tmp_path / "cuts")]
    argv += ["--per-kind", "2", "--empty", "2", "--val-per-kind", "2", "--val-empty", "2"]
    argv += ["--epochs", "1", "--batch", "8", "--workers", "1", "--threads", "1"]
    assert train.main(argv) == 0
    kept = dict(np.load(tmp_path / "cuts" / "train-2-2.npz"))
    assert kept["cuts"].shape[1:] == (INPUT_SIZE[1], INPUT_SIZE[0], 3)
    assert (kept["labels"] == 1).sum() == 2 * 6  # two photos of each card kind
    assert (kept["labels"] == 0).sum() >= 2  # every empty scene gives at least its detectors' candidates
    written = json.loads(out.with_suffix(".json").read_text())
    check = FaceCheck(out)
    assert check.bound == written["bound"] and written["version"] == check.version
    assert set(written["validation"]) == {"standard", "hard", "hard-v1", "harsh", "held", "foil", "empty"}
    scores = check.scores(list(kept["cuts"][:4]))
    assert scores.shape == (4,) and np.all((scores > 0) & (scores < 1))


@needs_faces
def test_a_stranger_is_a_card_face_the_catalog_does_not_have() -> None:
    """`stranger_face`: drawn by the catalog's renderer with a made-up name, so a new artwork; the same seed
    draws the same face, and the face check takes it for a face (what only the close bound can refuse)."""
    from catalog_api.ingest.feed import feed_path, read_jsonl
    from models.face_check import FaceCheck, cut
    from models.geometry import FACE_SIZE, face_corners
    from training.renders import load_renderer, stranger_card, stranger_face

    seeds = (20_000_000, 20_000_001)
    faces = [stranger_face(seed) for seed in seeds]
    assert faces[0].shape == (FACE_SIZE[1], FACE_SIZE[0], 3)
    assert np.array_equal(faces[0], stranger_face(seeds[0])) and not np.array_equal(*faces)
    renderer = load_renderer()
    catalog = read_jsonl(feed_path(SHARED / "catalog", "cards"))
    keys, ids = {renderer.artwork_key(c) for c in catalog}, {c["id"] for c in catalog}
    sets = {e["id"] for e in read_jsonl(feed_path(SHARED / "catalog", "expansions"))}
    for seed in seeds:
        card, expansion, _ = stranger_card(seed)
        assert renderer.artwork_key(card) not in keys and card["id"] not in ids
        assert card["expansion_id"] == expansion["id"] and expansion["id"] not in sets
    check = FaceCheck()
    corners = face_corners()
    assert all(check.passes([cut(face, corners) for face in faces]))
