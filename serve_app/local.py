"""Running the scanner's Ray Serve application on this machine, beside the uvicorn ingress."""

from __future__ import annotations

import logging
import os

from serve_app.config import ScanConfig

log = logging.getLogger("cardcat.scan")
APP_NAME = "scanner"
ROUTE = "/scan"


def start_scanner(config: ScanConfig, port: int) -> str:
    """Start a local Ray instance and the scanner app on it; returns the URL the ingress posts to.

    Ray's HTTP proxy listens on 127.0.0.1 only: users reach the scanner through the `/v1` ingress.
    """
    import ray
    from ray import serve

    from serve_app.app import build_app

    ray.init(
        num_cpus=os.cpu_count(),
        include_dashboard=False,
        logging_level=logging.WARNING,
        configure_logging=True,
        ignore_reinit_error=True,
    )
    serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config={"log_level": "WARNING"})
    serve.run(build_app(config.as_dict()), name=APP_NAME, route_prefix=ROUTE, blocking=False)
    log.warning("scanner up on Ray Serve at 127.0.0.1:%d%s", port, ROUTE)
    return f"http://127.0.0.1:{port}{ROUTE}"


def stop_scanner() -> None:
    import ray
    from ray import serve

    serve.shutdown()
    ray.shutdown()
