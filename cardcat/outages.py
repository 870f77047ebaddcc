"""Backends a test may take down: a private PostgreSQL cluster, a private Redis and a two-node Ray
cluster, on their own ports.

The shared PostgreSQL and Redis on 127.0.0.1 serve every other test (and other checkouts), so an outage
is staged on servers started here from the same binaries, in a temp dir, and stopped and started at will.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import redis

from cardcat.stack import free_port, unavailable

RAY = str(Path(sys.executable).with_name("ray"))


def _pg_bin() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    return versions[-1].parent if versions else None


class PrivatePostgres:
    """`initdb` + `pg_ctl` on a free port, in a directory of its own under /tmp (pytest's are private to
    their owner); PostgreSQL refuses to run as root, so root runs it as the postgres user."""

    def __init__(self) -> None:
        bin_dir = _pg_bin()
        if bin_dir is None:
            unavailable("PostgreSQL server binaries (pg_ctl, initdb) not found")
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="cardcat-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres")
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{tool} failed: {result.stdout}{result.stderr}")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "start")
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(self.url, connect_timeout=1).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        """A fast shutdown: sessions are cut, as in a crash or a failover."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):  # already stopped
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class PrivateRedis:
    """A `redis-server` on a free port that keeps nothing on disk."""

    def __init__(self, root: Path) -> None:
        if shutil.which("redis-server") is None:
            unavailable("redis-server not found")
        self.root, self.port = root, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        root.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--dir",
                str(self.root),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        client = redis.Redis.from_url(self.url)
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    close = stop


class TwoNodeCluster:
    """`ray start --head` plus one worker node started with `--block` in its own process group."""

    def __init__(self) -> None:
        self.worker: subprocess.Popen[bytes] | None = None
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        # Token authentication, as a real cluster runs it: every node and the ingress hold the token.
        self.auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **self.auth}

    def start(self) -> None:
        common = ["--node-ip-address=127.0.0.1", "--disable-usage-stats", "--object-store-memory=150000000"]
        # The head holds every replica once the worker is gone (6 x 0.5 CPU + ScanService): 4 logical CPUs.
        subprocess.run(
            [
                RAY,
                "start",
                "--head",
                f"--port={self.port}",
                "--num-cpus=4",
                "--include-dashboard=false",
                *common,
            ],
            env=self.env,
            check=True,
            capture_output=True,
        )
        self.worker = subprocess.Popen(
            [RAY, "start", f"--address={self.address}", "--num-cpus=2", "--block", *common],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while self.alive_nodes() < 2:
            if time.monotonic() > deadline:
                raise AssertionError("the worker node did not join")
            time.sleep(1)

    def alive_nodes(self) -> int:
        probe = (
            "import json, ray; ray.init(address=%r); print(json.dumps(sum(n['Alive'] for n in ray.nodes())))"
        )
        result = subprocess.run(
            [sys.executable, "-c", probe % self.address], env=self.env, capture_output=True, text=True
        )
        return int(json.loads(result.stdout.strip().splitlines()[-1])) if result.returncode == 0 else 0

    def on_worker(self, pid: int) -> bool:
        """Whether process `pid` belongs to the worker node (a descendant of its `ray start`)."""
        while pid > 1 and self.worker is not None:
            if pid == self.worker.pid:
                return True
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return False
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        return False

    def kill_worker(self) -> None:
        """The worker node dies at once: SIGKILL to its whole process group."""
        assert self.worker is not None
        os.killpg(self.worker.pid, signal.SIGKILL)
        self.worker.wait(timeout=30)

    def stop(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            self.kill_worker()
        subprocess.run([RAY, "stop", "--force"], env=self.env, capture_output=True)
