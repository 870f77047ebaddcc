"""All configuration, from environment variables prefixed `CARDCAT_` (and nothing else)."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from catalog_api.kit.secret_store import stored_secrets

REPO_ROOT = Path(__file__).resolve().parents[2]  # catalog_api/kit/settings.py -> the checkout


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CARDCAT_", extra="ignore")

    # Where mutable state lives: the embedded SQLite database, card images, generated demo data.
    data_dir: Path = REPO_ROOT / "var"
    # SQLAlchemy URL. Empty means the embedded default: SQLite in data_dir.
    database_url: str = ""
    # Redis shares the rate limit across workers and replicas; empty means in-process counting.
    redis_url: str = ""
    # Base of the image URLs served in `image.low` / `image.high`.
    public_url: str = "http://127.0.0.1:8000"
    # Key that signs pagination cursors. Empty: a random one generated on first start and kept in
    # `<data_dir>/secrets.json` (catalog_api.kit.secret_store), shared by every process on that data dir.
    # Set it wherever replicas do not share a writable data dir (deploy/k8s sets it from a Secret).
    cursor_secret: str = ""
    # Per-worker cache of read bodies by request and data version (0 turns it off).
    response_cache_mb: int = 64
    rate_limit: int = 300
    rate_window_s: int = 60
    # Addresses of the proxies whose X-Forwarded-For / X-Forwarded-Proto uvicorn believes (comma-separated
    # IPs or CIDRs, or "*" when nothing but the proxy can reach the server). Empty: believe no one, so a
    # client cannot name its own address (and so its anonymous rate-limit bucket).
    forwarded_allow_ips: str = ""
    # A catalog older than this makes /health say `stale` (and the service `degraded`).
    catalog_max_age_s: int = 8 * 24 * 3600
    # The marketplace publishes daily: a price sync older than this makes it `stale`.
    marketplace_max_age_s: int = 36 * 3600
    # Newest price older than this many days (while the sync itself is recent) means upstream published
    # nothing new: the feed still reads `ok`, but the service is `degraded` (its prices are old).
    marketplace_max_lag_days: int = 3
    # The scanner's `POST /scan` on Ray Serve's HTTP proxy, for an ingress outside the Ray cluster.
    # Neither this nor `scan_app`: catalog-only, and `POST /v1/scan` answers 503 scan_unavailable.
    scan_url: str = ""
    # Or the scanner's Ray Serve application, called through a DeploymentHandle from the ingress's own
    # process (what `cardcat serve --scan` sets; cheaper than HTTP through Ray's proxy), in the Ray
    # cluster at `ray_address` ("auto": the one this machine runs). An explicit `host:port` (a running
    # cluster's GCS, e.g. a KubeRay head) also makes `cardcat serve --scan` deploy the scanner onto that
    # cluster instead of starting a Ray instance of its own.
    scan_app: str = ""
    ray_address: str = "auto"
    # When `cardcat serve` starts the scanner: also run Ray Serve's HTTP proxy on 127.0.0.1 at this port
    # (`POST /scan`, for an ingress elsewhere). 0: no proxy; the ingress calls the app by handle.
    scan_port: int = 0
    # Replicas of each scanner model (detector, reader, embedder) `cardcat serve` deploys; on a cluster of
    # several nodes Ray Serve spreads them, so a lost node leaves every model answering.
    scan_replicas: int = Field(default=1, ge=1, le=64)
    # The detector's arithmetic (serve_app.config.ScanConfig.detector_precision): "fp32", "bf16", or
    # "auto" (bf16 on CPUs with bf16 instructions). bf16 is cheaper but flipped reprint near-ties.
    scan_detector_precision: Literal["auto", "fp32", "bf16"] = "fp32"
    # Where each scanner model replica runs its network (serve_app.config.ScanConfig.*_runtime): "torch",
    # "onnx" (ONNX Runtime on the CPU, no torch in that replica: ~450-630 MB less RSS each), or "auto":
    # onnx where the replicas get no GPU, torch where they do.
    scan_detector_runtime: Literal["auto", "torch", "onnx"] = "auto"
    scan_embedder_runtime: Literal["auto", "torch", "onnx"] = "auto"
    scan_reader_runtime: Literal["auto", "torch", "onnx"] = "auto"
    # torch and OpenCV threads in each CPU model replica (serve_app.config.ScanConfig.threads). One keeps
    # the replicas, which run side by side, from competing for the same cores.
    scan_threads: int = Field(default=1, ge=1, le=64)
    # How long each scanner model's batch waits for more requests after its first, in milliseconds
    # (serve_app.config.ScanConfig.batch_wait_ms): a lone scan waits this long at each of three stages.
    scan_batch_wait_ms: float = Field(default=0.0, ge=0, le=1000)
    # The scan cascade (serve_app.config.ScanConfig.first_look): the detector's whole-photo view alone
    # first, its answer kept only when certain. Off: every photo through the full pipeline, as before #47.
    scan_first_look: bool = True
    # The detector's second opinion (serve_app.config.ScanConfig.second_detector_weights): another detector,
    # trained on harsher photos, asked only about photos the shipped one finds no card in. On since the
    # face check below keeps the backs and empty holders it also finds from being answered (#43).
    scan_second_detector: bool = True
    # The face check (serve_app.config.ScanConfig.face_check_weights): a small network that refuses the
    # detector's finds that are card backs or empty holders, not faces (#43).
    scan_face_check: bool = True
    # Fusion thresholds that differ from the shipped ones (serve_app.fusion.Thresholds), as JSON, e.g.
    # `{"close_similarity": 0.8}`: for measuring a bound before it ships, or an operator whose photos call
    # for another. A name Thresholds does not have stops `cardcat serve`.
    scan_thresholds: dict[str, float] = Field(default_factory=dict)
    # Key that signs the price snapshot download URLs carried by events. Empty: random, kept in
    # `<data_dir>/secrets.json` like the cursor secret. Set it (the same value on every replica and on the
    # host that runs `prices sync`) wherever they do not share a writable data dir.
    file_secret: str = ""
    # How long a snapshot URL in an event stays valid: a day of delivery retries (the webhooks_* schedule)
    # plus a day to download. Bound to no key (see catalog_api.access.file_access); was 30 days.
    snapshot_url_ttl_s: int = Field(default=2 * 24 * 3600, ge=60)
    # Serve the benchmark's static ceiling route (`/v1/_bench/static`); off in production.
    bench_routes: bool = False
    # Outbound events (catalog_api.events.deliverer). `cardcat serve` runs the deliverer beside the API
    # unless off.
    deliver_events: bool = True
    # Webhook URLs must resolve to public addresses unless this allows private ones (internal receivers,
    # tests on loopback). Checked when an endpoint is added and again before every delivery.
    webhooks_allow_private: bool = False
    # A PEM bundle of certificate authorities trusted for https webhook receivers besides the public
    # ones (certifi's): receivers inside a company whose certificates a private CA issued.
    webhooks_ca_file: str = ""
    # The whole of one webhook post (connect, send, read the answer) must finish within this many
    # seconds, however slowly the receiver trickles its answer; past it the attempt has failed.
    webhooks_timeout_s: float = 10.0
    # Retry schedule of a failed delivery: min(cap, base * 2**(attempts-1)) seconds, jittered ±20%;
    # the endpoint is disabled after max_attempts failures of one event (about 24 h with the defaults).
    webhooks_backoff_base_s: float = 5.0
    webhooks_backoff_cap_s: float = 3600.0
    webhooks_max_attempts: int = 33
    # How often an idle deliverer looks for new events, and how many endpoints it serves at once
    # (PostgreSQL only; on SQLite the deliverer is a single worker).
    webhooks_poll_s: float = 1.0
    webhooks_concurrency: int = 4
    # Prometheus `/metrics` on its own port (served by `cardcat serve`'s own process, on its --host)
    # instead of the API port; 0: on the API port. See docs/operations.md, "Metrics".
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # Ray's metrics export port on this node when `cardcat serve` starts Ray (the scanner's
    # `ray_cardcat_scanner_stage_seconds` and Ray's own metrics); 0: Ray picks one.
    scan_metrics_port: int = Field(default=0, ge=0, le=65535)
    # Key (32+ random characters) that encrypts webhook signing secrets in the database
    # (catalog_api.events.secret_box). Empty: a random one kept in `<data_dir>/secrets.json`. Set it,
    # the same on every replica and wherever `cardcat webhooks` runs, where they do not share a data dir.
    webhook_secrets_key: str = ""
    # Previous webhook secrets keys, comma-separated: still accepted for reading while
    # `cardcat webhooks rekey` re-encrypts every secret with the current key (rotation).
    webhook_secrets_old_keys: str = ""
    # Seconds one worker answers `GET /health` from the report it last computed (one feed-state query a
    # second per worker at most, however often it is polled; a database outage shows within that). 0: off.
    health_cache_s: float = Field(default=1.0, ge=0, le=60)
    # Scans one worker holds at once (body, URL fetch, scanner call; catalog_api.scan.admission); the
    # next is answered 503 scan_unavailable with Retry-After at once. `cardcat serve` sizes Ray's object
    # store for workers x this many photos (serve_app.local), so photos never spill to disk.
    scan_max_in_flight: int = Field(default=32, ge=1, le=1024)
    # Name servers for scan URL host names, comma-separated IPs with optional ports ("10.0.0.2",
    # "[2001:db8::53]:5353"), asked directly over UDP (catalog_api.scan.resolver). Empty: the system's
    # resolver (getaddrinfo), on a small thread pool of its own.
    scan_dns_servers: str = ""
    # One JSON line per HTTP request on the `cardcat.access` logger (catalog_api.ops.access_log): method,
    # route template, status, the key's public prefix, latency, bytes; never the key or the query.
    access_log: bool = True
    # How long a bulk file URL that `GET /v1/bulk` hands out stays valid, in seconds: at least this, at
    # most a quarter more (URLs are issued on a grid, so a listing keeps its ETag a while). Each URL is
    # bound to the key that asked: revoking or expiring that key closes it at once (403).
    file_url_ttl_s: int = Field(default=3600, ge=60, le=7 * 24 * 3600)
    # Scan batches (catalog_api.batches, docs/batches.md). Each API worker process with a scanner runs
    # this many scans of batch photos at once; while interactive `/v1/scan` calls are in flight in that
    # process, only `batch_lanes_when_busy` of them take new photos, so interactive scans go first.
    batch_lanes: int = Field(default=8, ge=0, le=64)
    batch_lanes_when_busy: int = Field(default=1, ge=0, le=64)
    # How long a worker holds a photo before another may take it (a worker that died mid-scan), and
    # how often an idle worker looks for photos.
    batch_lease_s: float = Field(default=120.0, ge=1, le=3600)
    batch_poll_s: float = Field(default=0.5, gt=0, le=60)
    # A batch not finished this long after it was opened expires: its unscanned photos are deleted.
    batch_ttl_s: int = Field(default=24 * 3600, ge=60, le=30 * 24 * 3600)
    # Photos one key may add to batches in 24 h (its own budget, beside the request rate limit), the
    # photos of one batch, and of one upload request.
    batch_photos_per_day: int = Field(default=20_000, ge=1)
    batch_max_photos: int = Field(default=5_000, ge=1, le=100_000)
    batch_upload_max_photos: int = Field(default=100, ge=1, le=1000)

    @property
    def sqlalchemy_url(self) -> str:
        if self.database_url:
            return normalise_database_url(self.database_url)
        return f"sqlite:///{self.data_dir / 'cardcat.db'}"

    @property
    def images_dir(self) -> Path:
        return self.data_dir / "images"

    @property
    def snapshot_dir(self) -> Path:
        """Published daily price snapshot files (served, signed, under /files/snapshots/)."""
        return self.data_dir / "snapshots"

    @property
    def file_signing_key(self) -> bytes:
        """Never derived from anything guessable: a forged snapshot URL could live until 2100."""
        secret = self.file_secret or stored_secrets(self.data_dir).file
        return hashlib.sha256(secret.encode()).digest()

    @property
    def batch_photo_dir(self) -> Path:
        """Batch photos waiting for their scan (deleted once scanned, cancelled or expired)."""
        return self.data_dir / "batches"

    @property
    def index_dir(self) -> Path:
        """The scanner's FAISS index of catalog faces (`cardcat index build`)."""
        return self.data_dir / "index"


def normalise_database_url(url: str) -> str:
    """Accept plain `postgresql://` URLs and pin the psycopg 3 driver."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def async_url(url: str) -> str:
    """The async twin of a sync SQLAlchemy URL (psycopg 3 is both; SQLite needs aiosqlite)."""
    if url.startswith("sqlite:"):
        return "sqlite+aiosqlite:" + url[len("sqlite:") :]
    return url


@lru_cache
def get_settings() -> Settings:
    return Settings()
