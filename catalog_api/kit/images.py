"""The service's own image store: content-addressed copies of the card faces it was synced with.

Files are named by the SHA-256 of the full-size face, so URLs are immutable (cache forever) and a
request can only ever name a hex digest, never a path. Like everything in the data dir they are private
to the service's user (directories 0700, files 0600: `kit.private_files`); the API serves them.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from catalog_api.kit.private_files import private_dir, write_private

SIZES = ("low", "high")
_KEY = re.compile(r"[0-9a-f]{64}")


class ImageStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, key: str, size: str) -> Path | None:
        if not _KEY.fullmatch(key) or size not in SIZES:
            return None
        return self.root / key[:2] / f"{key}-{size}.jpg"

    def ingest(self, high: Path, low: Path) -> str:
        """Copy one card's two renders in (idempotent) and return their key."""
        data = {"high": high.read_bytes(), "low": low.read_bytes()}
        key = hashlib.sha256(data["high"]).hexdigest()
        for size, payload in data.items():
            target = self.path(key, size)
            assert target is not None
            if target.exists():
                continue
            private_dir(target.parent)
            write_private(target, payload)
        return key


def source_faces(images_dir: Path, card_id: str) -> tuple[Path, Path] | None:
    """The renderer's files for one card (`DIR/<card id>/{high,low}.jpg`), if both are there."""
    if "/" in card_id or "\\" in card_id or card_id in (".", ".."):
        return None
    folder = images_dir / card_id
    high, low = folder / "high.jpg", folder / "low.jpg"
    return (high, low) if high.is_file() and low.is_file() else None


def image_urls(public_url: str, key: str | None) -> dict[str, str] | None:
    if key is None:
        return None
    base = public_url.rstrip("/")
    return {"low": f"{base}/images/{key}/low.jpg", "high": f"{base}/images/{key}/high.jpg"}
