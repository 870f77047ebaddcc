"""benchmarks/heldout_photos.py: the held-out photo maker's effects, each visible on its own; its ground
truth; determinism; and the rule that keeps it apart from training (issue #43, item 1).

Each effect test renders the same small scene with every effect off (`NEUTRAL_EFFECTS`) and then with
one switched on, and measures what that effect should do. No ../shared needed: faces are made here.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from benchmarks.heldout_photos import (
    BACKGROUNDS,
    NEUTRAL_EFFECTS,
    HeldoutPhoto,
    _draw_look,
    make_heldout_nocard_photo,
    make_heldout_photo,
)

REPO = Path(__file__).resolve().parents[1]
SMALL = {"size": (800, 600)}  # small photos keep the suite fast; the model does not depend on size
RED = (200, 60, 40)


def solid_face(colour: tuple[int, int, int] = RED, corner: tuple[int, int, int] | None = None) -> np.ndarray:
    face = np.zeros((440, 315, 3), np.uint8)
    face[:] = colour
    if corner is not None:
        face[:110, :80] = corner  # the face's top-left quarter-ish, to check the corner order
    return face


def striped_face() -> np.ndarray:
    """Mid-grey stripes (60/160): texture to lose under glare and blur, and nothing clipped without."""
    face = np.full((440, 315, 3), 60, np.uint8)
    for x in range(0, 315, 12):
        face[:, x : x + 6] = 160
    return face


def photo(face: np.ndarray, **effects: Any) -> HeldoutPhoto:
    return make_heldout_photo(face, 7, "standard", "t-1", effects={**NEUTRAL_EFFECTS, **SMALL, **effects})


def nocard(**effects: Any) -> HeldoutPhoto:
    return make_heldout_nocard_photo(7, "standard", effects={**NEUTRAL_EFFECTS, **SMALL, **effects})


def quad_mask(shape: tuple[int, ...], corners: np.ndarray, scale: float = 1.0) -> np.ndarray:
    centre = corners.mean(0)
    pts = (centre + (corners - centre) * scale).round().astype(np.int32)
    mask = np.zeros(shape[:2], np.uint8)
    cv2.fillPoly(mask, [pts], 1)
    return mask.astype(bool)


def window(image: np.ndarray, at: list[float], radius: int = 12) -> np.ndarray:
    x, y = round(at[0]), round(at[1])
    return image[max(0, y - radius) : y + radius + 1, max(0, x - radius) : x + radius + 1].astype(float)


def luma(image: np.ndarray) -> np.ndarray:
    return image.astype(float) @ np.array([0.299, 0.587, 0.114])


def test_corners_are_where_the_card_is_and_in_face_order() -> None:
    face = solid_face(corner=(40, 40, 220))
    for pose in ({}, {"tilt_deg": 40.0, "tilt_axis_deg": 30.0, "roll_deg": 130.0, "center": (0.4, 0.6)}):
        shot = photo(face, **pose)
        assert shot.corners is not None and shot.corners.shape == (4, 2)
        inside = shot.image[quad_mask(shot.image.shape, shot.corners, 0.6)]
        # Away from the blue corner, inside the quad is the face's colour; just outside it is the table.
        lower = quad_mask(shot.image.shape, shot.corners, 0.9) & ~quad_mask(
            shot.image.shape, shot.corners[[0, 1, 3]].mean(0, keepdims=True).repeat(4, 0), 1
        )
        assert np.abs(inside.mean(0) - RED).max() < 25, inside.mean(0)
        ring = quad_mask(shot.image.shape, shot.corners, 1.15) & ~quad_mask(
            shot.image.shape, shot.corners, 1.05
        )
        assert np.abs(shot.image[ring].mean(0) - 124).max() < 6  # flat grey table, linear 0.2
        # The face's own top-left (blue) lies next to corners[0], whatever the roll.
        tl = shot.corners[0] + (shot.corners.mean(0) - shot.corners[0]) * 0.12
        assert window(shot.image, tl.tolist(), 3).mean((0, 1))[2] > 150
        assert lower.any()
    # Mean colour over the whole (shrunk) quad equals the face's colour when everything is off.
    plain = photo(solid_face())
    assert plain.corners is not None
    mean = plain.image[quad_mask(plain.image.shape, plain.corners, 0.95)].mean(0)
    assert np.abs(mean - RED).max() < 3, mean


def test_glare_brightens_and_flattens_where_it_lands() -> None:
    off = photo(striped_face(), glare_target="art")
    on = photo(striped_face(), glare=2.0, glare_target="art", shininess=300.0)
    at = on.effects["glare_at"]
    assert at is not None and off.effects["glare_at"] is None
    lit, unlit = window(luma(on.image), at), window(luma(off.image), at)
    assert lit.mean() > unlit.mean() + 50
    assert lit.std() < 0.6 * unlit.std()  # contrast washed out
    # Far from the spot, on the card, the light is (nearly) unchanged: a lobe, not a global brightening.
    assert on.corners is not None
    far = on.corners[0] + (on.corners.mean(0) - on.corners[0]) * 0.1
    if np.hypot(*(far - np.array(at))) > 150:
        assert (
            abs(
                window(luma(on.image), far.tolist(), 4).mean()
                - window(luma(off.image), far.tolist(), 4).mean()
            )
            < 25
        )


def test_vignetting_darkens_the_corners_of_a_flat_scene() -> None:
    flat, vignetted = nocard(), nocard(vignette=0.8)
    for shot, ratio in ((flat, (0.97, 1.03)), (vignetted, (0.0, 0.85))):
        y = luma(shot.image)
        centre = y[280:320, 380:420].mean()
        corners = np.mean(
            [y[:30, :30].mean(), y[:30, -30:].mean(), y[-30:, :30].mean(), y[-30:, -30:].mean()]
        )
        assert ratio[0] <= corners / centre <= ratio[1], corners / centre


def top_edge_bow(shot: HeldoutPhoto) -> float:
    """How far the card's top edge strays from the straight line between its two top corners (px)."""
    assert shot.corners is not None
    tl, tr = shot.corners[0], shot.corners[1]
    card = shot.image[..., 0].astype(int) - shot.image[..., 2].astype(int) > 80  # red card on grey
    worst = 0.0
    for x in np.linspace(tl[0] + 15, tr[0] - 15, 25):
        rows = np.nonzero(card[:, round(x)])[0]
        chord = tl[1] + (tr[1] - tl[1]) * (x - tl[0]) / (tr[0] - tl[0])
        worst = max(worst, abs(rows.min() - chord))
    return worst


