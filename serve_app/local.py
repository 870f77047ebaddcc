"""Running the scanner's Ray Serve application on this machine, beside the uvicorn ingress."""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from pathlib import Path

from core.photo import MAX_IMAGE_BYTES
from serve_app.config import ScanConfig

log = logging.getLogger("cardcat.scan")
APP_NAME = "scanner"
ROUTE = "/scan"
# Ray's shared-memory object store. Every store page a process has touched stays in its RSS, and four
# processes pass photos and faces through it (with a 100 MB store, each mapped ~100 MB after 300 scans),
# so the default (30% of RAM) only ever grows the server. 256 MB holds concurrency 32 with 12 MP photos;
# 100 MB filled there (p95 8 s, benchmarks/scan_load.py).
OBJECT_STORE_BYTES = 256 * 1024 * 1024
# What one scan can hold in the store at once: its photo (a call argument over Ray's 100 KB inline
# limit is put there; at most 10 MB, the spec's cap) and its rectified 600x838 face (1.5 MB), with room
# for Ray's framing.
STORE_BYTES_PER_SCAN = MAX_IMAGE_BYTES + 2 * 1024 * 1024
# Where plasma's fallback files go when the store is full after all (it then maps files instead of
# failing): a memory filesystem, never the disk. Photos are not stored.
MEMORY_FS = Path("/dev/shm")
# Ray Serve's housekeeping on a Ray instance started here, unless the environment says otherwise: the
# controller's loop every 0.5 s (Ray's default 0.1) and each replica's and handle's metrics flushed every
# second (0.1). With nothing to do, Ray spent ~150 ms of CPU a second on a 2-core box (ServeController
# ~37 of it), ~14 ms a scan at the ~11 scans/s it serves; measured before and after with
# `benchmarks/scan_floor.py` (docs/scanner-performance.md, "The floor").
SERVE_PACE = {"RAY_SERVE_CONTROL_LOOP_INTERVAL_S": "0.5", "RAY_SERVE_METRICS_EXPORT_INTERVAL_MS": "1000"}


def object_store_bytes(photos_in_flight: int = 0) -> int:
    """The object store for `photos_in_flight` scans at once (every ingress worker's
    `CARDCAT_SCAN_MAX_IN_FLIGHT` together), never below `OBJECT_STORE_BYTES`: the cap on scans in
    flight then keeps the store from filling, so nothing is ever spilled."""
    return max(OBJECT_STORE_BYTES, photos_in_flight * STORE_BYTES_PER_SCAN)


def _memory_fallback_dir() -> str | None:
    """A private directory on the memory filesystem for plasma's fallback files (None without one)."""
    if not MEMORY_FS.is_dir() or not os.access(MEMORY_FS, os.W_OK):
        return None
    directory = tempfile.mkdtemp(prefix="cardcat-ray-", dir=MEMORY_FS)
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


def start_ray(ray_address: str = "", metrics_port: int = 0, photos_in_flight: int = 0) -> None:
    """Join the Ray cluster at `ray_address`, or start a Ray instance on this machine sized for the
    scanner (its object store, no dashboard, no idle workers). `start_scanner` calls it; so does
    `benchmarks/scan_floor.py`, so the floor it measures is this Ray's.

    Photos are not stored: a photo passed to the Detector is a call argument, which Ray puts in its
    object store (shared memory), and Ray would spill a full store to files under its session
    directory on disk. Here the store holds `photos_in_flight` scans (`object_store_bytes`), spilling
    is off, and should the store fill anyway its fallback files are on the memory filesystem (a scan
    that finds no memory at all fails, and is answered 503 with `Retry-After`). A cluster joined at
    `ray_address` is configured by whoever started it (deploy/)."""
    import ray

    if ray_address:
        ray.init(address=ray_address, logging_level=logging.WARNING, ignore_reinit_error=True)
    else:
        # Two glibc heap arenas per process (Ray's processes inherit this). The load figures in
        # docs/benchmarks.md were measured with it; a short A/B without it showed no clear RSS
        # difference (4.00 vs 3.96 GiB, noisy).
        os.environ.setdefault("MALLOC_ARENA_MAX", "2")
        for name, value in SERVE_PACE.items():  # Ray's processes read these when they start
            os.environ.setdefault(name, value)
        ray.init(
            # A new instance even when a cluster started by `ray start` runs on this machine: a bare
            # ray.init() would join that one instead.
            address="local",
            num_cpus=os.cpu_count(),
            include_dashboard=False,
            object_store_memory=object_store_bytes(photos_in_flight),
            # The fallback directory is the spill directory's setting in Ray; nothing is spilled there.
            object_spilling_directory=_memory_fallback_dir(),
            logging_level=logging.WARNING,
            configure_logging=True,
            ignore_reinit_error=True,
            _system_config={
                # No idle workers started ahead of time: every process here is a replica or Ray itself.
                "enable_worker_prestart": False,
                # Never copy objects (photos, faces) to disk when the store is full.
                "automatic_object_spilling_enabled": False,
            },
            _metrics_export_port=metrics_port or None,
        )


def start_scanner(
    config: ScanConfig,
    http_port: int | None = None,
    ray_address: str = "",
    metrics_port: int = 0,
    photos_in_flight: int = 0,
) -> tuple[str, str]:
    """Start the scanner app on Ray; returns the Serve application's name and the Ray cluster's address:
    the ingress (this process, or uvicorn workers that join this Ray cluster) calls the app by handle.

    Without `ray_address` a Ray instance is started on this machine; with one (`host:port` of a running
    cluster's GCS, e.g. a KubeRay head) the app is deployed onto that cluster instead, its replicas
    spread over the cluster's nodes. With `http_port`, Ray's HTTP proxy also serves `POST /scan` on
    127.0.0.1 (an ingress elsewhere can post to it); without, no proxy runs at all: one process and one
    HTTP parse fewer per scan. `metrics_port`: the port of Ray's metrics export (Prometheus text at
    `/metrics`: the scanner's stage latencies and Ray's own metrics) on the Ray instance started here;
    0 lets Ray pick one (listed in `/tmp/ray/prom_metrics_service_discovery.json`). `photos_in_flight`:
    how many scans the ingress workers hold at once together (`start_ray` sizes the store for them).
    """
    import ray
    from ray import serve

    from serve_app.app import build_app

    start_ray(ray_address, metrics_port, photos_in_flight)
    if http_port is None:
        serve.start(proxy_location="Disabled", logging_config={"log_level": "WARNING"})
    else:
        serve.start(
            proxy_location="HeadOnly",
            http_options={"host": "127.0.0.1", "port": http_port},
            logging_config={"log_level": "WARNING"},
        )
    serve.run(build_app(config.as_dict()), name=APP_NAME, route_prefix=ROUTE, blocking=False)
    where = f" and http://127.0.0.1:{http_port}{ROUTE}" if http_port else ""
    log.warning("scanner up on Ray Serve: application %r%s", APP_NAME, where)
    return APP_NAME, ray.get_runtime_context().gcs_address


def stop_scanner(attached: bool = False) -> None:
    """Stop what `start_scanner` started. On a cluster it was attached to, the app stays up (other ingress
    processes may call it; `serve deploy` owns its life there) and this process only disconnects."""
    import ray
    from ray import serve

    if not attached:
        serve.shutdown()
    ray.shutdown()
