"""Bearer API keys: every 401 case of the spec, and the `cardcat keys` CLI."""

from __future__ import annotations

import hashlib
import time

import httpx
import psycopg
import pytest

from tests.catalog_api.helpers import failed, ok
from tests.conftest import Service


def get(service: Service, headers: dict[str, str]) -> httpx.Response:
    return httpx.get(f"{service.base_url}/v1/series", headers=headers, timeout=10)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer  cc_" + "A" * 42},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer not-a-key"},
        {"Authorization": "Bearer cc_short"},
        {"Authorization": "Bearer cc_" + "A" * 43},  # well-formed, unknown
        {"Authorization": "Token cc_" + "A" * 43},
    ],
    ids=[
        "missing",
        "empty",
        "scheme-only",
        "spaced",
        "basic",
        "malformed",
        "short",
        "unknown",
        "wrong-scheme",
    ],
)
def test_missing_malformed_unknown_keys_are_401(service: Service, headers: dict[str, str]):
    response = get(service, headers)
    failed(response, 401, "unauthorized")
    assert "RateLimit" in response.headers and response.headers["RateLimit-Policy"] == "300;w=60"


def test_unknown_route_without_key_is_401_not_404(service: Service):
    failed(httpx.get(f"{service.base_url}/v1/nothing-here"), 401, "unauthorized")


def test_revoked_key_is_401(service: Service):
    key = service.new_key("to-revoke")
    assert ok(get(service, {"Authorization": f"Bearer {key}"}))
    assert service.cli("keys", "revoke", key).returncode == 0
    failed(get(service, {"Authorization": f"Bearer {key}"}), 401, "unauthorized")
    assert service.cli("keys", "revoke", key, check=False).returncode == 1, "nothing left to revoke"


def test_revoke_by_listed_prefix(service: Service):
    key = service.new_key("by-prefix")
    listed = [line.split("\t") for line in service.cli("keys", "list").stdout.splitlines()]
    row = next(r for r in listed if key.startswith(r[1]) and r[2] == "by-prefix")
    assert row[3] == "active"
    service.cli("keys", "revoke", row[1])
    failed(get(service, {"Authorization": f"Bearer {key}"}), 401, "unauthorized")
    listed = [line.split("\t") for line in service.cli("keys", "list").stdout.splitlines()]
    assert next(r for r in listed if r[0] == row[0])[3] == "revoked"


def test_expired_key_is_401(service: Service):
    key = service.new_key("short-lived", "--expires-in", "2")
    assert ok(get(service, {"Authorization": f"Bearer {key}"}))
    time.sleep(2.2)
    failed(get(service, {"Authorization": f"Bearer {key}"}), 401, "unauthorized")
    listed = service.cli("keys", "list").stdout
    assert "short-lived\texpired" in listed


def test_key_is_shown_once_and_stored_hashed(service: Service):
    result = service.cli("keys", "create", "--name", "hashed")
    key = result.stdout.strip().splitlines()[-1]
    assert key.startswith("cc_") and len(key) == 46
    if service.db.backend == "postgresql":
        with psycopg.connect(service.db.url) as conn:
            rows = conn.execute("SELECT key_hash, prefix FROM api_keys WHERE name = 'hashed'").fetchall()
            dump = str(conn.execute("SELECT * FROM api_keys").fetchall())
        assert rows == [(hashlib.sha256(key.encode()).hexdigest(), key[:10])]
        assert key not in dump
    assert key not in service.cli("keys", "list").stdout


def test_health_needs_no_key(service: Service):
    response = httpx.get(f"{service.base_url}/health")
    assert response.status_code == 200 and response.json()["error"] is None


def test_a_read_the_cache_holds_still_needs_a_valid_key(service: Service):
    """The response cache answers before routing (deps.CachedReads), but inside the key check."""
    key = service.new_key("cached-read")
    url = f"{service.base_url}/v1/cards?limit=2&cached-read-check=1"
    first = httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=10)
    again = httpx.get(url, headers={"Authorization": f"Bearer {key}", "If-None-Match": first.headers["ETag"]})
    assert ok(first) and again.status_code == 304 and again.headers["ETag"] == first.headers["ETag"]
    failed(httpx.get(url, timeout=10), 401, "unauthorized")
    unknown = {"Authorization": "Bearer cc_" + "A" * 43}
    failed(httpx.get(url, headers=unknown, timeout=10), 401, "unauthorized")
    assert service.cli("keys", "revoke", key).returncode == 0
    failed(httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=10), 401, "unauthorized")