def test_lens_distortion_bends_a_straight_edge() -> None:
    pose = {"center": (0.62, 0.3), "card_fraction": 0.2}
    straight = photo(solid_face(), **pose)
    barrel = photo(solid_face(), distortion=(-0.3, 0.0), **pose)
    assert top_edge_bow(straight) < 1.5
    assert top_edge_bow(barrel) > 2.5
    # The corners still follow the card through the lens.
    assert barrel.corners is not None
    inside = barrel.image[quad_mask(barrel.image.shape, barrel.corners, 0.9)].mean(0)
    assert np.abs(inside - RED).max() < 6


def test_hand_shadow_darkens_its_region() -> None:
    off = photo(solid_face(), ambient=0.3)
    on = photo(solid_face(), ambient=0.3, shadow=0.8)
    at = on.effects["shadow_at"]
    assert at is not None
    assert window(luma(on.image), at).mean() < 0.75 * window(luma(off.image), at).mean()


def test_sensor_noise_raises_local_variance() -> None:
    def grain(shot: HeldoutPhoto) -> float:
        y = luma(shot.image)[200:400, 300:500]
        return float((y - cv2.GaussianBlur(y, (0, 0), 2)).std())

    clean, noisy = nocard(), nocard(iso_gain=20.0)
    assert grain(clean) < 0.8
    assert grain(noisy) > 2.5 * max(grain(clean), 0.5)


