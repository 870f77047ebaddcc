"""Ray in a process of its own, for the benchmarks that count Ray's CPU apart from the ingress's
(`scan_floor.py`, `scan_gpu_stack.py`): the child starts Ray and a Serve application, publishes the
cluster's address in a file once the application runs and holds it until its stdin closes; the parent
waits for that file, runs the ingress against the address, and closes the child's stdin to stop it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def publish_and_hold(address_file: str, up: Mapping[str, Any]) -> None:
    """The child's side, once its application runs: write `up` (the cluster's address and whatever else
    the parent should know) as a whole file, wait until the parent closes stdin, then stop Serve and Ray."""
    import ray
    from ray import serve

    written = Path(address_file + ".part")  # the parent waits for the whole file
    written.write_text(json.dumps(dict(up)))
    written.rename(address_file)
    sys.stdin.read()
    serve.shutdown()
    ray.shutdown()


@contextmanager
def ray_side(
    command: list[str], address_file: Path, env: Mapping[str, str], timeout: float, what: str
) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, Any]]]:
    """Start `command` (a child that ends in `publish_and_hold`) and yield it with what it published, once
    it has; `what` names it in the error if it exits or `timeout` seconds pass first. On leaving, its stdin
    is closed and it is given a minute to stop Serve and Ray before it is killed."""
    child = subprocess.Popen(command, stdin=subprocess.PIPE, env=dict(env), cwd=REPO)
    try:
        deadline = time.monotonic() + timeout
        while not address_file.exists():
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start")
            time.sleep(0.5)
        yield child, json.loads(address_file.read_text())
    finally:
        if child.stdin:
            child.stdin.close()
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
