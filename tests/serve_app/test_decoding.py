"""The scanner decodes photos at working scale (JPEG DCT reduction) and in mixed batches: the detector's
corners must not move beyond what the full-resolution decode gives, EXIF orientation included, and one
photo's size or failure must not change another's answer in the same batch."""

from __future__ import annotations

import io
from collections.abc import Iterator

import cv2
import numpy as np
import pytest
from PIL import Image

from core.errors import UnsupportedImage
from models.detector import WEIGHTS, CardDetector
from serve_app.decoding import (
    DRAFT_MIN_SIDE,
    WORK_MAX_SIDE,
    dct_reduction,
    decode_image,
    decode_jpeg_opencv,
    decode_photo,
    upright_size,
)
from tests.faces import base1_faces
from training.detector.evaluate import corner_error_pct
from training.renders import SHARED
from training.synth import make_photo

SEED = 21_000_000  # validation seeds: neither training's nor the benchmarks'
# Photo sizes the scanner meets: ~0.5 MP, ~2 MP and ~12 MP phone photos (synth composes 960x1280 at 1.0).
SCALES = (0.64, 1.275, 3.15)
# Corners from the reduced decode, mapped back to full-resolution pixels, against the full decode's: the
# reduction is at most 1/4 here, so a sub-pixel difference there is ~1-2 px at full size, well under 1%
# of a card's height (the detector's own error on these photos is ~0.2-0.5%).
MAX_SHIFT_PCT = 1.0
MAX_TRUTH_PCT = 2.0

needs_shared = pytest.mark.skipif(
    not (SHARED / "catalog").exists(), reason=f"{SHARED}/catalog absent: no real card faces"
)


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    return base1_faces(2, tmp_path_factory.mktemp("renders"))


@pytest.fixture(scope="module")
def detector() -> Iterator[CardDetector]:
    if not WEIGHTS.exists():
        pytest.skip(f"{WEIGHTS} absent")
    yield CardDetector()


def jpeg(image: np.ndarray, exif: Image.Exif | None = None) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=90, exif=exif or Image.Exif())
    return buffer.getvalue()


def test_reduction_keeps_the_long_side() -> None:
    assert dct_reduction(4032, 3024) == 4  # 1008 px: still >= 1000
    assert dct_reduction(3024, 4032) == 4
    assert dct_reduction(1632, 1224) == 1  # halving would leave 816
    assert dct_reduction(8200, 6000) == 8
    assert dct_reduction(600, 800) == 1
    for width, height in ((4032, 3024), (1632, 1224), (12000, 9000), (999, 10)):
        k = dct_reduction(width, height)
        assert max(width, height) / k >= min(DRAFT_MIN_SIDE, max(width, height))


