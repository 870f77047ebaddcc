"""The shipped card detector on held-out synthetic photos of real catalog faces (base1, never trained on)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from models.detector import WEIGHTS, CardDetector, DetectorConfig, search_windows
from models.geometry import read_face, rectify
from models.quads import apply, zoom_plan
from training.detector.evaluate import corner_error_pct
from training.renders import DEFAULT_CACHE, SHARED, read_manifest, render_catalog
from training.synth import BENCH_SEED_BASE, make_nocard_photo, make_photo

N_FACES = 6
N_PHOTOS = 30
N_NOCARD = 20
# Set with unet224-v2 (57 CPU minutes in all) on these photos: 30/30 found, all within 5% of the card
# height (mean error 0.29%, worst 1.14%); 0/20 no-card photos gave a quad. The shipped unet224-v4 (35 more
# minutes on an H100) benchmarks 100% found and 100% within 5% on standard photos, 0% false detections
# (models/weights/detector.json, 300 photos a kind). The bars leave room for a retrained model's noise
# (27/30, 0.8%, 1/20) while still failing the weights before v2 (22/30 within 5%, 2/20 false quads).
MIN_GOOD = 0.9
GOOD_PCT = 5.0
MAX_MEAN_GOOD_PCT = 0.8
MAX_FALSE = 1

# #13's hard bucket (base1 faces, seeds BENCH_SEED_BASE + 400.. and scenes + 600..): unet224-v5, trained
# before that bucket existed, put 36/40 photos' corners within 5% and found a card in 3/40 scenes of
# look-alike cards; unet224-v7-cpu, fine-tuned on it, 40/40 and 0/40. The bars leave two photos and one
# scene of room for a retrained model's noise and still fail v5.
N_HARD = 40
MIN_GOOD_HARD = 0.95
MAX_FALSE_HARD = 1

needs_shared = pytest.mark.skipif(
    not (SHARED / "catalog").exists(), reason=f"{SHARED}/catalog absent: no real card faces"
)
needs_weights = pytest.mark.skipif(
    not WEIGHTS.exists(), reason=f"{WEIGHTS} absent: train with python -m training.detector.train"
)


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    """The first base1 faces: from the render cache when it has them, else rendered here."""
    cache = DEFAULT_CACHE / "catalog"
    manifest = read_manifest(cache / "manifest.jsonl") if (cache / "manifest.jsonl").exists() else {}
    paths = sorted(
        (cache / info["high"] for cid, info in manifest.items() if cid.startswith("base1-")),
        key=lambda p: int(p.parent.name.split("-")[1]),
    )
    paths = [p for p in paths if p.exists()][:N_FACES]
    if len(paths) < N_FACES:
        out = tmp_path_factory.mktemp("renders")
        rendered = read_manifest(
            render_catalog(SHARED / "catalog", out, ["base1"], limit=N_FACES, progress=False)
        )
        paths = [out / info["high"] for info in rendered.values()]
    return [read_face(Path(p)) for p in paths]


@pytest.fixture(scope="module")
def detector() -> CardDetector:
    return CardDetector()


@needs_shared
def test_make_photo_is_deterministic(faces: list[np.ndarray]) -> None:
    for difficulty in ("standard", "hard"):
        a = make_photo(faces[0], BENCH_SEED_BASE + 7, difficulty)  # type: ignore[arg-type]
        b = make_photo(faces[0], BENCH_SEED_BASE + 7, difficulty)  # type: ignore[arg-type]
        assert np.array_equal(a.image, b.image) and np.array_equal(a.corners, b.corners)
        assert a.image.dtype == np.uint8 and a.image.ndim == 3 and a.image.shape[2] == 3
        assert a.corners is not None and a.corners.shape == (4, 2) and a.corners.dtype == np.float32
    other = make_photo(faces[0], BENCH_SEED_BASE + 8)
    assert other.image.shape != a.image.shape or not np.array_equal(other.image, a.image)
    assert np.array_equal(make_nocard_photo(BENCH_SEED_BASE).image, make_nocard_photo(BENCH_SEED_BASE).image)
    assert make_nocard_photo(BENCH_SEED_BASE).corners is None


@needs_shared
def test_rectify_with_true_corners_gives_the_face(faces: list[np.ndarray]) -> None:
    photo = make_photo(faces[1], BENCH_SEED_BASE + 11)
    assert photo.corners is not None
    face = rectify(photo.image, photo.corners)
    assert face.shape == (838, 600, 3) and face.dtype == np.uint8
    # Lighting, blur, noise and JPEG change pixels, not the layout: blurred, the two agree.
    a = cv2.GaussianBlur(face.astype(np.float32).mean(2), (0, 0), 3)
    b = cv2.GaussianBlur(faces[1].astype(np.float32).mean(2), (0, 0), 3)
    assert np.corrcoef(a.ravel(), b.ravel())[0, 1] > 0.8


@needs_shared
@needs_weights
def test_detector_finds_cards_precisely(faces: list[np.ndarray], detector: CardDetector) -> None:
    photos = [make_photo(faces[i % len(faces)], BENCH_SEED_BASE + 100 + i) for i in range(N_PHOTOS)]
    quads = detector.locate_batch([p.image for p in photos])
    errors = []
    for photo, quad in zip(photos, quads, strict=True):
        if quad is None:
            continue
        assert photo.corners is not None and quad.shape == (4, 2) and quad.dtype == np.float32
        sides = np.linalg.norm(quad - np.roll(quad, -1, axis=0), axis=1)
        assert sides[0] + sides[2] < sides[1] + sides[3], "long side must be vertical (portrait)"
        errors.append(corner_error_pct(quad, photo.corners))
    good = [e for e in errors if e < GOOD_PCT]
    assert len(good) >= MIN_GOOD * N_PHOTOS, errors
    assert float(np.mean(good)) < MAX_MEAN_GOOD_PCT, good


@needs_shared
@needs_weights
def test_detector_finds_cards_in_hard_photos(faces: list[np.ndarray], detector: CardDetector) -> None:
    """#13's hard bucket: any rotation, the card 15-35% of the frame, glare, fingers, sleeves, look-alikes."""
    photos = [make_photo(faces[i % len(faces)], BENCH_SEED_BASE + 400 + i, "hard") for i in range(N_HARD)]
    quads = detector.locate_batch([p.image for p in photos])
    errors = [
        corner_error_pct(q, p.corners)
        for p, q in zip(photos, quads, strict=True)
        if q is not None and p.corners is not None
    ]
    good = [e for e in errors if e < GOOD_PCT]
    assert len(good) >= MIN_GOOD_HARD * N_HARD, errors
    scenes = [make_nocard_photo(BENCH_SEED_BASE + 600 + i, hard_bucket="hard") for i in range(N_HARD)]
    false = [q is not None for q in detector.locate_batch([p.image for p in scenes])]
    assert sum(false) <= MAX_FALSE_HARD, false


