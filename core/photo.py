"""What a scan photo may be, checked from its header alone: the ingress and the scanner share this.

The ingress runs `probe_image` before sending a photo on (junk and decompression bombs are refused
cheaply, in uvicorn); the scanner (`serve_app.decoding`) opens the photo through the same `opened`
before decoding its pixels, so both refuse exactly the same bytes. It lived in `serve_app.decoding`,
which made the ingress import the scanner; it needs only Pillow, so it sits in `core`,
which both sides import.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager

from PIL import Image

from core.errors import APIError, UnsupportedImage

# The spec's cap on a scan photo's bytes, on the ingress (while streaming) and on the scanner's own route.
MAX_IMAGE_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_PIXELS = 40_000_000
ACCEPTED_FORMATS = ("JPEG", "PNG", "WEBP")

# Pillow warns above this and raises DecompressionBombError above twice this; we check first anyway.
Image.MAX_IMAGE_PIXELS = DEFAULT_MAX_PIXELS


@contextmanager
def opened(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> Iterator[Image.Image]:
    """The image with its header read and checked; every decoder failure becomes `UnsupportedImage`."""
    if not data:
        raise UnsupportedImage("The image is empty.")
    limit = max_pixels if Image.MAX_IMAGE_PIXELS is None else min(max_pixels, Image.MAX_IMAGE_PIXELS)
    try:
        with Image.open(io.BytesIO(data), formats=ACCEPTED_FORMATS) as im:  # reads the header only
            width, height = im.size
            if width * height > limit:
                raise UnsupportedImage(
                    f"The image is {width}x{height} pixels, more than the {limit:,} pixels we decode."
                )
            yield im
    except APIError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise UnsupportedImage(f"The image has more than the {limit:,} pixels we decode.") from None
    except Image.UnidentifiedImageError:
        raise UnsupportedImage("The bytes are not a JPEG, PNG or WebP image.") from None
    except Exception:  # hostile input can trip many decoder errors (truncation, bad chunks, ...)
        raise UnsupportedImage("The image could not be decoded; it may be truncated or corrupt.") from None


def probe_image(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[str, int, int]:
    """Format and size from the header alone: the ingress refuses junk and bombs cheaply and leaves the
    pixel decoding (which also catches truncation) to the scanner."""
    with opened(data, max_pixels) as im:
        return str(im.format), *im.size
