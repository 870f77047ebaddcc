"""The ingress's Prometheus metrics, declared once: every name `/metrics` can show is here (or in
`ops/scrape_metrics.py` for the values read from the database at scrape time), so the rooms that count
things (the gate, the scan route, the deliverer, the HTTP middleware) share one vocabulary and the
Grafana dashboard (`deploy/grafana/cardcat.json`) is checked against one list.

Several processes count: the uvicorn workers and the event deliverer. `cardcat serve` points them all at
one directory with `PROMETHEUS_MULTIPROC_DIR` (prometheus_client's multiprocess mode: each process
writes its samples to memory-mapped files there, and `/metrics` in any worker sums them), so a scrape
sees the whole service whichever worker answers. Without that variable (an app built in a test, or
uvicorn started by hand with one worker) the counts live in this process's default registry.

Labels stay few and bounded: a route *template* (`/v1/cards/{card_id}`), never the raw path; a status
code; an outcome or stage from a fixed list.
"""

from __future__ import annotations

import os

from prometheus_client import Counter, Histogram, values

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

# prometheus_client picks its value storage when it is first imported. Ray (imported by the process that
# starts the scanner) may have imported it before `cardcat serve` named the directory, so look again:
# metrics declared below then write to the shared files like every other process's.
if os.environ.get(MULTIPROC_ENV) and values.ValueClass is values.MutexValue:
    values.ValueClass = values.get_value_class()

# Seconds: the catalog reads answer in a few ms, scans in ~0.1-2 s on a CPU, a slow webhook in up to 10 s.
LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# The route label of a request no route matched (a scanner probing random paths adds no series).
UNMATCHED_ROUTE = "unmatched"

HTTP_REQUESTS = Counter(
    "cardcat_http_requests_total",
    "HTTP requests answered, by method, route template and status code.",
    ["method", "route", "status"],
)
HTTP_LATENCY = Histogram(
    "cardcat_http_request_duration_seconds",
    "Time from the request's arrival to the end of its response, by method and route template.",
    ["method", "route"],
    buckets=LATENCY_BUCKETS,
)
RATE_LIMITED = Counter(
    "cardcat_rate_limited_total",
    "Requests refused with 429 by the /v1 gate: `key` (a valid key over its budget) or `anonymous` "
    "(requests without a valid key, counted per client address).",
    ["bucket"],
)

# Scan outcomes: one confident card, a close race (2-5 cards), one of the spec's `unidentified` reasons,
# or an error answer (the error's code is in cardcat_scan_errors_total).
SCAN_OUTCOMES = ("match", "race", "print_unreadable", "no_confident_match", "error")
SCANS = Counter("cardcat_scans_total", "POST /v1/scan answers by outcome.", ["outcome"])
SCAN_ERROR_CODES = Counter(
    "cardcat_scan_errors_total", "POST /v1/scan error answers by error code.", ["code"]
)
# How the scanner found the card (`analysis.path`, #47's cascade): `quick`, its first look; `full`, the
# full pipeline (a first look that was not certain included). The quick share is what the cascade saves.
SCAN_PATH_NAMES = ("quick", "full")
SCAN_PATHS = Counter(
    "cardcat_scan_paths_total", "POST /v1/scan answers by how the card was found: quick or full.", ["path"]
)
# The stages the scanner reports with each decision (`ScanDecision.timings`: decode and locate measured
# in the Detector replica, the rest where the scan is composed, serve_app.pipeline); the scanner also
# exports them itself through Ray's metrics as `ray_cardcat_scanner_stage_seconds`.
SCAN_STAGES = ("decode", "look", "locate", "search", "read", "fuse", "total")
SCAN_STAGE_LATENCY = Histogram(
    "cardcat_scan_stage_seconds",
    "Scanner stage latency as reported by the scanner with each answer (decode, the first look, locate, "
    "search, read, fuse, and the scanner's total).",
    ["stage"],
    buckets=LATENCY_BUCKETS,
)