@needs_weights
def test_detector_rarely_finds_a_card_where_there_is_none(detector: CardDetector) -> None:
    photos = [make_nocard_photo(BENCH_SEED_BASE + 200 + i) for i in range(N_NOCARD)]
    found = [q is not None for q in detector.locate_batch([p.image for p in photos])]
    assert sum(found) <= MAX_FALSE, found
    assert detector.locate_batch([]) == []


def views_and_corners_agree(
    faces: list[np.ndarray], fewer: CardDetector, every: CardDetector
) -> dict[str, int]:
    """How many views each detector puts through its network on 8 standard photos, after checking that
    both find the same cards with corners within 0.5% of the card's height of each other."""
    photos = [make_photo(faces[i % len(faces)], BENCH_SEED_BASE + 300 + i).image for i in range(8)]
    views = {"fewer": 0, "every": 0}

    def counting(key: str, detector: CardDetector) -> None:
        predict = detector._infer_views

        def counted(batch: list[np.ndarray]) -> np.ndarray:
            views[key] += len(batch)
            return predict(batch)

        detector._infer_views = counted  # type: ignore[method-assign]

    counting("fewer", fewer)
    counting("every", every)
    for a, b in zip(fewer.locate_batch(photos), every.locate_batch(photos), strict=True):
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            assert corner_error_pct(a, b) < 0.5
    return views


