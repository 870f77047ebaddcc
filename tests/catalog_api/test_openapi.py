"""The API's contract is pinned: `/openapi.json` must stay byte-identical to the committed copy.

Refactors (moving routers, schemas or error mapping between modules) must not change what clients see.
When the API is meant to change, regenerate the copy:
`python -m tests.catalog_api.test_openapi > tests/catalog_api/openapi.json`.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx

from catalog_api.app import create_app
from catalog_api.kit.settings import Settings

PINNED = Path(__file__).with_name("openapi.json")


def served_openapi(data_dir: Path) -> bytes:
    """The bytes the app answers on `GET /openapi.json` (no lifespan: the document needs no database)."""
    settings = Settings(data_dir=data_dir, bench_routes=False, cursor_secret="x" * 32, file_secret="y" * 32)
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)

    async def get() -> bytes:
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            response = await client.get("/openapi.json")
            assert response.status_code == 200
            return response.content

    return asyncio.run(get())


def test_openapi_is_byte_identical_to_the_pinned_copy(tmp_path: Path) -> None:
    assert served_openapi(tmp_path) == PINNED.read_bytes()


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        sys.stdout.buffer.write(served_openapi(Path(tmp)))
