"""Data at rest (issue 45, item 3): the data dir is private, and webhook signing secrets are encrypted.

On a73d9a9 `var/cardcat.db` was 0644 in a 0755 directory (the umask's modes) and held every webhook
endpoint's signing secret in plain text, so any user of the host could sign events as us. Now:

- Under the usual umask 022, the real `cardcat` commands and server leave the data dir 0700 and what
  they write in it 0600: the SQLite database and its -wal/-shm, secrets.json, the image store, price
  snapshots, bulk files.
- A data dir an older version left open to others is tightened when a process of this version starts.
- The `webhook_endpoints.secret` column, read straight from SQLite and PostgreSQL, holds no plain secret,
  while every delivery still verifies with the secret `cardcat webhooks add` printed once.
- Rows an older version stored in plain text keep working and are encrypted (by `cardcat db upgrade` or
  the deliverer); `cardcat webhooks rekey` rotates to a new key, and a deliverer that lacks the key
  posts nothing unsigned.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from PIL import Image

from cardcat.stack import REPO, Database, Service, create_database
from catalog_api.events.secret_box import PREFIX
from catalog_api.events.signing import new_secret
from catalog_api.ingest.demo_catalog import write_demo_catalog
from catalog_api.prices.demo_prices import write_demo_prices
from tests.catalog_api.test_events import ENV, Receiver, edit

OPEN_TO_OTHERS = stat.S_IRWXG | stat.S_IRWXO


@contextmanager
def umask(mask: int) -> Iterator[None]:
    """Every process started inside (CLI runs, servers) inherits this umask."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def open_entries(root: Path) -> list[str]:
    """Everything under root (root included) that group or others may use, with its mode."""
    found = [root, *root.rglob("*")]
    return [f"{p.relative_to(root.parent)} {mode(p):o}" for p in found if mode(p) & OPEN_TO_OTHERS]


