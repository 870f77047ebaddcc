"""The detector's geometry (models/quads.py): views drawn from a photo pyramid land where their matrices
say, and the vectorised side fitting and band scoring give exactly what the one-row-at-a-time versions
they replaced gave (kept here as references)."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from models.quads import (
    PAD_VALUE,
    Pyramid,
    _refine_sides,
    _shoelace,
    apply,
    band_scores,
    blob_areas,
    letterbox,
    letterbox_plan,
    orient,
    orient_roll,
    zoom_target,
    zoom_view,
)


def _dot_photo(h: int, w: int, centre: tuple[float, float], radius: float) -> np.ndarray:
    """A grey photo with one bright disc (sub-pixel centre, drawn with 4 fractional bits)."""
    photo = np.full((h, w, 3), 60, np.uint8)
    cx, cy = (round(v * 16) for v in centre)
    cv2.circle(photo, (cx, cy), round(radius * 16), (250, 250, 250), -1, cv2.LINE_AA, shift=4)
    return photo


def _centroid(view: np.ndarray) -> np.ndarray:
    """Brightness-weighted centroid of the disc (pixel-centre coordinates)."""
    weight = np.clip(view[..., 0].astype(np.float64) - 120, 0, None)
    ys, xs = np.indices(weight.shape)
    return np.array([(xs * weight).sum(), (ys * weight).sum()]) / weight.sum()


@pytest.mark.parametrize("shape", [(1632, 1224), (1225, 1633), (3023, 4031), (500, 370)])
def test_letterbox_maps_photo_points(shape: tuple[int, int]) -> None:
    h, w = shape
    centre = (0.37 * w + 0.3, 0.61 * h + 0.7)
    photo = _dot_photo(h, w, centre, radius=0.04 * max(h, w))
    view, m = letterbox(Pyramid(photo), 224)
    assert view.shape == (224, 224, 3)
    expected = apply(m, np.array([centre], np.float32))[0]
    assert np.abs(_centroid(view) - expected).max() < 0.25, (_centroid(view), expected)
    plain, plain_m = letterbox(photo, 224)  # from an array or its pyramid: the same view
    assert np.array_equal(plain, view) and np.allclose(plain_m, m)


@pytest.mark.parametrize("card_h", [180.0, 420.0, 900.0, 2400.0])
def test_zoom_view_from_any_level_puts_the_card_where_asked(card_h: float) -> None:
    """A card-shaped quad (any size in the photo, so any pyramid level) becomes the view's card
    rectangle; a disc at the card's centre lands at the matrix's point."""
    h, w = 3024, 4032
    size, fill = 224, 0.78
    centre = np.array([2011.3, 1480.6])
    half = np.array([card_h / 1.3963 / 2, card_h / 2])
    angle = math.radians(17)
    rot = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
    quad = (np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * half) @ rot.T + centre
    photo = _dot_photo(h, w, tuple(centre), radius=0.1 * card_h)
    pyramid = Pyramid(photo)
    view, m = zoom_view(pyramid, quad.astype(np.float32), size, fill)
    assert np.allclose(apply(m, quad.astype(np.float32)), zoom_target(size, fill), atol=1e-2)
    expected = apply(m, centre.astype(np.float32)[None])[0]
    assert np.abs(_centroid(view) - expected).max() < 0.35, (_centroid(view), expected)
    # The view's detail: the disc is ~0.2 x 0.78 x 224 px across whatever the photo's card size.
    assert (view[..., 0] > 200).sum() == pytest.approx(math.pi * (0.1 * fill * size) ** 2, rel=0.15)


def test_pyramid_levels_halve_once_and_are_kept() -> None:
    photo = np.random.default_rng(0).integers(0, 255, (1001, 1503, 3), np.uint8)
    pyramid = Pyramid(photo)
    whole, scale = pyramid.level(0.6)
    assert whole is photo and scale == 1.0 and len(pyramid.levels) == 1  # nothing made until needed
    image, scale = pyramid.level(0.3)  # the smallest level still >= 0.3 of the photo: 1/2
    assert scale == 0.5 and image.shape == (500, 751, 3)
    # 2x2 box averages of the photo, the odd last row and column left out.
    blocks = photo[:1000, :1502].reshape(500, 2, 751, 2, 3).mean(axis=(1, 3))
    assert np.abs(image.astype(float) - blocks).max() <= 0.5
    again, _ = pyramid.level(0.4)
    assert again is image and len(pyramid.levels) == 2
    tiny, scale = pyramid.level(1e-6)  # never below one pixel
    assert min(tiny.shape[:2]) >= 1 and scale == 2.0 ** -(len(pyramid.levels) - 1)


# ------------------------------------------------- the same views cut on a torch device (a GPU replica's)
def _on_device(photo: np.ndarray):  # type: ignore[no-untyped-def]
    import torch

    from models.tensor_ops import TensorPyramid

    return TensorPyramid(torch.from_numpy(photo).permute(2, 0, 1))


@pytest.mark.parametrize("shape", [(1632, 1224), (1225, 1633), (3023, 4031), (500, 370)])
def test_a_torch_letterbox_is_the_hosts_view(shape: tuple[int, int]) -> None:
    """The same matrix, the disc where the matrix says, and nearly the host's pixels (torch's antialiased
    filter is not OpenCV's INTER_AREA); the padding is the host's."""
    from models.tensor_ops import letterbox_tensor

    h, w = shape
    centre = (0.37 * w + 0.3, 0.61 * h + 0.7)
    photo = _dot_photo(h, w, centre, radius=0.04 * max(h, w))
    on_host, m = letterbox(photo, 224)
    view, m_device = letterbox_tensor(_on_device(photo), 224)
    assert view.shape == (224, 224, 3) and np.array_equal(m_device, m)
    view = view.numpy()
    expected = apply(m, np.array([centre], np.float32))[0]
    assert np.abs(_centroid(view) - expected).max() < 0.25, (_centroid(view), expected)
    assert np.abs(view.astype(np.int16) - on_host).mean() < 1.0
    (nw, nh), (ox, oy), _ = letterbox_plan(h, w, 224)
    pad = np.ones((224, 224), bool)
    pad[oy : oy + nh, ox : ox + nw] = False
    assert pad.any() and (view[pad] == PAD_VALUE).all() and (on_host[pad] == PAD_VALUE).all()


@pytest.mark.parametrize("card_h", [180.0, 420.0, 900.0, 2400.0])
@pytest.mark.parametrize("centre", [(2011.3, 1480.6), (150.2, 2900.7)])
def test_a_torch_zoom_view_is_the_hosts_view(card_h: float, centre: tuple[float, float]) -> None:
    """From any pyramid level, the same matrix as the host's and nearly its pixels; a card at the photo's
    corner leaves the same padding outside the photo."""
    from models.tensor_ops import zoom_view_tensor

    size, fill = 224, 0.78
    half = np.array([card_h / 1.3963 / 2, card_h / 2])
    angle = math.radians(17)
    rot = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
    quad = ((np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * half) @ rot.T + centre).astype(np.float32)
    photo = _dot_photo(3024, 4032, centre, radius=0.1 * card_h)
    on_host, m = zoom_view(Pyramid(photo), quad, size, fill)
    view, m_device = zoom_view_tensor(_on_device(photo), quad, size, fill)
    assert np.array_equal(m_device, m)
    view = view.numpy()
    # The disc where the host's view has it (at the photo's corner the photo cuts part of it off).
    assert np.abs(_centroid(view) - _centroid(on_host)).max() < 0.35, (_centroid(view), _centroid(on_host))
    diff = np.abs(view.astype(np.int16) - on_host)
    assert diff.mean() < 1.0 and np.percentile(diff, 99) <= 12, (diff.mean(), np.percentile(diff, 99))


def test_a_torch_pyramid_halves_like_the_hosts() -> None:
    photo = np.random.default_rng(0).integers(0, 255, (1001, 1503, 3), np.uint8)
    on_host, on_device = Pyramid(photo), _on_device(photo)
    for scale in (0.6, 0.3, 0.1, 1e-6):
        (image, s), (tensor, s_device) = on_host.level(scale), on_device.level(scale)
        assert s == s_device and tensor.shape[1:] == image.shape[:2]
        # the host rounds each level to uint8, the device keeps floats
        assert np.abs(tensor.permute(1, 2, 0).numpy() - image).max() <= 0.5 * len(on_host.levels)


# ---------------------------------------------------------------- references: the per-row originals
def _refine_sides_reference(prob: np.ndarray, quad: np.ndarray, samples: int = 32) -> np.ndarray | None:
    lines = []
    centre = quad.mean(0)
    for i in range(4):
        a, b = quad[i], quad[(i + 1) % 4]
        length = float(np.linalg.norm(b - a))
        if length < 4:
            return None
        d = (b - a) / length
        n = np.array([d[1], -d[0]])
        if np.dot(n, (a + b) / 2 - centre) < 0:
            n = -n
        reach = max(3.0, 0.06 * length)
        t = np.linspace(0.12, 0.88, samples)[:, None]
        offs = np.arange(-reach, reach + 1e-6, 0.25, dtype=np.float32)
        pts = (a + (b - a) * t)[:, None, :] + offs[None, :, None] * n
        prof = cv2.remap(
            prob, pts[..., 0].astype(np.float32), pts[..., 1].astype(np.float32), cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT, borderValue=0.0,
        )  # fmt: skip
        inside = prof >= 0.5
        good = []
        for k in range(samples):
            row, ins = prof[k], inside[k]
            if not ins[0]:
                continue
            j = int(np.argmin(ins))
            if j == 0 or ins[j]:
                continue
            frac = (row[j - 1] - 0.5) / max(row[j - 1] - row[j], 1e-6)
            good.append(pts[k, j - 1] + frac * 0.25 * n)
        if len(good) < samples // 3:
            lines.append(np.array([d[0], d[1], a[0], a[1]], np.float64))
        else:
            fitted = cv2.fitLine(np.array(good, np.float32), cv2.DIST_HUBER, 0, 0.01, 0.01)
            lines.append(fitted.ravel().astype(np.float64))
    corners = []
    for i in range(4):
        (d1, p1), (d2, p2) = (lines[i - 1][:2], lines[i - 1][2:]), (lines[i][:2], lines[i][2:])
        den = d1[0] * d2[1] - d1[1] * d2[0]
        if abs(den) < 1e-6:
            return None
        corners.append(p1 + ((p2[0] - p1[0]) * d2[1] - (p2[1] - p1[1]) * d2[0]) / den * d1)
    out = np.array(corners, np.float32)
    if np.abs(out - quad).max() > 0.25 * math.sqrt(abs(_shoelace(quad))):
        return None
    return out


def _band_scores_reference(maps: np.ndarray, quad: np.ndarray) -> np.ndarray:
    h, w = maps.shape[1:]
    scores = np.zeros((2, 4), np.float32)
    for k in range(4):
        a, b, c, d = quad[k], quad[(k + 1) % 4], quad[(k + 2) % 4], quad[(k + 3) % 4]
        band = np.array([a, b, b + 0.1 * (c - b), a + 0.1 * (d - a)], np.float32)
        mask = np.zeros((h, w), np.uint8)
        cv2.fillPoly(mask, [np.round(band * 4).astype(np.int32)], 1, cv2.LINE_8, shift=2)
        if mask.any():
            scores[:, k] = maps[:, mask > 0].mean(1)
    return scores


def _random_quad(rng: np.random.Generator) -> np.ndarray:
    """A card-like quad anywhere around (and partly outside) a 224-px view."""
    size = rng.uniform(5, 200)
    angle = rng.uniform(0, 2 * math.pi)
    rot = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
    quad = np.array([[-0.35, -0.5], [0.35, -0.5], [0.35, 0.5], [-0.35, 0.5]]) * size @ rot.T
    quad += rng.uniform(-20, 244, 2) + rng.normal(0, 0.03 * size, (4, 2))
    return quad.astype(np.float32)


def test_vectorised_side_fitting_and_band_scores_match_the_references() -> None:
    rng = np.random.default_rng(7)
    compared = refined = 0
    for _ in range(600):
        quad = _random_quad(rng)
        maps = rng.random((2, 224, 224)).astype(np.float32)
        assert np.array_equal(band_scores(maps, quad), _band_scores_reference(maps, quad))
        if compared % 50 == 0:  # float64 maps (none are served, but the function takes them) add up the same
            wide = maps.astype(np.float64)
            assert np.array_equal(band_scores(wide, quad), _band_scores_reference(wide, quad))
        prob = np.zeros((224, 224), np.float32)
        cv2.fillPoly(prob, [np.round(quad * 4).astype(np.int32)], 1.0, cv2.LINE_AA, shift=2)
        noise = rng.normal(0, 0.05, prob.shape).astype(np.float32)
        prob = (cv2.GaussianBlur(prob, (0, 0), rng.uniform(0.5, 3)) + noise).astype(np.float32)
        guess = (quad + rng.normal(0, 2, (4, 2))).astype(np.float32)
        if _shoelace(guess) < 0:
            guess = guess[::-1].copy()
        ours, reference = _refine_sides(prob, guess), _refine_sides_reference(prob, guess)
        assert (ours is None) == (reference is None)
        if ours is not None and reference is not None:
            assert np.array_equal(ours, reference)
            refined += 1
        compared += 1
    assert refined > compared // 2  # most guesses refine: the comparison is not of Nones


def test_the_shoelace_area_is_the_rolled_formulas_bit_for_bit() -> None:
    """`_shoelace` pairs each point with the next by slicing, not `np.roll` (~10x the cost at four
    points, and the fit calls it for every candidate): the same values, so the same float sums."""
    rng = np.random.default_rng(3)
    for _ in range(500):
        dtype = np.float32 if rng.random() < 0.5 else np.float64
        points = rng.normal(100, 60, (int(rng.integers(3, 9)), 2)).astype(dtype)
        x, y = points[:, 0], points[:, 1]
        assert _shoelace(points) == float(0.5 * (np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y)))


def test_the_oriented_quads_band_scores_are_the_quads_rolled() -> None:
    """The detector scores a find from `orient_roll`'s roll of the quad's own band scores instead of
    scoring the oriented quad again: the same numbers, bit for bit."""
    rng = np.random.default_rng(11)
    rolls = set()
    for _ in range(300):
        quad = _random_quad(rng)
        maps = rng.random((2, 224, 224)).astype(np.float32)
        maps[0, :40] += 2.0 * rng.random()  # a top band somewhere, so that every roll turns up
        maps = np.rot90(maps, int(rng.integers(4)), axes=(1, 2)).copy()
        scores = band_scores(maps, quad)
        r = orient_roll(quad, scores, quad, geo=3.0)
        assert np.array_equal(orient(quad, maps, quad, geo=3.0), np.roll(quad, -r, axis=0))
        assert np.array_equal(band_scores(maps, np.roll(quad, -r, axis=0)), np.roll(scores, -r, axis=1))
        rolls.add(r)
    assert rolls == {0, 1, 2, 3}


def test_blob_areas_order_the_candidates_as_opencvs_statistics_did() -> None:
    """`fit_quads` counts blob areas itself (`blob_areas`) instead of asking OpenCV for every statistic:
    the same labels and areas, in the same order, on maps with many blobs of equal size too."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        size = int(rng.integers(20, 240))
        noise = rng.random((size, size)).astype(np.float32)
        binary = cv2.GaussianBlur(noise, (0, 0), float(rng.uniform(0.5, 5))) > rng.uniform(0.3, 0.7)
        binary = binary.astype(np.uint8)
        binary[:4, :: int(rng.integers(3, 9))] = 1  # equal little blobs: ties in the ordering
        labels, areas = blob_areas(binary)
        _, want_labels, stats, _ = cv2.connectedComponentsWithStats(binary, connectivity=4)
        assert np.array_equal(labels, want_labels) and np.array_equal(areas, stats[:, cv2.CC_STAT_AREA])
        assert np.array_equal(np.argsort(-areas[1:]), np.argsort(-stats[1:, cv2.CC_STAT_AREA]))