@needs_shared
@needs_weights
def test_settled_quads_skip_the_remaining_passes(faces: list[np.ndarray]) -> None:
    """A quad that stopped moving ends its refinement early: fewer views through the network, the same
    corners (within 0.5% of the card's height) as running every pass."""
    settling, every = CardDetector(), CardDetector()
    assert settling.cfg.settle > 0 and settling.cfg.refine_passes > 2
    every.cfg = dataclasses.replace(every.cfg, settle=0.0, settle_coarse=0.0)
    views = views_and_corners_agree(faces, settling, every)
    assert views["fewer"] < views["every"], views


@needs_shared
@needs_weights
def test_a_first_look_that_barely_moved_the_coarse_quad_ends_refinement(faces: list[np.ndarray]) -> None:
    """With `settle_coarse` on, a first zoomed look that moved no corner of the coarse quad by that share
    of the card's size ends refinement (the next view would be drawn from nearly the same quad): fewer
    views through the network, the corners within 0.5% of refining."""
    skipping, refining = CardDetector(), CardDetector()
    assert refining.cfg.settle_coarse == 0.0  # off by default (DetectorConfig.settle_coarse says why)
    skipping.cfg = dataclasses.replace(skipping.cfg, settle_coarse=0.01)
    views = views_and_corners_agree(faces, skipping, refining)
    assert views["fewer"] < views["every"], views


