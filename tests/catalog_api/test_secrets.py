"""Signing secrets (issue 17, row 5): never derived from the database URL.

With CARDCAT_CURSOR_SECRET and CARDCAT_FILE_SECRET unset, the first process generates random secrets
and keeps them in `<data_dir>/secrets.json` (mode 0600); every process on that data dir uses them.

- A snapshot URL or a cursor signed with the old key (a hash of the database URL, which an attacker can
  guess) is refused / ignored by the real server; one signed with the stored secret works.
- Two server processes on one data dir accept each other's cursors.
- Processes racing to create the file all end up with the one secret that won.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from cardcat.stack import REPO, Service
from catalog_api.kit.pagination import CursorCodec
from catalog_api.kit.settings import Settings
from tests.catalog_api.helpers import failed, ok

SNAPSHOT = "card_prices-2026-01-01-0123456789abcdef.ndjson.gz"


def stored(service: Service) -> dict[str, str]:
    path = service.data_dir / "secrets.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, oct(path.stat().st_mode)
    secrets: dict[str, str] = json.loads(path.read_text())
    return secrets


def database_url_of(service: Service) -> str:
    return Settings(database_url=service.db.url, data_dir=service.data_dir).sqlalchemy_url


def snapshot_signature(secret: str, expires: int) -> str:
    key = hashlib.sha256(secret.encode()).digest()
    return hmac.new(key, f"{SNAPSHOT}:{expires}".encode(), hashlib.sha256).hexdigest()


def resign(cursor: str, secret: str) -> str:
    """The same cursor payload under another key (the server's signature format: payload + 16-byte MAC)."""
    token = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    payload = token[:-16]
    mac = hmac.new(hashlib.sha256(secret.encode()).digest(), payload, hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(payload + mac).rstrip(b"=").decode()


def test_a_snapshot_url_signed_with_the_database_url_key_is_refused(fresh: Any, feed_dir: Path) -> None:
    svc: Service = fresh("sqlite", feed_dir)
    folder = svc.data_dir / "snapshots"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SNAPSHOT).write_bytes(b"\x1f\x8b snapshot")
    expires = 4_102_444_800  # 2100-01-01, as in the review's forged URL
    url = f"{svc.base_url}/files/snapshots/{SNAPSHOT}"

    old_key = "cardcat-files:" + database_url_of(svc)
    forged = httpx.get(url, params={"expires": expires, "signature": snapshot_signature(old_key, expires)})
    failed(forged, 401, "unauthorized")

    genuine = snapshot_signature(stored(svc)["file_secret"], expires)
    response = httpx.get(url, params={"expires": expires, "signature": genuine})
    assert response.status_code == 200 and response.content == b"\x1f\x8b snapshot"


def test_cursors_from_the_stored_secret_work_across_processes_and_old_ones_do_not(
    fresh: Any, feed_dir: Path
) -> None:
    # The harness gives every server CARDCAT_CURSOR_SECRET; empty means "unset" (use the data dir's).
    svc: Service = fresh("sqlite", feed_dir, CARDCAT_CURSOR_SECRET="")
    second = svc.start()
    key = svc.quick_key()
    with svc.client(key) as a, svc.client(key, base_url=second) as b:
        first = ok(a.get("/v1/cards", params={"limit": 2}))
        cursor = first["next_cursor"]
        assert cursor
        from_a = ok(a.get("/v1/cards", params={"limit": 2, "cursor": cursor}))
        from_b = ok(b.get("/v1/cards", params={"limit": 2, "cursor": cursor}))
        assert from_b == from_a and from_a["items"] != first["items"], "B accepts A's cursor"
        back = ok(a.get("/v1/cards", params={"limit": 2, "cursor": from_b["next_cursor"]}))
        assert back["items"] and back["items"][0]["id"] not in {c["id"] for c in from_a["items"]}

        forged = resign(cursor, "cardcat-cursor:" + database_url_of(svc))
        assert ok(a.get("/v1/cards", params={"limit": 2, "cursor": forged})) == first, "ignored: first page"
        assert resign(cursor, stored(svc)["cursor_secret"]) == cursor


def test_processes_racing_to_create_the_secrets_agree(tmp_path: Path) -> None:
    """Eight processes start on an empty data dir at once: the file is created once, all read it."""
    data_dir = tmp_path / "data"
    code = (
        "import sys; from catalog_api.kit.secret_store import stored_secrets; "
        "print(stored_secrets(sys.argv[1]).cursor, stored_secrets(sys.argv[1]).file)"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(data_dir)], cwd=REPO, stdout=subprocess.PIPE, text=True
        )
        for _ in range(8)
    ]
    outputs = {proc.communicate(timeout=60)[0].strip() for proc in procs}
    assert all(proc.returncode == 0 for proc in procs)
    assert len(outputs) == 1, outputs
    cursor, file = outputs.pop().split()
    assert cursor != file and len(cursor) >= 43
    assert [p.name for p in data_dir.iterdir()] == ["secrets.json"], "no temporary file left behind"
    assert stat.S_IMODE((data_dir / "secrets.json").stat().st_mode) == 0o600


def test_secrets_from_the_environment_win(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, file_secret="from-env", cursor_secret="from-env")
    assert settings.file_signing_key == hashlib.sha256(b"from-env").digest()
    from catalog_api.app import _cursor_secret

    assert _cursor_secret(settings) == hashlib.sha256(b"from-env").digest()
    assert not (tmp_path / "secrets.json").exists(), "nothing generated when both are set"
    codec = CursorCodec(_cursor_secret(settings))
    assert codec.decode(codec.encode(["s"], ["x"]), ["s"], (str,)) == ["x"]
