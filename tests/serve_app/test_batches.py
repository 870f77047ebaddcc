"""Scan batches through the real server, database and scanner (`cardcat serve --scan`, PostgreSQL, the
session's scanner stack): #44 items 1 and 2. The queue's own guarantees on both databases are in
tests/catalog_api/test_batch_queue.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.metrics_text import Scrape
from cardcat.stack import Service
from catalog_api.batches.schemas import Batch, BatchResult
from catalog_api.kit.schemas import Envelope, Page
from tests.catalog_api.helpers import failed
from tests.catalog_api.test_events import Receiver
from tests.serve_app.test_scan_http import photo_of, scan

BATCHES = "/v1/scan/batches"
# Unique artworks (one confident match each) and a reprinted one (a race), as in test_scan_http.
CARDS = ("swsh10tg-TG03", "swsh10tg-TG07", "base1-4")


@pytest.fixture
def client(scanner_stack: Service) -> Iterator[httpx.Client]:
    with scanner_stack.client() as c:
        c.timeout = httpx.Timeout(120)
        yield c


def accepted(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 202, response.text
    Envelope[Batch].model_validate(response.json())
    data: dict[str, Any] = response.json()["data"]
    return data


def upload(
    client: httpx.Client, batch_id: str, photos: list[tuple[str, bytes]], **headers: str
) -> httpx.Response:
    files = [("image", (name, data, "image/jpeg")) for name, data in photos]
    return client.post(f"{BATCHES}/{batch_id}/photos", files=files, headers=headers)


def wait_until_finished(client: httpx.Client, batch_id: str, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = client.get(f"{BATCHES}/{batch_id}")
        assert response.status_code == 200, response.text
        batch: dict[str, Any] = response.json()["data"]
        if batch["status"] in ("done", "cancelled", "expired"):
            return batch
        time.sleep(0.3)
    raise AssertionError(f"batch {batch_id} not finished in {timeout} s: {batch}")


def all_results(client: httpx.Client, batch_id: str, limit: int = 2) -> list[dict[str, Any]]:
    items, cursor = [], None
    while True:
        params: dict[str, Any] = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        response = client.get(f"{BATCHES}/{batch_id}/results", params=params)
        assert response.status_code == 200, response.text
        Envelope[Page[BatchResult]].model_validate(response.json())
        page = response.json()["data"]
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def photo_files(service: Service, batch_id: str) -> list[Path]:
    directory = service.data_dir / "batches" / batch_id
    return sorted(directory.iterdir()) if directory.exists() else []


def test_uploaded_photos_are_answered_as_single_scans_and_then_deleted(
    client: httpx.Client, scanner_stack: Service
) -> None:
    photos = [(f"{card}.jpg", photo_of(card)) for card in CARDS]
    before = Scrape.get(f"{scanner_stack.base_url}/metrics")
    batch = accepted(client.post(BATCHES))
    assert batch["status"] == "open" and batch["photos"] == {"total": 0, "answered": 0, "waiting": 0}
    first = accepted(upload(client, batch["id"], photos[:2]))
    assert first["photos"]["total"] == 2
    accepted(upload(client, batch["id"], photos[2:]))
    closed = accepted(client.post(f"{BATCHES}/{batch['id']}/close"))
    assert closed["status"] in ("queued", "running", "done") and closed["closed_at"]
    done = wait_until_finished(client, batch["id"])
    assert done["status"] == "done" and done["progress"] == 1 and done["photos"]["answered"] == 3
    assert done["started_at"] and done["finished_at"] and done["photos"]["waiting"] == 0

    results = all_results(client, batch["id"])
    assert sorted(result["index"] for result in results) == [0, 1, 2]
    for result in results:
        name, data = photos[result["index"]]
        assert result["name"] == name and result["url"] is None and result["error"] is None
        single = scan(client, data).json()["data"]
        # The same answer a single scan of the photo gives (the scanner is deterministic on a photo).
        assert [m["card"] for m in result["matches"]] == [m["card"] for m in single["matches"]]
        assert result["unidentified"] == single["unidentified"] and result["analysis"] == single["analysis"]
    outcomes = done["outcomes"]
    assert sum(outcomes.values()) == 3 and outcomes["error"] == 0
    assert outcomes["match"] >= 2, results  # the two unique artworks
    # Tiers counted as the answers show them (the analysis equals a single scan's, tier included).
    tiers = [result["analysis"]["tier"] for result in results]
    assert done["tiers"] == {tier: tiers.count(tier) for tier in ("certain", "likely", "review")}
    for result in results:
        lone = len(result["matches"]) == 1
        assert (result["analysis"]["tier"] != "review") == lone, result
    assert photo_files(scanner_stack, batch["id"]) == [], "scanned photos are deleted"
    after = Scrape.get(f"{scanner_stack.base_url}/metrics")
    for outcome, count in outcomes.items():
        counted = after.sum("cardcat_batch_photos_total", outcome=outcome)
        assert counted - before.sum("cardcat_batch_photos_total", outcome=outcome) == count, outcome
    assert after.sum("cardcat_batch_queue_depth", state="waiting") == 0


def test_a_bad_photo_refuses_the_whole_upload_and_changes_nothing(
    client: httpx.Client, scanner_stack: Service
) -> None:
    batch = accepted(client.post(BATCHES))
    good = ("good.jpg", photo_of(CARDS[0]))
    error = failed(
        upload(client, batch["id"], [good, ("notes.txt", b"not a photo at all")]), 400, "unsupported_image"
    )
    assert "notes.txt" in error["message"]
    failed(upload(client, batch["id"], [good, ("empty.jpg", b"")]), 400, "bad_request")
    failed(
        client.post(f"{BATCHES}/{batch['id']}/photos", content=b"x", headers={"content-type": "text/plain"}),
        400,
        "bad_request",
    )
    unchanged = client.get(f"{BATCHES}/{batch['id']}").json()["data"]
    assert unchanged["photos"]["total"] == 0
    assert photo_files(scanner_stack, batch["id"]) == [], "nothing staged is left behind"
    accepted(client.post(f"{BATCHES}/{batch['id']}/close"))
    assert wait_until_finished(client, batch["id"])["status"] == "done"


def test_a_keys_batches_are_invisible_to_other_keys(client: httpx.Client, scanner_stack: Service) -> None:
    batch = accepted(client.post(BATCHES))
    with scanner_stack.client() as other:
        for method, path in (
            ("GET", ""), ("GET", "/results"), ("POST", "/close"), ("DELETE", ""),
        ):  # fmt: skip
            failed(other.request(method, f"{BATCHES}/{batch['id']}{path}"), 404, "not_found")
        failed(upload(other, batch["id"], [("a.jpg", photo_of(CARDS[0]))]), 404, "not_found")
        failed(other.get(f"{BATCHES}/bat_{'0' * 24}"), 404, "not_found")
        failed(other.get(f"{BATCHES}/..%2F..%2Fsecrets.json"), 404, "not_found")
    assert client.get(f"{BATCHES}/{batch['id']}").json()["data"]["photos"]["total"] == 0
    accepted(client.post(f"{BATCHES}/{batch['id']}/close"))


def test_a_repeated_post_with_its_idempotency_key_happens_once(client: httpx.Client) -> None:
    first = accepted(client.post(BATCHES, headers={"Idempotency-Key": "open-1"}))
    again = accepted(client.post(BATCHES, headers={"Idempotency-Key": "open-1"}))
    assert again["id"] == first["id"]
    photo = [("a.jpg", photo_of(CARDS[0]))]
    accepted(upload(client, first["id"], photo, **{"Idempotency-Key": "photos-1"}))
    replayed = accepted(upload(client, first["id"], photo, **{"Idempotency-Key": "photos-1"}))
    assert replayed["photos"]["total"] == 1
    assert client.get(f"{BATCHES}/{first['id']}").json()["data"]["photos"]["total"] == 1
    accepted(client.post(f"{BATCHES}/{first['id']}/close"))
    # A retry that comes after the close still gets its first answer; a new upload is refused.
    assert (
        accepted(upload(client, first["id"], photo, **{"Idempotency-Key": "photos-1"}))["id"] == first["id"]
    )
    failed(upload(client, first["id"], photo), 409, "conflict")
    # The same key for another request: refused, nothing added.
    other = [("b.jpg", photo_of(CARDS[1]))]
    failed(upload(client, first["id"], other, **{"Idempotency-Key": "photos-1"}), 409, "conflict")
    failed(client.post(BATCHES, headers={"Idempotency-Key": "\x01"}), 400, "bad_request")
    assert wait_until_finished(client, first["id"])["photos"]["answered"] == 1


def test_url_batches_are_checked_when_made_and_fetched_safely(client: httpx.Client) -> None:
    failed(client.post(BATCHES, json={"urls": ["http://example.com/a.jpg"]}), 400, "url_not_allowed")
    failed(client.post(BATCHES, json={"urls": "https://example.com/a.jpg"}), 400, "bad_request")
    failed(
        client.post(BATCHES, json={"urls": ["https://example.com/a.jpg"], "page": True}), 400, "bad_request"
    )
    failed(
        client.post(BATCHES, content=b"{", headers={"content-type": "application/json"}), 400, "bad_request"
    )
    failed(client.post(BATCHES, json={"urls": ["https://127.0.0.1:9/a.jpg"]}), 400, "url_not_allowed")
    # A host name that resolves to loopback is refused when its turn comes: that photo's error.
    batch = accepted(client.post(BATCHES, json={"urls": ["https://localhost:9/a.jpg"]}))
    assert batch["status"] in ("queued", "running", "done") and batch["photos"]["total"] == 1
    done = wait_until_finished(client, batch["id"])
    assert done["outcomes"]["error"] == 1
    [result] = all_results(client, batch["id"])
    assert result["error"]["code"] == "url_not_allowed" and result["matches"] == []
    assert result["name"] == result["url"] == "https://localhost:9/a.jpg"
    empty = accepted(client.post(BATCHES, json={"urls": []}))
    assert empty["status"] == "done" and empty["progress"] == 1


def test_cancelling_deletes_the_waiting_photos_and_keeps_the_answers(
    client: httpx.Client, scanner_stack: Service
) -> None:
    batch = accepted(client.post(BATCHES))
    photos = [(f"{n}.jpg", photo_of(CARDS[n % len(CARDS)])) for n in range(12)]
    accepted(upload(client, batch["id"], photos))
    cancelled = client.delete(f"{BATCHES}/{batch['id']}")
    assert cancelled.status_code == 200 and cancelled.json()["data"]["status"] == "cancelled"
    assert photo_files(scanner_stack, batch["id"]) == []
    failed(upload(client, batch["id"], photos[:1]), 409, "conflict")
    time.sleep(1)  # a scan in flight when it was cancelled finishes; its answer is not written
    after = client.get(f"{BATCHES}/{batch['id']}").json()["data"]
    assert after["status"] == "cancelled" and after["photos"]["waiting"] == 0
    answered = all_results(client, batch["id"])
    assert len(answered) == after["photos"]["answered"] < 12
    again = client.delete(f"{BATCHES}/{batch['id']}").json()["data"]  # a finished batch stays as it is
    assert again["status"] == "cancelled"


def test_results_polled_while_a_batch_runs_come_once_each(client: httpx.Client) -> None:
    batch = accepted(client.post(BATCHES))
    accepted(upload(client, batch["id"], [(f"{n}.jpg", photo_of(CARDS[n % 2])) for n in range(6)]))
    accepted(client.post(f"{BATCHES}/{batch['id']}/close"))
    seen: list[int] = []
    cursor = None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        params = {"limit": 1} | ({"cursor": cursor} if cursor else {})
        page = client.get(f"{BATCHES}/{batch['id']}/results", params=params).json()["data"]
        seen += [item["index"] for item in page["items"]]
        if page["next_cursor"] is None:
            break
        cursor = page["next_cursor"]
        if not page["items"]:
            time.sleep(0.2)
    assert sorted(seen) == list(range(6)), seen


def test_a_finished_batch_exports_with_prices_in_both_layouts(
    client: httpx.Client, scanner_stack: Service, tmp_path: Path
) -> None:
    import csv
    import io
    import json

    from catalog_api.batches.exports import CARDCAT_COLUMNS, TCGPLAYER_COLUMNS
    from catalog_api.prices.demo_prices import write_demo_prices

    feed = scanner_stack.data_dir.parent / "feed"  # what launch_scanner synced
    scanner_stack.cli(
        "prices", "sync", "--from", str(write_demo_prices(feed, tmp_path / "prices", days=2)), "--quiet"
    )
    photos = [(f"{n}.jpg", photo_of(card)) for n, card in enumerate((CARDS[0], CARDS[0], CARDS[1]))]
    batch = accepted(client.post(BATCHES))
    accepted(upload(client, batch["id"], photos))
    accepted(client.post(f"{BATCHES}/{batch['id']}/close"))
    done = wait_until_finished(client, batch["id"])
    assert done["outcomes"]["match"] == 3, all_results(client, batch["id"])

    ours = client.get(f"{BATCHES}/{batch['id']}/export")
    assert ours.status_code == 200 and ours.headers["content-type"].startswith("text/csv")
    assert f'filename="{batch["id"]}-cardcat.csv"' in ours.headers["content-disposition"]
    table = list(csv.DictReader(io.StringIO(ours.text, newline="")))
    assert tuple(table[0]) == CARDCAT_COLUMNS
    assert sorted((row["card_id"], row["quantity"]) for row in table) == [(CARDS[0], "2"), (CARDS[1], "1")]
    assert all(
        row["market_cents"].isdigit() and row["printing"] and row["condition"] == "NM" for row in table
    )

    market = client.get(f"{BATCHES}/{batch['id']}/export", params={"layout": "tcgplayer", "condition": "LP"})
    lines = list(csv.reader(io.StringIO(market.text, newline="")))
    assert (
        tuple(lines[0]) == TCGPLAYER_COLUMNS
        and len(lines) == 3
        and market.headers["x-cardcat-left-out"] == "0"
    )
    assert all(line[4] == "LP" and line[6] == "English" for line in lines[1:])
    assert all(not line[7] or float(line[7]) > 0 for line in lines[1:])

    records = [
        json.loads(line)
        for line in client.get(
            f"{BATCHES}/{batch['id']}/export", params={"format": "ndjson"}
        ).text.splitlines()
    ]
    assert sum(record["quantity"] for record in records) == 3
    failed(client.get(f"{BATCHES}/{batch['id']}/export", params={"format": "xlsx"}), 400, "bad_request")
    failed(client.get(f"{BATCHES}/{batch['id']}/export", params={"condition": "MINT"}), 400, "bad_request")
    with scanner_stack.client() as other:
        failed(other.get(f"{BATCHES}/{batch['id']}/export"), 404, "not_found")


def test_batch_events_go_through_the_outbox_in_the_order_of_the_answers(
    client: httpx.Client, scanner_stack: Service
) -> None:
    import json

    import psycopg

    failed(client.post(BATCHES, json={"events": "every_photo"}), 400, "bad_request")
    # A real receiver on loopback (private addresses allowed for this CLI run only), subscribed first.
    private = {"CARDCAT_WEBHOOKS_ALLOW_PRIVATE": "true"}

    def cli(*args: str) -> str:
        return scanner_stack.cli(*args, env=private).stdout

    receiver = Receiver().start()
    added = cli("webhooks", "add", receiver.url).strip().splitlines()
    receiver.secret, endpoint_id = added[-1], added[0].split()[2]
    batch = accepted(client.post(BATCHES, json={"events": "per_photo"}))
    assert batch["events"] == "per_photo"
    accepted(upload(client, batch["id"], [(f"{n}.jpg", photo_of(CARDS[n])) for n in range(3)]))
    accepted(client.post(f"{BATCHES}/{batch['id']}/close"))
    done = wait_until_finished(client, batch["id"])
    with psycopg.connect(scanner_stack.db.url) as conn:
        rows = conn.execute(
            "SELECT name, body FROM events WHERE body LIKE %s ORDER BY seq", (f"%{batch['id']}%",)
        ).fetchall()
    names = [name for name, _ in rows]
    assert names == ["cardgame.scan.result"] * 3 + ["cardgame.scan.batch.completed"], names
    bodies = [json.loads(body) for _, body in rows]
    assert [body["data"]["sequence"] for body in bodies[:3]] == [1, 2, 3]
    answers = {result["index"]: result for result in all_results(client, batch["id"])}
    for body in bodies[:3]:
        [result] = body["data"]["result"]
        assert body["data"]["batch_id"] == batch["id"] and result == answers[result["index"]]
    [completed] = bodies[3]["data"]["batch"]
    assert completed["id"] == batch["id"] and completed["status"] == "done" == done["status"]
    assert completed["outcomes"] == done["outcomes"] and completed["tiers"] == done["tiers"]
    # Delivered, signed, in the order of the answers (other tests' events may be delivered beside them).
    try:
        cli("events", "deliver", "--once")
        got = [event for event in receiver.accepted() if batch["id"] in json.dumps(event)]
        assert [event["name"] for event in got] == names
        assert [event["data"] for event in got] == [body["data"] for body in bodies]
        assert all(r.verified for r in receiver.received), "every post carries a valid signature"
    finally:
        cli("webhooks", "remove", endpoint_id)
        receiver.stop()


def test_the_operator_lists_shows_and_cancels_any_keys_batches(
    client: httpx.Client, scanner_stack: Service
) -> None:
    import json

    batch = accepted(client.post(BATCHES))
    listed = scanner_stack.cli("batches", "list", "--status", "open").stdout.splitlines()
    assert any(line.startswith(batch["id"] + "\t") and "\topen\t0/0\t" in line for line in listed), listed
    shown = json.loads(scanner_stack.cli("batches", "show", batch["id"]).stdout)
    assert shown == client.get(f"{BATCHES}/{batch['id']}").json()["data"]
    assert "cancelled" in scanner_stack.cli("batches", "cancel", batch["id"]).stdout
    assert client.get(f"{BATCHES}/{batch['id']}").json()["data"]["status"] == "cancelled"
    assert "already finished" in scanner_stack.cli("batches", "cancel", batch["id"]).stdout
    missing = scanner_stack.cli("batches", "show", "bat_" + "0" * 24, check=False)
    assert missing.returncode == 1 and "No scan batch" in missing.stderr
