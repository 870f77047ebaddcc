"""Schemathesis against the real server's `/openapi.json` (issue 17, fuzzing in CI).

Every documented operation but `POST /v1/scan`, `POST /v1/scan/page` and `POST /v1/scan/batches` (this
server runs no scanner; the scanner's own tests fuzz the scan) gets generated requests, valid and
invalid, with a key whose budget the run cannot spend. Each answer must be no server error, a status the
document lists for that operation, and on `/v1` the `{data, error}` envelope (a `304` has no body). The
run is bounded and derandomized, so CI sees the same cases every time and it stays well under two
minutes on two cores.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import status_code_conformance

from cardcat.stack import Service, launch

MAX_EXAMPLES = 150  # per operation, for each of valid and invalid generation


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def fuzz_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, feed_dir: Path
) -> Iterator[Service]:
    """Both backends: PostgreSQL refuses text SQLite takes (NUL), so only it finds some bugs."""
    backend = request.param
    svc = launch(backend, tmp_path_factory.mktemp(f"fuzz-{backend}"), feed_dir, CARDCAT_RATE_LIMIT="10000000")
    yield svc
    svc.stop()


@pytest.fixture(scope="module")
def api_schema(fuzz_server: Service) -> Any:
    return schemathesis.openapi.from_url(f"{fuzz_server.base_url}/openapi.json")


BATCH_OPERATIONS = [
    ("POST", "/v1/scan/batches/{batch_id}/photos"),
    ("POST", "/v1/scan/batches/{batch_id}/close"),
    ("GET", "/v1/scan/batches/{batch_id}"),
    ("GET", "/v1/scan/batches/{batch_id}/results"),
    ("GET", "/v1/scan/batches/{batch_id}/export"),
    ("DELETE", "/v1/scan/batches/{batch_id}"),
]
# The batch routes answer from their first checks here (no scanner, no batch): fewer examples find all.
BATCH_EXAMPLES = 10

# Every operation but the scan, listed so a new route fails `test_every_operation_is_fuzzed` until it
# is added here. (Schemathesis's own pytest loader, `from_fixture`, does not run under pytest 9.)
OPERATIONS = [
    ("GET", "/v1/cards"),
    ("GET", "/v1/cards/{card_id}"),
    ("GET", "/v1/series"),
    ("GET", "/v1/series/{series_id}"),
    ("GET", "/v1/expansions"),
    ("GET", "/v1/expansions/{expansion_id}"),
    ("GET", "/v1/products"),
    ("GET", "/v1/products/{product_id}"),
    ("GET", "/v1/movers"),
    ("GET", "/v1/cards/{card_id}/prices"),
    ("GET", "/v1/products/{product_id}/prices"),
    ("GET", "/v1/bulk"),
    ("GET", "/files/bulk/{file_name}"),
    ("GET", "/health"),
    ("GET", "/images/{key}/{size}.jpg"),
    ("GET", "/files/snapshots/{file_name}"),
    # Scan batches: this server has no scanner, so a create answers 503 and every batch id is unknown
    # (404); what is fuzzed is that no input reaches SQL, a path or an error page unchecked.
    *BATCH_OPERATIONS,
]
# Without a scanner these answer 503 scan_unavailable, which schemathesis counts as a server error;
# tests/serve_app/test_batches.py, test_scan_page.py and the scanner's own tests send them bad bodies.
NOT_FUZZED = {("POST", "/v1/scan"), ("POST", "/v1/scan/page"), ("POST", "/v1/scan/batches")}
# No parameters, or only unconstrained path strings: Hypothesis finds no schema-violating request.
NO_INVALID_INPUT = {
    ("GET", "/health"),
    ("GET", "/images/{key}/{size}.jpg"),
    ("GET", "/v1/bulk"),
    ("GET", "/v1/scan/batches/{batch_id}"),
    ("GET", "/v1/scan/batches/{batch_id}/results"),
    ("GET", "/v1/scan/batches/{batch_id}/export"),
    ("DELETE", "/v1/scan/batches/{batch_id}"),
}
RUNS = [
    (method, path, mode)
    for method, path in OPERATIONS
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode is GenerationMode.POSITIVE or (method, path) not in NO_INVALID_INPUT
]


def assert_envelope(path: str, status: int, content: bytes) -> None:
    """Every `/v1` answer is `{data, error}`: one of them null, an error with a code and a message."""
    if not path.startswith("/v1") or status == 304:
        return
    body = orjson.loads(content)
    assert isinstance(body, dict) and set(body) == {"data", "error"}, body
    if status < 400:
        assert body["error"] is None and body["data"] is not None, body
    else:
        assert body["data"] is None and set(body["error"]) == {"code", "message"}, body


def test_every_operation_is_fuzzed(api_schema: Any) -> None:
    documented = {
        (method.upper(), path)
        for path, operations in api_schema.raw_schema["paths"].items()
        for method in operations
    }
    assert documented == set(OPERATIONS) | NOT_FUZZED


@pytest.mark.parametrize(("method", "path", "mode"), RUNS, ids=lambda value: str(value))
def test_no_server_errors_and_every_v1_answer_is_the_envelope(
    fuzz_server: Service, api_schema: Any, method: str, path: str, mode: GenerationMode
) -> None:
    operation = api_schema[path][method]
    headers = {"Authorization": f"Bearer {fuzz_server.key}"}

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=BATCH_EXAMPLES if (method, path) in BATCH_OPERATIONS else MAX_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        response = case.call(base_url=fuzz_server.base_url, headers=headers, timeout=30)
        checks = [not_a_server_error, status_code_conformance]
        case.validate_response(response, checks=checks, headers=headers)
        assert_envelope(path, response.status_code, response.content)

    run()
