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

from cardcat.stack import Service
from catalog_api.batches.schemas import Batch, BatchResult
from catalog_api.kit.schemas import Envelope, Page
from tests.catalog_api.helpers import failed
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
    assert photo_files(scanner_stack, batch["id"]) == [], "scanned photos are deleted"


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
    # The same key for another request: refused, nothing added.
    other = [("b.jpg", photo_of(CARDS[1]))]
    failed(upload(client, first["id"], other, **{"Idempotency-Key": "photos-1"}), 409, "conflict")
    failed(client.post(BATCHES, headers={"Idempotency-Key": "\x01"}), 400, "bad_request")
    accepted(client.post(f"{BATCHES}/{first['id']}/close"))
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
