"""Webhooks over real https: a loopback receiver with a certificate from a test CA (trustme).

The deliverer connects to the address it checked (not a fresh lookup), sends the endpoint's host name as
SNI and in `Host`, and checks the receiver's certificate against that name and the trusted CAs (the
public ones plus `CARDCAT_WEBHOOKS_CA_FILE`). A certificate for another name, or from a CA nobody
trusts, is a failed attempt that delivers nothing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trustme

from cardcat.stack import ServerThread, Service, create_database
from catalog_api.events.signing import sign
from catalog_api.ingest.demo_catalog import write_demo_catalog


@dataclass
class TLSReceiver:
    """An https webhook receiver on 127.0.0.1 that records what arrives and the SNI each handshake sent."""

    server_names: list[str | None] = field(default_factory=list)
    posts: list[tuple[dict[str, str], bytes]] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        self.posts.append((headers, body))
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def serve(self, cert: trustme.LeafCert, folder: Path) -> ServerThread:
        pem = folder / "server.pem"
        cert.private_key_and_cert_chain_pem.write_to_path(str(pem))
        server = ServerThread(self, ssl_certfile=str(pem), ssl_keyfile=str(pem))
        server.server.config.load()
        server.server.config.ssl.sni_callback = lambda _sock, name, _ctx: self.server_names.append(name)
        return server


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = Service(
        create_database("sqlite", tmp_path), tmp_path / "data", {"CARDCAT_WEBHOOKS_ALLOW_PRIVATE": "true"}
    )
    svc.cli("db", "upgrade")
    yield svc
    svc.stop()


def deliver(service: Service, url: str, ca_file: Path | None, tmp_path: Path) -> tuple[str, dict[str, int]]:
    """Subscribe `url`, sync the demo catalog (its events go out) and deliver once; returns the endpoint's
    secret and the deliverer's counts."""
    secret = service.cli("webhooks", "add", url).stdout.strip().splitlines()[-1]
    feed = write_demo_catalog(tmp_path / "feed")
    service.cli("catalog", "sync", "--from", str(feed), "--quiet")
    if ca_file is not None:
        service.extra_env["CARDCAT_WEBHOOKS_CA_FILE"] = str(ca_file)
    counts: dict[str, int] = json.loads(service.cli("events", "deliver", "--once").stdout)
    return secret, counts


def test_https_delivery_checks_the_certificate_against_the_host_name(
    service: Service, tmp_path: Path
) -> None:
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    hook = TLSReceiver()
    with hook.serve(ca.issue_cert("localhost"), tmp_path) as server:
        secret, counts = deliver(service, f"https://localhost:{server.port}/hook", ca_file, tmp_path)
    assert counts["delivered"] >= 1 and counts["retry"] == 0, counts
    assert hook.posts and set(hook.server_names) == {"localhost"}
    for headers, body in hook.posts:
        assert headers["host"] == f"localhost:{server.port}"
        expected = sign(secret, headers["webhook-id"], int(headers["webhook-timestamp"]), body.decode())
        assert headers["webhook-signature"] == expected


@pytest.mark.parametrize("case", ["certificate for another name", "CA not trusted"])
def test_a_receiver_that_fails_the_certificate_check_gets_nothing(
    service: Service, tmp_path: Path, case: str
) -> None:
    ca, other_ca = trustme.CA(), trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    cert = (
        ca.issue_cert("hooks.example.com")
        if case == "certificate for another name"
        else other_ca.issue_cert("localhost")
    )
    hook = TLSReceiver()
    with hook.serve(cert, tmp_path) as server:
        _, counts = deliver(service, f"https://localhost:{server.port}/hook", ca_file, tmp_path)
    assert counts["delivered"] == 0 and counts["retry"] >= 1, counts
    assert hook.posts == []
    assert hook.server_names and set(hook.server_names) == {"localhost"}  # it got as far as the handshake
    with sqlite3.connect(service.db.url.removeprefix("sqlite:///")) as db:
        errors = {row[0] for row in db.execute("SELECT last_error FROM deliveries WHERE attempts > 0")}
    assert errors and all("CERTIFICATE_VERIFY_FAILED" in error for error in errors), errors
