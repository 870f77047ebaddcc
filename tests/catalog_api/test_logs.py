"""What the logs hold (issue 45 item 14), read from real processes' output.

- The access log of a real `cardcat serve` (its output, cardcat/stack.py): one JSON line a request with
  the method, the route template, the status, the key's public prefix, the latency and the bytes, and
  never the key, the `Authorization` header, the query string or the raw path. `CARDCAT_ACCESS_LOG=false`
  turns it off.
- The deliverer's log (`cardcat events deliver`) of a webhook receiver's reply that tries to forge a log
  line (a newline, a fake line, ANSI escapes): the reply is escaped and cut, so it stays inside its line.
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Any

import httpx

from cardcat.stack import Service
from tests.catalog_api.helpers import eventually, ok
from tests.catalog_api.test_events import (  # noqa: F401  (fixtures of the events deployment)
    Deployment,
    Receiver,
    deployment,
    receiver,
    rename_three_things,
)

ACCESS_FIELDS = {"time", "method", "route", "status", "key", "ms", "bytes"}


def _server_log(service: Service, base_url: str) -> Path:
    return service.data_dir.parent / f"server-{base_url.rsplit(':', 1)[1]}.log"


def _access_lines(text: str) -> list[dict[str, Any]]:
    lines = []
    for line in text.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if set(record) == ACCESS_FIELDS:
                lines.append(record)
    return lines


def test_the_access_log_has_one_line_a_request_and_no_secrets(service: Service) -> None:
    """Reproduces issue 45 item 14 (there was no access log at all: uvicorn's is off, so nothing said
    which route answered what to whom). The key is sent in full and the query carries a secret-looking
    signature; the log names the route template and the key's public prefix only."""
    log = _server_log(service, service.base_url)
    key = service.quick_key()
    secret = f"sig{secrets.token_hex(8)}"
    start = log.stat().st_size
    with service.client(key) as client:
        card_id = ok(client.get("/v1/cards", params={"limit": 1}))["items"][0]["id"]
        read = client.get(f"/v1/cards/{card_id}", params={"signature": secret, "token": secret})
        assert read.status_code == 200
        again = client.get(f"/v1/cards/{card_id}", headers={"If-None-Match": read.headers["ETag"]})
        assert again.status_code == 304  # answered by the response cache, before routing
        missing = client.get(f"/v1/nothing-{secret}")
        assert missing.status_code == 404
    with httpx.Client(base_url=service.base_url) as anonymous:
        malformed = anonymous.get(
            "/v1/cards", params={"q": secret}, headers={"Authorization": f"Bearer not-a-key-{secret}"}
        )
        assert malformed.status_code in (401, 429)  # 429 when the suite spent this address's budget
        file = anonymous.get("/files/bulk/cards.jsonl.gz", params={"expires": "1", "signature": secret})
        assert file.status_code >= 400  # a bad signature (or no key), whichever is checked first

    def logged() -> tuple[str, list[dict[str, Any]]]:
        text = log.read_bytes()[start:].decode()
        lines = _access_lines(text)
        assert len(lines) >= 6, text
        return text, lines

    text, lines = eventually(logged)
    assert key not in text and key[10:] not in text, "the key is never logged"
    assert secret not in text, "neither the query, the raw path nor a malformed token is logged"
    assert "bearer" not in text.lower() and "authorization" not in text.lower()
    expected = [
        ("GET", "/v1/cards", 200, key[:10]),
        ("GET", "/v1/cards/{card_id}", 200, key[:10]),
        ("GET", "/v1/cards/{card_id}", 304, key[:10]),
        ("GET", "unmatched", 404, key[:10]),
        ("GET", "/v1/cards", malformed.status_code, None),
        ("GET", "/files/bulk/{file_name}", file.status_code, None),
    ]
    assert [(r["method"], r["route"], r["status"], r["key"]) for r in lines] == expected, "one line each"
    assert lines[1]["bytes"] == len(read.content) and lines[2]["bytes"] == 0
    assert all(isinstance(r["ms"], float | int) and r["ms"] >= 0 for r in lines)


def test_the_access_log_can_be_turned_off(service: Service) -> None:
    """CARDCAT_ACCESS_LOG=false: the server logs no request."""
    url = service.start(CARDCAT_ACCESS_LOG="false")
    with service.client(base_url=url) as client:
        ok(client.get("/v1/series", params={"limit": 1}))
        assert client.get("/v1/nothing").status_code == 404
    assert _access_lines(_server_log(service, url).read_text()) == []


FORGED = "2026-11-29 00:00:00,000 cardcat.webhooks evt_FORGED to endpoint 1: delivered (200)"


def test_a_receivers_reply_cannot_forge_deliverer_log_lines(
    deployment: Deployment,  # noqa: F811
    receiver: tuple[Receiver, int],  # noqa: F811
) -> None:
    """Reproduces issue 45 item 14: the deliverer logged a failing receiver's reply as sent, so a newline
    in it started a line of the receiver's choosing and ANSI escapes reached the operator's terminal.
    Now the reply is escaped (`\\n`, `\\x1b`) and cut to 200 characters inside its own line."""
    bad, endpoint = receiver
    bad.fail_first = bad.retry_after_first = 1000
    bad.error_body = f"oops\n{FORGED}\r\n\x1b[2J\x1b[1;31mALERT\x1b[0m {'x' * 400}".encode()
    rename_three_things(deployment, "forged log line")
    result = deployment.service.cli("events", "deliver", "--once")
    assert json.loads(result.stdout) == {"delivered": 0, "retry": 1, "disabled": 0}
    log = result.stderr
    assert "\x1b" not in log and "\r" not in log, "no terminal escapes, no carriage return"
    assert not any(line.startswith(FORGED[:23]) for line in log.splitlines()), "no forged line"
    [line] = [line for line in log.splitlines() if f"to endpoint {endpoint}: retry" in line]
    assert f"HTTP 503: oops\\n{FORGED}\\r\\n\\x1b[2J\\x1b[1;31mALERT" in line
    cut = re.search(r": retry \((.*)\.\.\. \(\d+ more characters\)\)$", line)
    assert cut is not None and len(cut.group(1)) <= 200, "cut to 200 characters"