# What became of a webhook post (`catalog_api.events.deliverer`): delivered (2xx), retry (failed, tried
# again later), disabled (410 Gone, or the last allowed attempt failed).
WEBHOOK_RESULTS = ("delivered", "retry", "disabled")
# `POST /v1/scan/page` (#48): pages answered (or refused), and how many card places each answer listed
# (cards found, backs and empty pockets).
SCAN_PAGE_OUTCOMES = ("ok", "error")
SCAN_PAGES = Counter("cardcat_scan_pages_total", "POST /v1/scan/page answers by outcome.", ["outcome"])
SCAN_PAGE_CARDS = Histogram(
    "cardcat_scan_page_cards",
    "Card places listed per POST /v1/scan/page answer (cards, backs and empty pockets).",
    buckets=(0, 1, 2, 4, 6, 9, 12, 16, 20, 24),
)
WEBHOOK_DELIVERIES = Counter(
    "cardcat_webhook_deliveries_total",
    "Webhook delivery attempts by result: delivered, retry (a failure retried later) or disabled.",
    ["result"],
)
WEBHOOK_FAILURES = Counter(
    "cardcat_webhook_failures_total",
    "Failed webhook delivery attempts: `http_status` (the receiver answered, not 2xx) or `no_answer` "
    "(timeout, refused connection, refused address...).",
    ["kind"],
)
WEBHOOK_POST_LATENCY = Histogram(
    "cardcat_webhook_post_duration_seconds",
    "Time of one webhook post, from connecting to the end of the answer read.",
    buckets=LATENCY_BUCKETS,
)

# Scan batch photos answered by the batch workers (catalog_api.batches), by outcome.
BATCH_PHOTOS = Counter("cardcat_batch_photos_total", "Scan batch photos answered, by outcome.", ["outcome"])
BATCH_OUTCOMES = ("match", "race", "print_unreadable", "no_confident_match", "error")

WEBHOOK_FAILURE_KINDS = ("http_status", "no_answer")
RATE_LIMIT_BUCKETS = ("key", "anonymous")

# Every fixed label value starts at zero, so its series exists from the first scrape (a `rate()` over a
# series that appears with its first event misses that event) and the dashboard's panels show 0, not
# "no data".
for _outcome in SCAN_OUTCOMES:
    SCANS.labels(_outcome)
for _stage in SCAN_STAGES:
    SCAN_STAGE_LATENCY.labels(_stage)
for _path in SCAN_PATH_NAMES:
    SCAN_PATHS.labels(_path)
for _outcome in SCAN_PAGE_OUTCOMES:
    SCAN_PAGES.labels(_outcome)
for _result in WEBHOOK_RESULTS:
    WEBHOOK_DELIVERIES.labels(_result)
for _kind in WEBHOOK_FAILURE_KINDS:
    WEBHOOK_FAILURES.labels(_kind)
for _bucket in RATE_LIMIT_BUCKETS:
    RATE_LIMITED.labels(_bucket)
for _outcome in BATCH_OUTCOMES:
    BATCH_PHOTOS.labels(_outcome)

# Every name above, as a scrape shows it (counters gain `_total`, histograms `_bucket`/`_sum`/`_count`).
DECLARED = (
    HTTP_REQUESTS,
    HTTP_LATENCY,
    RATE_LIMITED,
    SCANS,
    SCAN_ERROR_CODES,
    SCAN_STAGE_LATENCY,
    SCAN_PATHS,
    SCAN_PAGES,
    SCAN_PAGE_CARDS,
    WEBHOOK_DELIVERIES,
    WEBHOOK_FAILURES,
    WEBHOOK_POST_LATENCY,
    BATCH_PHOTOS,
)


def multiprocess_dir() -> str | None:
    """The directory the processes of this service share their samples through, if any."""
    return os.environ.get(MULTIPROC_ENV) or None


def mark_process_dead(pid: int | None = None) -> None:
    """Called by a worker or the deliverer as it exits: drops the files of its live gauges (counters
    and histograms stay, summed into every later scrape, as a counter must)."""
    directory = multiprocess_dir()
    if directory:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid or os.getpid(), directory)