def test_lower_jpeg_quality_shrinks_the_file() -> None:
    fine, coarse = photo(striped_face(), jpeg_quality=95), photo(striped_face(), jpeg_quality=30)
    assert len(coarse.jpeg) < 0.6 * len(fine.jpeg)
    assert fine.jpeg[:2] == b"\xff\xd8" and coarse.jpeg[:2] == b"\xff\xd8"


def test_fingers_cover_an_edge_or_corner_in_skin_colour() -> None:
    off = photo(solid_face((60, 120, 220)))
    on = photo(solid_face((60, 120, 220)), fingers=1)
    tips = on.effects["finger_at"]
    assert len(tips) == 1 and off.effects["finger_at"] == []
    # Just behind the tip (toward the hand) the blue card turns to skin: red over blue.
    tip = np.array(tips[0])
    assert on.corners is not None
    outward = tip - on.corners.mean(0)
    behind = (tip + outward / np.linalg.norm(outward) * 15).tolist()
    skin, card = window(on.image, behind, 3).mean((0, 1)), window(off.image, behind, 3).mean((0, 1))
    assert skin[0] > skin[2] and np.abs(skin - card).max() > 40


def ring_change(a: HeldoutPhoto, b: HeldoutPhoto, inner: float, outer: float) -> float:
    assert a.corners is not None
    ring = quad_mask(a.image.shape, a.corners, outer) & ~quad_mask(a.image.shape, a.corners, inner)
    return float(np.abs(a.image[ring].astype(float) - b.image[ring].astype(float)).mean())


def test_holders_show_around_the_card() -> None:
    bare = photo(solid_face())
    toploader = photo(solid_face(), holder="toploader")
    sleeve = photo(solid_face(), holder="sleeve", glare=1.0, glare_target="art")
    binder = photo(solid_face(), holder="binder")
    # The toploader's wall and film change a band around the card; far away the table is untouched.
    assert ring_change(toploader, bare, 1.03, 1.12) > 8
    assert np.abs(toploader.image[:40, :40].astype(float) - bare.image[:40, :40]).mean() < 2
    # The sleeve's film covers the card (haze, tint, edges): the card is no longer the bare colour.
    assert sleeve.corners is not None
    inside = sleeve.image[quad_mask(sleeve.image.shape, sleeve.corners, 0.9)].astype(float)
    assert np.abs(inside - bare.image[quad_mask(bare.image.shape, sleeve.corners, 0.9)]).mean() > 3
    # A binder page (pockets, seams, neighbouring cards) replaces the table.
    outside = ~quad_mask(
        bare.image.shape, bare.corners if bare.corners is not None else np.zeros((4, 2)), 1.3
    )
    assert np.abs(binder.image[outside].astype(float) - bare.image[outside]).mean() > 20
    assert binder.effects["holder"] == "binder"


def test_blur_removes_detail() -> None:
    def detail(shot: HeldoutPhoto) -> float:
        assert shot.corners is not None
        mask = quad_mask(shot.image.shape, shot.corners, 0.7)
        return float(cv2.Laplacian(luma(shot.image), cv2.CV_64F)[mask].var())

    sharp = detail(photo(striped_face()))
    assert detail(photo(striped_face(), defocus_px=4.0)) < 0.3 * sharp
    assert detail(photo(striped_face(), motion_px=12.0, motion_deg=0.0)) < 0.3 * sharp