def pillow_working_image(data: bytes) -> np.ndarray:
    """What Pillow alone makes of a JPEG at the scanner's scale: draft decode, EXIF transpose, RGB."""
    from PIL import ImageOps

    with Image.open(io.BytesIO(data)) as im:
        k = dct_reduction(*im.size)
        im.draft("RGB", (-(-im.size[0] // k), -(-im.size[1] // k)))
        return np.asarray(ImageOps.exif_transpose(im).convert("RGB"))


@pytest.mark.parametrize(
    ("width", "height", "orientation"), [(4032, 3024, 1), (1632, 1224, 6), (2200, 1000, 3)]
)
def test_opencv_decodes_a_jpeg_to_pillows_pixels(width: int, height: int, orientation: int) -> None:
    """Whole colour JPEGs go through OpenCV (no copies between decoder and array): the same reduction, the
    same orientation and, being the same libjpeg, the same pixels as Pillow's decode. A JPEG with bytes
    after its end marker, or in grey, still decodes (through Pillow); a truncated one is still refused."""
    rng = np.random.default_rng(width)
    smooth = cv2.resize(rng.integers(0, 256, (height // 50, width // 50, 3), np.uint8), (width, height))
    exif = Image.Exif()
    exif[0x0112] = orientation
    data = jpeg(smooth, exif)
    assert decode_jpeg_opencv(data, dct_reduction(width, height)) is not None  # the path under test
    decoded = decode_photo(data)
    assert decoded.shape == pillow_working_image(data).shape
    assert np.abs(decoded.astype(int) - pillow_working_image(data)).max() <= 1
    assert decode_photo(data + b"trailer written by a phone").shape == decoded.shape
    grey = io.BytesIO()
    Image.fromarray(smooth[..., 0]).save(grey, format="JPEG", quality=90)
    assert decode_photo(grey.getvalue()).shape[2] == 3
    with pytest.raises(UnsupportedImage):
        decode_photo(data[: len(data) // 2])


@pytest.mark.parametrize("orientation", [1, 3, 6, 8])
def test_a_page_is_worked_on_larger_and_its_size_is_the_size_shown(orientation: int) -> None:
    """A page of many cards (#48) is decoded at up to 4,096 px (a 12 MP photo whole, where a single scan
    takes a quarter), and `upright_size` is the photo's size as shown, after its EXIF rotation: the
    frame a page answer's corners are in."""
    from serve_app.stages import PAGE_MAX_SIDE, PAGE_MIN_SIDE

    width, height = 4032, 3024
    smooth = cv2.resize(np.random.default_rng(1).integers(0, 256, (60, 80, 3), np.uint8), (width, height))
    exif = Image.Exif()
    exif[0x0112] = orientation
    data = jpeg(smooth, exif)
    shown = (height, width) if orientation in (6, 8) else (width, height)
    assert upright_size(data) == shown
    page = decode_photo(data, min_side=PAGE_MIN_SIDE, max_side=PAGE_MAX_SIDE)
    assert (page.shape[1], page.shape[0]) == shown
    single = decode_photo(data)
    assert (single.shape[1], single.shape[0]) == (shown[0] // 4, shown[1] // 4)


@needs_shared
@pytest.mark.parametrize("scale", SCALES)
def test_reduced_decode_keeps_the_corners(
    scale: float, faces: list[np.ndarray], detector: CardDetector
) -> None:
    for n, face in enumerate(faces):
        photo = make_photo(face, SEED + n, "standard", scale=scale)
        assert photo.corners is not None
        data = jpeg(photo.image)
        full = np.asarray(decode_image(data))
        reduced = decode_photo(data)
        h, w = full.shape[:2]
        k = dct_reduction(w, h)
        assert reduced.shape == (-(-h // k), -(-w // k), 3)  # exactly 1/k, rounded up
        assert max(reduced.shape[:2]) >= min(DRAFT_MIN_SIDE, max(h, w))
        assert max(reduced.shape[:2]) <= WORK_MAX_SIDE
        on_full, on_reduced = detector.locate(full), detector.locate(reduced)
        assert on_full is not None and on_reduced is not None
        back = on_reduced * np.array([w / reduced.shape[1], h / reduced.shape[0]], np.float32)
        assert corner_error_pct(back, on_full) < MAX_SHIFT_PCT, (scale, n)
        assert corner_error_pct(back, photo.corners) < MAX_TRUTH_PCT, (scale, n)


@needs_shared
@pytest.mark.parametrize(("orientation", "turns"), [(6, 1), (8, 3), (3, 2)])
def test_exif_orientation_is_applied_before_the_detector_looks(
    orientation: int, turns: int, faces: list[np.ndarray], detector: CardDetector
) -> None:
    """A phone stores the sensor's pixels and says in EXIF how to turn them; the scanner must turn them."""
    photo = make_photo(faces[0], SEED + 10, "standard", scale=SCALES[2])
    assert photo.corners is not None
    exif = Image.Exif()
    exif[0x0112] = orientation
    stored = np.ascontiguousarray(np.rot90(photo.image, turns))  # what the sensor wrote
    upright = decode_photo(jpeg(stored, exif))
    h, w = photo.image.shape[:2]
    assert upright.shape[0] / upright.shape[1] == pytest.approx(h / w, rel=0.01)
    corners = detector.locate(upright)
    assert corners is not None
    back = corners * np.array([w / upright.shape[1], h / upright.shape[0]], np.float32)
    assert corner_error_pct(back, photo.corners) < MAX_TRUTH_PCT


def test_non_jpeg_photos_are_shrunk_to_the_same_working_size() -> None:
    big = np.zeros((3000, 4000, 3), np.uint8)
    big[1000:2000, 1500:2200] = 255
    buffer = io.BytesIO()
    Image.fromarray(big).save(buffer, format="PNG")
    out = decode_photo(buffer.getvalue())
    assert out.shape == (750, 1000, 3)  # the size a 1/4 DCT decode of a JPEG this large would give
    assert out[375, 460].tolist() == [255, 255, 255] and out[100, 100].tolist() == [0, 0, 0]
    very_long = io.BytesIO()
    Image.fromarray(np.zeros((100, 36000, 3), np.uint8)).save(very_long, format="PNG")
    assert decode_photo(very_long.getvalue()).shape == (6, WORK_MAX_SIDE, 3)


@needs_shared
def test_a_mixed_batch_answers_each_photo_as_alone(faces: list[np.ndarray]) -> None:
    """Sizes, formats and a broken photo in one Detector batch: each answer is its batch-of-one's."""
    from serve_app.app import Detector, Located
    from serve_app.stages import Face

    replica = Detector.func_or_class(str(WEIGHTS), "cpu")
    png = io.BytesIO()
    Image.fromarray(make_photo(faces[1], SEED + 21, "standard", scale=SCALES[0]).image).save(png, "PNG")
    photos = [
        jpeg(make_photo(faces[0], SEED + 20, "standard", scale=SCALES[2]).image),
        png.getvalue(),
        b"\xff\xd8\xff\xe0 not really a jpeg",
        jpeg(make_photo(faces[0], SEED + 22, "standard", scale=SCALES[1]).image),
    ]
    batch = replica.locate_photos(photos)
    assert isinstance(batch[2], Located) and batch[2].error is not None
    assert batch[2].error[0] == "unsupported_image"
    for i in (0, 1, 3):
        alone = replica.locate_photos([photos[i]])[0]
        assert isinstance(batch[i], Face) and isinstance(alone, Face)
        assert batch[i].pixels.shape == (838, 600, 3)
        # oneDNN sums in a batch-size-dependent order, so corners may differ by float rounding: the faces
        # must agree to a fraction of a grey level on average, not bit for bit.
        assert np.abs(batch[i].pixels.astype(np.int16) - alone.pixels).mean() < 1.0, i


# --- the GPU path (models.tensor_ops), run here on the CPU: the same code a GPU replica runs --------------


@needs_shared
def test_torch_rectify_matches_opencv(faces: list[np.ndarray]) -> None:
    import torch

    from models.geometry import rectify
    from models.tensor_ops import rectify_tensor

    photo = make_photo(faces[0], SEED + 30, "standard", scale=SCALES[1])
    assert photo.corners is not None
    on_host = rectify(photo.image, photo.corners)
    on_device = rectify_tensor(torch.from_numpy(photo.image).permute(2, 0, 1), photo.corners)
    assert on_device.shape == on_host.shape == (838, 600, 3) and on_device.dtype == np.uint8
    diff = np.abs(on_device.astype(np.int16) - on_host)
    assert diff.mean() < 0.5 and np.percentile(diff, 99) <= 3


@needs_shared
def test_faces_rectified_together_on_the_torch_device_are_each_face_rectified_alone(
    faces: list[np.ndarray],
) -> None:
    """A GPU replica warps its batch's faces, shrinks their thumbnails there, and brings each kind back in
    one copy (`rectify_tensors`): photos of different sizes give each the face it gives alone, in order,
    with the thumbnail the host would shrink from that face."""
    import torch

    from models.geometry import shrink
    from models.tensor_ops import rectify_tensor, rectify_tensors

    photos = [make_photo(faces[n % 2], SEED + 35 + n, "standard", scale=s) for n, s in enumerate(SCALES)]
    images = [torch.from_numpy(p.image).permute(2, 0, 1) for p in photos]
    quads = [p.corners for p in photos]
    assert all(q is not None for q in quads)
    sizes = [(96, 134), None, (224, 313)]  # a thumbnail each, of the sizes asked for (or none)
    together = rectify_tensors(images, quads, thumbnails=sizes)
    assert len(together) == len(photos)
    for image, quad, size, (face, thumbnail) in zip(images, quads, sizes, together, strict=True):
        assert face.shape == (838, 600, 3) and face.dtype == np.uint8
        assert np.array_equal(face, rectify_tensor(image, quad))
        if size is None:
            assert thumbnail is None
            continue
        # OpenCV's INTER_AREA, as the host shrinks: the same weights, so at most a grey level of rounding
        assert thumbnail is not None and thumbnail.shape == (size[1], size[0], 3)
        assert np.abs(shrink(face, size).astype(np.int16) - thumbnail).max() <= 1
    assert not np.array_equal(together[0][0], together[1][0])
    assert rectify_tensors([], []) == []


@needs_shared
@pytest.mark.parametrize("scale", SCALES)
def test_torch_decode_gives_the_working_image(scale: float, faces: list[np.ndarray]) -> None:
    from serve_app.decoding import decode_photo_tensor

    photo = make_photo(faces[1], SEED + 40, "standard", scale=scale)
    data = jpeg(photo.image)
    on_host = decode_photo(data)
    on_device = decode_photo_tensor(data, "cpu").permute(1, 2, 0).numpy()
    assert on_device.shape == on_host.shape
    # DCT scaling and an antialiased resize filter differently: close, not equal
    assert np.abs(on_device.astype(np.int16) - on_host).mean() < 4.0


@needs_shared
@pytest.mark.parametrize("kind", ["standard", "hard"])
def test_views_cut_on_the_torch_device_find_the_hosts_corners(
    kind: str, faces: list[np.ndarray], detector: CardDetector
) -> None:
    """A GPU replica hands the detector its photos as tensors, and the views are cut there
    (`models.tensor_ops`): torch's filters, not OpenCV's, so the corners move a little, never far."""
    import torch

    photos = [make_photo(faces[n % 2], SEED + 70 + n, kind, scale=scale) for n, scale in enumerate(SCALES)]
    on_host = detector.locate_batch([p.image for p in photos])
    on_device = detector.locate_batch([torch.from_numpy(p.image).permute(2, 0, 1) for p in photos])
    for photo, a, b in zip(photos, on_host, on_device, strict=True):
        assert photo.corners is not None and a is not None and b is not None
        assert corner_error_pct(b, a) < MAX_SHIFT_PCT
        assert corner_error_pct(b, photo.corners) < MAX_TRUTH_PCT
    # One batch may hold both kinds (a replica warming both ways): each photo is located as alone.
    mixed = detector.locate_batch([photos[0].image, torch.from_numpy(photos[1].image).permute(2, 0, 1)])
    assert mixed[0] is not None and mixed[1] is not None
    assert corner_error_pct(mixed[0], on_host[0]) < 0.05 and corner_error_pct(mixed[1], on_device[1]) < 0.05


@needs_shared
def test_torch_decode_applies_exif_and_refuses_what_pillow_refuses(faces: list[np.ndarray]) -> None:
    from core.errors import UnsupportedImage
    from serve_app.decoding import decode_photo_tensor

    photo = make_photo(faces[0], SEED + 50, "standard")
    exif = Image.Exif()
    exif[0x0112] = 6
    turned = decode_photo_tensor(jpeg(np.ascontiguousarray(np.rot90(photo.image, 1)), exif), "cpu")
    assert tuple(turned.shape[1:]) == photo.image.shape[:2]
    truncated = jpeg(photo.image)[: len(jpeg(photo.image)) // 3]
    for bad in (b"", b"\xff\xd8\xff\xe0 not really a jpeg", truncated):
        with pytest.raises(UnsupportedImage):  # as on the Pillow path
            decode_photo_tensor(bad, "cpu")
        with pytest.raises(UnsupportedImage):
            decode_photo(bad)


@needs_shared
def test_a_batch_decoded_on_the_torch_device_is_each_photo_decoded_alone(faces: list[np.ndarray]) -> None:
    """A GPU replica decodes its batch's JPEGs in one call (nvJPEG's batched decode): every photo gets the
    pixels it gets alone, EXIF orientation and sizes mixed, other formats beside; and when one body is
    corrupt, the call falls back to one at a time, so only that photo is refused."""
    import torch

    from serve_app.decoding import decode_photo_tensor, decode_photos_tensor

    exif = Image.Exif()
    exif[0x0112] = 6
    small, large = (make_photo(faces[n], SEED + 80 + n, "standard", scale=SCALES[n]).image for n in (0, 1))
    png = io.BytesIO()
    Image.fromarray(small).save(png, format="PNG")
    good = [jpeg(small), jpeg(np.ascontiguousarray(np.rot90(large, 1)), exif), png.getvalue()]
    truncated = jpeg(large)[: len(jpeg(large)) // 3]
    for batch in (good, [good[0], truncated, good[1], b"\xff\xd8\xff\xe0 not a jpeg", good[2]]):
        decoded = decode_photos_tensor(batch, "cpu")
        assert len(decoded) == len(batch)
        for data, image in zip(batch, decoded, strict=True):
            try:
                alone = decode_photo_tensor(data, "cpu")
            except UnsupportedImage as error:
                assert isinstance(image, UnsupportedImage) and image.message == error.message
                continue
            assert isinstance(image, torch.Tensor) and torch.equal(image, alone)
    assert tuple(decoded[2].shape[1:]) == large.shape[:2]  # the EXIF turn applied in the batch too


@needs_shared
def test_the_detector_reports_each_photos_stage_timings(faces: list[np.ndarray]) -> None:
    """The `decode` and `locate` seconds the scanner's metrics come from: every photo is decoded (or
    refused) in its own time; only photos that decoded share their batch's `locate` time."""
    from serve_app.app import Detector

    replica = Detector.func_or_class(str(WEIGHTS), "cpu")
    photos = [
        jpeg(make_photo(faces[0], SEED + 30, "standard", scale=SCALES[0]).image),
        b"\xff\xd8\xff\xe0 not really a jpeg",
        jpeg(make_photo(faces[1], SEED + 31, "standard", scale=SCALES[1]).image),
    ]
    timings: list[dict[str, float]] = [{} for _ in photos]
    replica.locate_photos(photos, timings)
    assert set(timings[0]) == set(timings[2]) == {"decode", "locate"}
    assert set(timings[1]) == {"decode"}
    assert timings[0]["locate"] == timings[2]["locate"] > 0
    assert all(0 < spent["decode"] < 30 for spent in timings)


@needs_shared
def test_a_detector_decoding_on_its_torch_device_finds_the_same_faces(faces: list[np.ndarray]) -> None:
    from models.geometry import shrink
    from serve_app.app import Detector
    from serve_app.pipeline import Located
    from serve_app.stages import Face

    on_host = Detector.func_or_class(str(WEIGHTS), "cpu", pixels="numpy")
    on_device = Detector.func_or_class(str(WEIGHTS), "cpu", pixels="torch")
    photos = [
        jpeg(make_photo(faces[n % 2], SEED + 60 + n, "standard", scale=scale).image)
        for n, scale in enumerate(SCALES)
    ]
    truncated = photos[1][: len(photos[1]) // 3]  # its header passes; the batched decode call fails on it
    photos = [photos[0], truncated, *photos[1:]]
    timings: list[dict[str, float]] = [{} for _ in photos]
    sizes = [(96, 134)] * len(photos)  # the embedder's thumbnails, shrunk on the device too
    found = on_device.locate_photos(photos, timings, sizes)
    for a, b in zip(on_host.locate_photos(photos, thumbnails=sizes), found, strict=True):
        if isinstance(a, Located):  # refused alike, the rest of the batch unharmed
            assert isinstance(b, Located) and b.error is not None and a.error == b.error
            assert b.error[0] == "unsupported_image"
            continue
        assert isinstance(a, Face) and isinstance(b, Face)
        assert a.thumbnail is not None and b.thumbnail is not None
        assert np.abs(a.pixels.astype(np.int16) - b.pixels).mean() < 6.0
        assert b.thumbnail.shape == a.thumbnail.shape == (134, 96, 3)
        assert np.abs(a.thumbnail.astype(np.int16) - b.thumbnail).mean() < 6.0
        # on the device as on the host, the thumbnail is its own face's area average
        assert np.abs(shrink(b.pixels, (96, 134)).astype(np.int16) - b.thumbnail).max() <= 1
    assert isinstance(found[1], Located)
    assert all(spent["decode"] == timings[0]["decode"] > 0 for spent in timings)  # one call, shared


def test_exact_torch_search_matches_faiss() -> None:
    from models.index import CardIndex

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(500, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = CardIndex(16, "test")
    index._add([f"card-{i}" for i in range(500)], vectors)
    moved = rng.normal(size=(1, 16)).astype(np.float32)
    index._add(["card-7"], moved / np.linalg.norm(moved))  # replaced: faiss's order is not the ids' now
    queries = np.vstack([vectors[:20], moved]) + rng.normal(scale=0.1, size=(21, 16)).astype(np.float32)
    expected = index.search(queries, 5)
    index.search_on("cpu")
    got = index.search(queries, 5)
    for want, have in zip(expected, got, strict=True):
        assert [cid for cid, _ in want] == [cid for cid, _ in have]
        assert np.allclose([s for _, s in want], [s for _, s in have], atol=1e-5)
