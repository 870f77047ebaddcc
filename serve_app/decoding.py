"""Photo decoding inside the scanner: the photo upright, in RGB, at the scale the scanner works at.

The detector looks at a photo through 224-px views and the face it rectifies is 600x838, so a 12 MP
photo decoded at full resolution is mostly wasted work and memory (57 ms and 36 MB for a 4032x3024 JPEG
here, against 12 ms and 2.3 MB at 1/4 scale). A JPEG is therefore decoded at the smallest DCT scale (1/2,
1/4, 1/8: libjpeg skips the rest of the inverse DCT) whose long side is still at least `DRAFT_MIN_SIDE`,
which keeps the card as sharp as in the ~1.2 MP photos the models were validated on. A whole colour JPEG
is decoded by OpenCV straight into its array (the same libjpeg scaling, the same pixels, without Pillow's
copies: 9.1 -> 7.0 ms for a 2 MP photo, 21.6 -> 17.7 ms for 12 MP, `benchmarks/scan_stages.py`); any
other JPEG by Pillow, which refuses truncated ones. Other formats (and JPEGs still larger than
`WORK_MAX_SIDE` at 1/8) are decoded whole and shrunk at once, so each photo in a batch is held once, at
working size. Bombs are refused from the header, before any pixel is allocated.

The header check is `core.photo` (the ingress runs `probe_image` before sending the photo on);
`decode_image` is the full-resolution decode (the tests compare with it).
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np
from PIL import Image, ImageOps

from core.errors import APIError, UnsupportedImage
from core.photo import DEFAULT_MAX_PIXELS, opened

DRAFT_MIN_SIDE = 1000  # a reduced JPEG decode keeps at least this long side
WORK_MAX_SIDE = 2048  # anything larger after decoding is shrunk to this long side
ORIENTATION_TAG = 274  # EXIF's Orientation: 5-8 turn the picture a quarter


def decode_image(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """Decode JPEG/PNG/WebP bytes to an upright RGB image at full resolution, refusing bombs before
    pixels are allocated. Blocking (CPU-bound); call it from a worker thread in async code."""
    with opened(data, max_pixels) as im:
        im.load()
        return _upright_rgb(im)


def dct_reduction(width: int, height: int, min_side: int = DRAFT_MIN_SIDE) -> int:
    """The largest JPEG DCT reduction (1, 2, 4 or 8) that keeps the long side at least `min_side`."""
    long_side = max(width, height)
    return next((k for k in (8, 4, 2) if long_side / k >= min_side), 1)


def working_size(
    width: int, height: int, min_side: int = DRAFT_MIN_SIDE, max_side: int = WORK_MAX_SIDE
) -> tuple[int, int]:
    """The (width, height) the scanner works at for a photo of this size: what a DCT-scaled JPEG decode
    gives (1/k, rounded up), no larger than `max_side` on the long side."""
    k = dct_reduction(width, height, min_side)
    w, h = math.ceil(width / k), math.ceil(height / k)
    if max(w, h) > max_side:
        s = max_side / max(w, h)
        w, h = max(1, round(w * s)), max(1, round(h * s))
    return w, h


# OpenCV's reduced JPEG decodes (libjpeg's DCT scaling, EXIF orientation applied), by reduction.
_OPENCV_REDUCED = {
    1: cv2.IMREAD_COLOR,
    2: cv2.IMREAD_REDUCED_COLOR_2,
    4: cv2.IMREAD_REDUCED_COLOR_4,
    8: cv2.IMREAD_REDUCED_COLOR_8,
}


def decode_photo(
    data: bytes,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    min_side: int = DRAFT_MIN_SIDE,
    max_side: int = WORK_MAX_SIDE,
) -> np.ndarray:
    """The photo as an upright RGB uint8 array at working size (see the module docstring). `min_side`,
    `max_side`: the working size's long side bounds; a page of many cards (#48) is worked on larger, as
    each of its cards is a fraction of the photo."""
    image: np.ndarray | None = None
    with opened(data, max_pixels) as im:
        if im.format == "JPEG" and im.mode == "RGB" and data.rstrip(b"\0").endswith(b"\xff\xd9"):
            image = decode_jpeg_opencv(data, dct_reduction(*im.size, min_side))
        if image is None:
            if im.format == "JPEG":
                k = dct_reduction(*im.size, min_side)
                if k > 1:  # asks for exactly 1/k: draft picks the smallest scale at least this large
                    im.draft("RGB", (math.ceil(im.size[0] / k), math.ceil(im.size[1] / k)))
            im.load()
            image = np.asarray(_upright_rgb(im))
    h, w = image.shape[:2]
    size = working_size(w, h, min_side, max_side)
    if size != (w, h):
        image = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
    return image


def upright_size(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[int, int]:
    """(width, height) of the photo as it is shown: after its EXIF rotation, at full resolution. Page
    answers give corners in these pixels, whatever size the scanner worked at."""
    with opened(data, max_pixels) as im:
        w, h = im.size
        turned = im.getexif().get(ORIENTATION_TAG, 1) in (5, 6, 7, 8)
    return (h, w) if turned else (w, h)


def decode_jpeg_opencv(data: bytes, reduction: int) -> np.ndarray | None:
    """A whole colour JPEG (one that ends in its EOI marker) decoded at 1/`reduction` by OpenCV, upright,
    RGB; None if OpenCV cannot, and Pillow decides. Same libjpeg, same pixels as Pillow's draft decode
    (identical on 360 synthetic phone photos of three sizes), but straight into the array: through Pillow
    the pixels were copied three times more (`exif_transpose`'s copy, `np.asarray`'s tobytes chunks and
    their join). A truncated JPEG has no EOI and goes to Pillow, which refuses it, as before."""
    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), _OPENCV_REDUCED[reduction])
    if bgr is None or bgr.ndim != 3 or bgr.shape[2] != 3:
        return None
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def decode_photo_tensor(data: bytes, device: Any, max_pixels: int = DEFAULT_MAX_PIXELS) -> Any:
    """`decode_photo` for a replica that holds a GPU: the working image as a uint8 (3, h, w) tensor on
    `device`. JPEGs are decoded there (nvJPEG on CUDA) and shrunk there; other formats go through Pillow.
    The header is checked first, as on the CPU path, so a bomb never reaches the decoder."""
    found = decode_photos_tensor([data], device, max_pixels)[0]
    if isinstance(found, APIError):
        raise found
    return found


def decode_photos_tensor(photos: list[bytes], device: Any, max_pixels: int = DEFAULT_MAX_PIXELS) -> list[Any]:
    """`decode_photo_tensor` for a batch: each photo's working image, or the `APIError` it earned. The
    JPEGs go to the decoder in one call (nvJPEG's batched decode: on an H200, ~0.25 ms of a core a 2 MP
    photo against ~1.0 one at a time); when that call fails, each is decoded alone, so one corrupt photo
    gets its own error and the rest their pixels."""
    import torch  # only replicas that decode on a device load torch for this

    from models.tensor_ops import decode_jpegs_on, shrink_tensor

    out: list[Any] = [None] * len(photos)
    jpegs: list[int] = []
    for i, data in enumerate(photos):
        try:
            with opened(data, max_pixels) as im:
                image_format = im.format
            if image_format == "JPEG":
                jpegs.append(i)
            else:
                out[i] = torch.from_numpy(decode_photo(data, max_pixels)).permute(2, 0, 1).to(device)
        except APIError as error:
            out[i] = error
    try:
        decoded: list[Any] = decode_jpegs_on([photos[i] for i in jpegs], device) if jpegs else []
    except (RuntimeError, ValueError):
        decoded = [_decode_alone(photos[i], device) for i in jpegs]
    for i, image in zip(jpegs, decoded, strict=True):
        if isinstance(image, APIError):
            out[i] = image
            continue
        w, h = working_size(image.shape[2], image.shape[1])
        out[i] = shrink_tensor(image, (h, w))
    return out


def _decode_alone(data: bytes, device: Any) -> Any:
    """One JPEG on `device`, or the error a corrupt one earns."""
    from models.tensor_ops import decode_jpeg_on

    try:
        return decode_jpeg_on(data, device)
    except (RuntimeError, ValueError):
        return UnsupportedImage("The image could not be decoded; it may be truncated or corrupt.")


def _upright_rgb(im: Image.Image) -> Image.Image:
    """Apply EXIF orientation (ignoring broken EXIF) and flatten to RGB, transparency onto white."""
    try:
        upright = ImageOps.exif_transpose(im)  # a new image either way
    except Exception:  # a photo with mangled EXIF is still a photo
        upright = im.copy()
    if upright.mode == "RGB":
        return upright
    if upright.mode in ("RGBA", "LA", "PA") or (upright.mode == "P" and "transparency" in upright.info):
        rgba = upright.convert("RGBA")
        background = Image.new("RGB", rgba.size, (255, 255, 255))
        background.paste(rgba, mask=rgba.getchannel("A"))
        return background
    return upright.convert("RGB")