@pytest.mark.parametrize(("h", "w"), [(1200, 1600), (4000, 3000), (720, 960)])
def test_the_second_looks_windows_cover_the_photo_upright_at_the_views_resolution(h: int, w: int) -> None:
    """Each window's view (drawn as `zoom_view` draws one for a quad) is an upright, unskewed square of
    `search_span` of the photo's long side inside the photo, and together they cover all of it."""
    cfg = DetectorConfig(search_tiles=2)
    size = cfg.input_size
    edges = np.array([[-0.5, -0.5], [size - 0.5, -0.5], [size - 0.5, size - 0.5], [-0.5, size - 0.5]])
    side = cfg.search_span * max(h, w)
    covered = np.zeros((h // 10, w // 10), bool)
    windows = search_windows(h, w, cfg)
    assert len(windows) == 4
    for window in windows:
        plan = zoom_plan(h, w, 1.0, window, size, cfg.zoom_fill, 1.0)
        foot = apply(np.linalg.inv(plan.to_view), edges.astype(np.float32))
        x0, y0 = foot.min(0)
        x1, y1 = foot.max(0)
        assert np.allclose(foot, [[x0, y0], [x1, y0], [x1, y1], [x0, y1]], atol=0.05)  # upright square
        assert x1 - x0 == pytest.approx(side, rel=1e-3) and y1 - y0 == pytest.approx(side, rel=1e-3)
        assert x0 >= -1 and y0 >= -1 and x1 <= max(w, side) + 1 and y1 <= max(h, side) + 1
        covered[max(0, int(y0)) // 10 : int(y1) // 10 + 1, max(0, int(x0)) // 10 : int(x1) // 10 + 1] = True
    assert covered.all()
    assert len(search_windows(h, w, DetectorConfig(search_tiles=3, search_span=0.45))) == 9


def small_card_photo(face: np.ndarray, frac: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A 1600x1200 photo of one card `frac` of the photo's height tall, turned up to 30 degrees, on a
    mottled background: at 15% the letterboxed first look (224 px) has ~25 px of its height."""
    rng = np.random.default_rng(seed)
    h, w = 1200, 1600
    noise = rng.normal(0, 1, (h // 40, w // 40, 3)) * 30 + rng.integers(60, 200, 3)
    image = cv2.resize(noise.clip(0, 255).astype(np.uint8), (w, h), interpolation=cv2.INTER_CUBIC)
    ch = frac * h
    cw = ch * face.shape[1] / face.shape[0]
    a = np.deg2rad(rng.uniform(-30, 30))
    turn = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    rect = np.array([[-cw / 2, -ch / 2], [cw / 2, -ch / 2], [cw / 2, ch / 2], [-cw / 2, ch / 2]])
    quad = (rect @ turn.T + [rng.uniform(0.2, 0.8) * w, rng.uniform(0.2, 0.8) * h]).astype(np.float32)
    fh, fw = face.shape[:2]
    src = np.array([[-0.5, -0.5], [fw - 0.5, -0.5], [fw - 0.5, fh - 0.5], [-0.5, fh - 0.5]], np.float32)
    hom = cv2.getPerspectiveTransform(src, quad)
    card = cv2.warpPerspective(face, hom, (w, h), flags=cv2.INTER_AREA)
    inside = cv2.warpPerspective(np.ones((fh, fw), np.uint8), hom, (w, h)) > 0
    image[inside] = card[inside]
    return image, quad


@needs_shared
@needs_weights
def test_a_card_too_small_for_the_first_look_is_found_by_the_second(faces: list[np.ndarray]) -> None:
    """Cards 15% of the photo's height: the first look alone finds two of eight (measured, one or two
    torch threads); with the second look (the default) all eight, corners within 0.25% of the card's
    height, with views cut by OpenCV or by torch. The bars leave a photo of room each way."""
    photos = [small_card_photo(faces[i % len(faces)], 0.15, 100 + i) for i in range(8)]
    first_only, both = CardDetector(), CardDetector()
    assert both.cfg.search_tiles == 2
    first_only.cfg = dataclasses.replace(first_only.cfg, search_tiles=0)
    assert sum(q is not None for q in first_only.locate_batch([p for p, _ in photos])) <= 3
    # As arrays (OpenCV cuts the views) and as tensors (torch cuts them, as on a GPU replica).
    for pixels in ([p for p, _ in photos], [torch.from_numpy(p).permute(2, 0, 1) for p, _ in photos]):
        found = both.locate_batch(pixels)
        good = [
            q is not None and corner_error_pct(q, truth) < GOOD_PCT
            for q, (_, truth) in zip(found, photos, strict=True)
        ]
        assert sum(good) >= 7, good


@needs_shared
@needs_weights
def test_photos_the_first_look_finds_get_no_second_look(faces: list[np.ndarray]) -> None:
    """The second look costs only photos with no card found: on standard photos the same views and the
    same corners as without it."""
    both, first_only = CardDetector(), CardDetector()
    first_only.cfg = dataclasses.replace(first_only.cfg, search_tiles=0)
    views = views_and_corners_agree(faces, both, first_only)
    assert views["fewer"] == views["every"] > 0, views


@needs_shared
def test_training_photos_draw_hard_v1_only_when_asked(faces: list[np.ndarray], tmp_path: Path) -> None:
    """`p_hard_v1` turns that share of the hard training photos into hard-v1 ones; a config without it
    (every run before #13's) gets the photos it always did, so resumed and re-run trainings see the same
    data."""
    from models.quads import letterbox
    from training.detector.data import photo_samples
    from training.detector.train import DEFAULTS

    path = tmp_path / "base1-1" / "high.png"
    path.parent.mkdir()
    cv2.imwrite(str(path), cv2.cvtColor(faces[0], cv2.COLOR_RGB2BGR))
    base = {**DEFAULTS["data"], **DEFAULTS["model"], "p_nocard": 0.0, "p_hard": 1.0, "p_crop": 0.0}
    base.pop("p_hard_v1", None)
    seed = 12_345
    without = photo_samples(seed, [path], base)
    zero = photo_samples(seed, [path], {**base, "p_hard_v1": 0.0})
    old = photo_samples(seed, [path], {**base, "p_hard_v1": 1.0})
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(without, zero, strict=True))
    size = base["input_size"]
    expect = {
        kind: letterbox(make_photo(faces[0], seed, kind, "base1-1").image, size)[0]
        for kind in ("hard", "hard-v1")
    }
    assert np.array_equal(without[0][0], expect["hard"])
    assert np.array_equal(old[0][0], expect["hard-v1"])
    assert not np.array_equal(old[0][0], without[0][0])


def test_card_backs_are_marked_without_bands_only_when_asked(tmp_path: Path) -> None:
    """#43 `mark_backs`: a card back in an empty scene is marked as a card with no name or number band
    (what `DetectorConfig.min_bands` refuses), and without the flag it stays a card-free photo, as every
    earlier config drew it; sleeves, toploaders and binder pages stay card-free either way."""
    from training.detector.data import photo_samples
    from training.detector.train import DEFAULTS
    from training.synth import empty_object, make_empty_photo

    seeds = range(20_000, 20_400)
    back = next(s for s in seeds if empty_object(s) == "back")
    sleeve = next(s for s in seeds if empty_object(s) == "sleeve")
    assert make_empty_photo(back, scale=0.5).back is not None
    assert make_empty_photo(sleeve, scale=0.5).back is None
    base = {**DEFAULTS["data"], **DEFAULTS["model"], "p_nocard": 1.0, "p_empty": 1.0, "p_crop": 0.0}
    base["photo_scale"] = (0.5, 0.5)
    path = tmp_path / "base1-1" / "high.png"  # never drawn: every photo here is card-free
    for seed, expect_mask in ((back, True), (sleeve, False)):
        marked = photo_samples(seed, [path], {**base, "mark_backs": True})
        plain = photo_samples(seed, [path], base)
        assert np.array_equal(marked[0][0], plain[0][0])  # the same photo; only its marks differ
        assert all(t.max() == 0 for _, t in plain)
        whole = marked[0][1]
        assert bool(whole[0].sum() > 100) == expect_mask, seed  # the back's area, in the whole-photo view
        assert all(t[1:].max() == 0 for _, t in marked)  # never a band: a back has no face


@needs_shared
def test_training_holders_and_foil_only_if_asked(faces: list[np.ndarray], tmp_path: Path) -> None:
    """#43 `p_holder`: that share of the harsh training photos shows the card in a toploader or a binder
    pocket; `p_foil`: that share of the cards is printed on foil; a config without them gets the photos it
    always did."""
    from training.detector.data import photo_samples
    from training.detector.train import DEFAULTS

    path = tmp_path / "base1-1" / "high.png"
    path.parent.mkdir()
    cv2.imwrite(str(path), cv2.cvtColor(faces[0], cv2.COLOR_RGB2BGR))
    base = {**DEFAULTS["data"], **DEFAULTS["model"], "p_nocard": 0.0, "p_hard": 1.0, "p_harsh": 1.0}
    base.update(p_crop=0.0, zooms=1)
    seed = 12_345
    without = photo_samples(seed, [path], base)
    zero = photo_samples(seed, [path], {**base, "p_holder": 0.0})
    held = photo_samples(seed, [path], {**base, "p_holder": 1.0})
    assert np.array_equal(without[0][0], zero[0][0])
    assert not np.array_equal(without[0][0], held[0][0])
    assert held[0][1][0].sum() > 100  # the card is still marked, inside its holder
    foiled = photo_samples(seed, [path], {**base, "p_foil": 1.0})
    assert not np.array_equal(without[0][0], foiled[0][0])  # `p_foil`: the card printed on foil
    assert np.array_equal(without[0][1], foiled[0][1])  # the same photo otherwise: the same marks
