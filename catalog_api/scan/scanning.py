"""What the scan route needs beyond the shared context (`deps.AppContext`): the scanner's client and the
policy for photo URLs. The scan room keeps them on the app's state itself, so the shared context, which
every room's routes import, names no type of this room (a circle between the rooms otherwise)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, FastAPI, Request

from catalog_api.scan.client import ScanClient
from catalog_api.scan.url_fetch import FetchPolicy


@dataclass
class Scanning:
    # Talks to the Ray Serve scanner; None when scanning is not configured (or before the lifespan).
    scanner: ScanClient | None = None
    fetch_policy: FetchPolicy = field(default_factory=FetchPolicy)


def install_scanning(app: FastAPI) -> Scanning:
    """The app's scanning state, made empty here and filled by the app's lifespan."""
    scanning = app.state.scanning = Scanning()
    return scanning


def get_scanning(request: Request) -> Scanning:
    scanning: Scanning = request.app.state.scanning
    return scanning


ScanningState = Annotated[Scanning, Depends(get_scanning)]