def test_sharpening_adds_detail_and_denoise_removes_noise() -> None:
    def detail(shot: HeldoutPhoto) -> float:
        return float(cv2.Laplacian(luma(shot.image), cv2.CV_64F)[150:450, 250:550].var())

    base = photo(striped_face(), defocus_px=1.5)
    assert detail(photo(striped_face(), defocus_px=1.5, sharpen=1.5)) > 1.3 * detail(base)
    noisy = nocard(iso_gain=20.0)
    assert detail(nocard(iso_gain=20.0, denoise=1.0)) < 0.7 * detail(noisy)


def test_white_balance_and_exposure_errors() -> None:
    grey = nocard().image.reshape(-1, 3).mean(0)
    warm = nocard(wb_gains=(1.25, 1.0, 0.8)).image.reshape(-1, 3).mean(0)
    dark = nocard(exposure_ev=-1.0).image.reshape(-1, 3).mean(0)
    assert warm[0] / warm[2] > 1.15 * grey[0] / grey[2]
    assert dark.mean() < 0.8 * grey.mean()


def test_every_background_is_textured_and_distinct() -> None:
    means = []
    for background in BACKGROUNDS:
        shot = nocard(background=background, clutter=3, neighbours=2)
        assert shot.corners is None and shot.card_id is None
        assert luma(shot.image).std() > 4, background
        means.append(shot.image.reshape(-1, 3).mean(0))
    assert len({tuple(np.round(m)) for m in means}) == len(BACKGROUNDS)


def test_same_seed_same_bytes_and_seeds_differ() -> None:
    face = striped_face()
    for kind in ("standard", "hard"):
        a = make_heldout_photo(face, 123, kind, "x-1")
        b = make_heldout_photo(face, 123, kind, "x-1")
        c = make_heldout_photo(face, 124, kind, "x-1")
        assert a.jpeg == b.jpeg and a.jpeg != c.jpeg
        assert a.card_id == "x-1" and a.effects["kind"] == kind
        h, w = a.image.shape[:2]
        assert 1.0e6 <= h * w <= 3.0e6
        assert a.corners is not None
        assert (a.corners >= 0).all() and (a.corners[:, 0] < w).all() and (a.corners[:, 1] < h).all()
        json.dumps(a.effects)  # the misses table stores it
        n1, n2 = make_heldout_nocard_photo(5, kind), make_heldout_nocard_photo(5, kind)
        assert n1.jpeg == n2.jpeg and n1.corners is None


def test_kinds_draw_the_documented_ranges() -> None:
    for seed in range(60):
        std, hard = _draw_look(seed, "standard", True), _draw_look(seed, "hard", True)
        assert 85 <= std["jpeg_quality"] <= 95 and 30 <= hard["jpeg_quality"] <= 80
        assert std["tilt_deg"] <= 18 and 12 <= hard["tilt_deg"] <= 50
        assert 24 <= std["focal_mm"] <= 35 and std["glare"] <= 0.25
        assert hard["card_fraction"] < std["card_fraction"] or hard["card_fraction"] <= 0.25
    hards = [_draw_look(seed, "hard", True) for seed in range(200)]
    assert sum(h["glare"] >= 0.8 for h in hards) > 140  # full-strength glare on most hard photos
    assert {h["holder"] for h in hards} == {"none", "sleeve", "toploader", "binder"}


def test_unknown_effect_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown effects"):
        make_heldout_photo(solid_face(), 1, "standard", effects={"glaer": 1.0})


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def test_training_never_imports_the_heldout_maker_and_it_imports_nothing_from_training() -> None:
    training = sorted((REPO / "training").rglob("*.py"))
    assert training, "training/ has Python modules"
    for path in training:
        for name in imported_modules(path):
            assert "heldout_photos" not in name, f"{path.relative_to(REPO)} imports {name}"
        assert "heldout_photos" not in path.read_text(encoding="utf-8"), path
    maker = REPO / "benchmarks" / "heldout_photos.py"
    for name in imported_modules(maker):
        assert not name.startswith(("training", ".")), f"heldout_photos imports {name}"
    assert "synth" not in maker.read_text(encoding="utf-8").replace("training/synth.py", "")