def write_faces(feed: Path, out: Path, count: int = 3) -> Path:
    """cardrender-style faces (`<card id>/{high,low}.jpg`) for the first cards of the feed."""
    import gzip

    with gzip.open(feed / "cards.jsonl.gz", "rt") as handle:
        ids = [json.loads(line)["id"] for _, line in zip(range(count), handle, strict=False)]
    for n, card_id in enumerate(ids):
        (out / card_id).mkdir(parents=True)
        for size, width in (("high", 60), ("low", 30)):
            Image.new("RGB", (width, width * 7 // 5), (40 * n, 90, 200)).save(out / card_id / f"{size}.jpg")
    return out


def deployment(tmp: Path, db: Database, **env: str) -> Service:
    return Service(db, tmp / "data", {**ENV, **env})


def stored_secrets(service: Service) -> list[str]:
    """`webhook_endpoints.secret` as the database holds it (no code of ours in between)."""
    if service.db.backend == "postgresql":
        with psycopg.connect(service.db.url) as conn:
            return [row[0] for row in conn.execute("SELECT secret FROM webhook_endpoints ORDER BY id")]
    path = service.db.url.removeprefix("sqlite:///") or str(service.data_dir / "cardcat.db")
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT secret FROM webhook_endpoints ORDER BY id")]


def subscribe(service: Service, receiver: Receiver) -> str:
    """The real `cardcat webhooks add`; its last line is the secret, shown this once."""
    receiver.secret = service.cli("webhooks", "add", receiver.url).stdout.strip().splitlines()[-1]
    assert receiver.secret.startswith("whsec_")
    return receiver.secret


def assert_not_plain(stored: str, secret: str) -> None:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    assert stored.startswith(PREFIX), stored
    for form in (secret, secret.removeprefix("whsec_"), key.hex(), base64.urlsafe_b64encode(key).decode()):
        assert form.rstrip("=") not in stored, "the signing secret is readable in the database"


def deliver_and_verify(service: Service, receiver: Receiver) -> int:
    """`cardcat events deliver --once`: every post arrives, and verifies with the printed secret."""
    counts = json.loads(service.cli("events", "deliver", "--once").stdout)
    assert receiver.received, counts
    assert all(r.verified for r in receiver.received), "every post verifies with the printed secret"
    assert counts["delivered"] == len(receiver.received)
    return len(receiver.received)


# --- file modes --------------------------------------------------------------------------------------


def test_everything_the_service_writes_in_its_data_dir_is_private_under_umask_022(tmp_path: Path) -> None:
    """a73d9a9: data dir 0755, cardcat.db (and -wal, -shm), images, snapshots and bulk files 0644."""
    feed = write_demo_catalog(tmp_path / "feed")
    faces = write_faces(feed, tmp_path / "faces")
    prices = write_demo_prices(feed, tmp_path / "prices", days=2)
    receiver = Receiver().start()
    # The embedded default: SQLite inside the data dir.
    service = deployment(tmp_path, Database("", "sqlite"))
    try:
        with umask(0o022):
            service.cli("db", "upgrade")
            service.cli("catalog", "sync", "--from", str(feed), "--images", str(faces), "--quiet")
            service.cli("prices", "sync", "--from", str(prices), "--quiet")
            subscribe(service, receiver)
            service.start()
            with service.client() as client:
                assert client.get("/v1/cards", params={"limit": 1}).status_code == 200
            data = service.data_dir
            # While the server holds the database open, SQLite keeps its -wal and -shm beside it.
            for name in ("cardcat.db", "cardcat.db-wal", "cardcat.db-shm", "secrets.json"):
                assert mode(data / name) == 0o600, (name, oct(mode(data / name)))
            assert mode(data) == 0o700
            images = [p for p in (data / "images").rglob("*.jpg")]
            snapshots = list((data / "snapshots").iterdir())
            bulk = list((data / "bulk").iterdir())
            assert len(images) == 6 and snapshots and bulk, (images, snapshots, bulk)
            for path in [*images, *snapshots, *bulk]:
                assert mode(path) == 0o600, (path, oct(mode(path)))
            for folder in ("images", "snapshots", "bulk"):
                assert not open_entries(data / folder), open_entries(data / folder)
            assert mode(images[0].parent) == 0o700
    finally:
        receiver.stop()
        service.stop()


def test_a_data_dir_an_older_version_left_open_is_tightened_on_start(tmp_path: Path) -> None:
    """a73d9a9 left an existing 0755/0644 data dir (and a 0644 secrets.json, only warned about) as it
    was; the first process of this version makes it private."""
    service = deployment(tmp_path, Database("", "sqlite"))
    data = service.data_dir
    with umask(0o022):
        service.cli("db", "upgrade")
        store = data / "images" / "ab"
        store.mkdir(parents=True)
        (store / f"{'ab' * 32}-high.jpg").write_bytes(b"\xff\xd8 face")
        (data / "secrets.json").write_text(json.dumps({"cursor_secret": "c" * 43, "file_secret": "f" * 43}))
        for path in [data, *data.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        assert open_entries(data)
        service.cli("keys", "create", "--name", "after-upgrade")
    assert not open_entries(data), open_entries(data)
    assert mode(data) == 0o700 and mode(data / "cardcat.db") == 0o600
    assert mode(store / f"{'ab' * 32}-high.jpg") == 0o600


# --- webhook secrets ---------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_database_holds_no_plain_webhook_secret_and_deliveries_verify(
    backend: str, tmp_path: Path
) -> None:
    """a73d9a9 stored `whsec_...` as it was printed: anyone who reads the table can sign events."""
    feed = write_demo_catalog(tmp_path / "feed")
    service = deployment(tmp_path, create_database(backend, tmp_path))
    receiver = Receiver().start()
    try:
        service.cli("db", "upgrade")
        secret = subscribe(service, receiver)
        (stored,) = stored_secrets(service)
        assert_not_plain(stored, secret)
        service.cli("catalog", "sync", "--from", str(feed), "--quiet")
        assert deliver_and_verify(service, receiver) == 4
        assert stored_secrets(service) == [stored], "delivering leaves the sealed secret as it was"
    finally:
        receiver.stop()
        service.stop()


def test_plain_secrets_of_an_older_version_keep_working_and_rotation_rekeys_them(tmp_path: Path) -> None:
    """A row a73d9a9 wrote (plain text) is encrypted by `cardcat db upgrade` and still signs; a deliverer
    without the key that sealed a row records a failed attempt and posts nothing unsigned; `cardcat
    webhooks rekey` (the old key given as an old key) moves the row to the new key, which alone then
    signs the deliveries that waited."""
    feed = write_demo_catalog(tmp_path / "feed")
    service = deployment(tmp_path, create_database("sqlite", tmp_path))
    receiver = Receiver().start()
    try:
        service.cli("db", "upgrade")
        legacy = new_secret()
        receiver.secret = legacy
        with sqlite3.connect(service.db.url.removeprefix("sqlite:///")) as conn:
            conn.execute(
                "INSERT INTO webhook_endpoints (url, secret, created_at) VALUES (?, ?, ?)",
                (receiver.url, legacy, datetime.now(UTC).isoformat(sep=" ")),
            )
        assert stored_secrets(service) == [legacy]
        assert "encrypted 1 webhook secrets" in service.cli("db", "upgrade").stdout
        (sealed,) = stored_secrets(service)
        assert_not_plain(sealed, legacy)
        service.cli("catalog", "sync", "--from", str(feed), "--quiet")
        assert deliver_and_verify(service, receiver) == 4

        file_key = json.loads((service.data_dir / "secrets.json").read_text())["webhook_secrets_key"]
        service.extra_env["CARDCAT_WEBHOOK_SECRETS_KEY"] = "n" * 43  # a new key, the old one forgotten
        receiver.clear()
        edit(feed, "series", lambda rows: [{**row, "name": row["name"] + " (renamed)"} for row in rows])
        service.cli("catalog", "sync", "--from", str(feed), "--quiet")
        counts = json.loads(service.cli("events", "deliver", "--once").stdout)
        assert counts["delivered"] == 0 and counts["retry"] == 1, counts
        assert not receiver.received, "nothing is posted without a secret to sign it"

        service.extra_env["CARDCAT_WEBHOOK_SECRETS_OLD_KEYS"] = f"{'o' * 40},{file_key}"
        assert json.loads(service.cli("webhooks", "rekey").stdout) == {"rekeyed": 1, "unreadable": []}
        (rekeyed,) = stored_secrets(service)
        assert rekeyed.split(":")[1] != sealed.split(":")[1], "sealed under another key id"
        assert_not_plain(rekeyed, legacy)
        del service.extra_env["CARDCAT_WEBHOOK_SECRETS_OLD_KEYS"]
        assert deliver_and_verify(service, receiver) >= 1
    finally:
        receiver.stop()
        service.stop()


def test_an_old_secrets_file_gets_one_webhook_key_however_many_processes_race(tmp_path: Path) -> None:
    """secrets.json from a73d9a9 (cursor and file secrets only): eight processes that need the webhook
    key at once all get the same one, and the other two secrets are kept."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    old = {"cursor_secret": "c" * 43, "file_secret": "f" * 43}
    (data / "secrets.json").write_text(json.dumps(old))
    (data / "secrets.json").chmod(0o600)
    code = (
        "import sys; from catalog_api.kit.secret_store import stored_webhook_key as k; print(k(sys.argv[1]))"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(data)], cwd=REPO, stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    keys = {proc.communicate(timeout=60)[0].strip() for proc in procs}
    assert all(proc.returncode == 0 for proc in procs)
    assert len(keys) == 1 and len(keys.pop()) >= 32
    stored: dict[str, Any] = json.loads((data / "secrets.json").read_text())
    assert {k: stored[k] for k in old} == old and mode(data / "secrets.json") == 0o600


def test_the_k8s_ingress_takes_the_webhook_secrets_key_from_a_secret() -> None:
    """Replicas there share no writable data dir, so the key must come from the Secret, like the others."""
    docs = yaml.safe_load_all((REPO / "deploy" / "k8s" / "ingress.yaml").read_text())
    (deployment_doc,) = [d for d in docs if d and d["kind"] == "Deployment"]
    for container in deployment_doc["spec"]["template"]["spec"]["containers"]:
        env = {e["name"]: e for e in container.get("env", [])}
        assert "secretKeyRef" in env["CARDCAT_WEBHOOK_SECRETS_KEY"]["valueFrom"]
