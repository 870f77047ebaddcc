"""A hostile-peer kit (issue 17): origins that attack whoever fetches from them, and a server to attack.

- `HostileOrigin`: a real HTTPS server on 127.0.0.1 (uvicorn in a thread) whose certificate comes from a
  throwaway test CA made with `trustme`. Its paths serve compression bombs (a 1.6 KB brotli body that
  inflates to 512 MiB, gzip inside gzip, deflate), a small image sent gzip-encoded although identity was
  asked for, an endless chunked body and a slow drip (a byte just inside the per-read timeout, for ever).
- `StallingProxy`: a TCP proxy that can be told to hang (accept, swallow, never answer), or a black
  hole with no upstream: a wedged Redis for the rate limiter.
- `IntakeServer`: the scan intake (`catalog_api.scan.intake.read_scan_upload`, the code `POST /v1/scan` runs
  before it asks the scanner) served by uvicorn in its own process, with a `FetchPolicy` that lets it
  reach the loopback origin and trust the test CA. Its peak RSS (`VmHWM`) can be reset and read, so a
  test can tell how much memory one request cost it.

Run `python -m tests.hostile_peers intake --port N --ca CA_FILE [--timeout S]` to start the intake
server by hand; the tests start it themselves.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import os
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import AsyncIterator
from functools import cache
from pathlib import Path
from typing import Any

import httpx

from cardcat.stack import ServerThread

REPO = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
# What a bomb inflates to: far past the 10 MB cap and big enough that inflating it shows in RSS.
BOMB_BYTES = 512 * MIB


# ---------------------------------------------------------------------------------------------- bombs


@cache
def gzip_bomb() -> bytes:
    """BOMB_BYTES of zeros gzipped, then gzipped again (`Content-Encoding: gzip, gzip`): about 1 KB that
    a client decoding both layers inflates to 512 MiB (one layer of gzip tops out near 1:1000)."""
    inner = _deflate_zeros(BOMB_BYTES, wbits=31)
    outer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return outer.compress(inner) + outer.flush()


@cache
def deflate_bomb() -> bytes:
    """32 MiB of zeros as a zlib stream (`Content-Encoding: deflate`), about 32 KB."""
    return _deflate_zeros(32 * MIB, wbits=15)


@cache
def brotli_bomb() -> bytes | None:
    """BOMB_BYTES of zeros in about 1.6 KB of brotli; None where the brotli package is not installed
    (then no client here could decode it either)."""
    try:
        import brotli
    except ImportError:
        return None
    compressor = brotli.Compressor(quality=5)
    block = bytes(MIB)
    return b"".join(compressor.process(block) for _ in range(BOMB_BYTES // MIB)) + compressor.finish()


def _deflate_zeros(size: int, wbits: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = bytes(MIB)
    return b"".join(compressor.compress(block) for _ in range(size // MIB)) + compressor.flush()


def tiny_png() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (32, 32), "green").save(buf, "PNG")
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------- origin


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def origin_app(drip_every_s: float) -> Any:
    """The hostile origin's routes. `drip_every_s` should sit just under the fetcher's per-read timeout."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    png = tiny_png()

    def encoded(body: bytes, encoding: str) -> Response:
        return Response(body, media_type="image/png", headers={"Content-Encoding": encoding})

    async def ok_png(_request: Request) -> Response:
        return Response(png, media_type="image/png")

    async def gzip_png(_request: Request) -> Response:
        """A harmless image, gzipped although the fetcher asked for identity."""
        return encoded(zlib.compress(png, wbits=31), "gzip")

    async def gzip_bomb_route(_request: Request) -> Response:
        return encoded(gzip_bomb(), "gzip, gzip")

    async def brotli_bomb_route(_request: Request) -> Response:
        body = brotli_bomb()
        if body is None:
            return Response(b"brotli is not installed", status_code=501)
        return encoded(body, "br")

    async def deflate_bomb_route(_request: Request) -> Response:
        return encoded(deflate_bomb(), "deflate")

    async def endless(_request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            chunk = bytes(64 * 1024)
            while True:  # chunked, no Content-Length, never ends while the client reads
                yield chunk
                # Back to the event loop between chunks, so Starlette's disconnect listener can end the
                # stream: without it the loop never yields once the client hangs up, and the origin's
                # thread spun on the GIL for the rest of the test session (a later test in the same
                # process took 65 s instead of 1).
                await asyncio.sleep(0)

        return StreamingResponse(body(), media_type="image/png")

    async def drip(_request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            while True:
                yield b"\x89"
                await asyncio.sleep(drip_every_s)

        return StreamingResponse(body(), media_type="image/png")

    paths = {
        "/ok.png": ok_png,
        "/gzip.png": gzip_png,
        "/bomb.gz": gzip_bomb_route,
        "/bomb.br": brotli_bomb_route,
        "/bomb.deflate": deflate_bomb_route,
        "/endless": endless,
        "/drip": drip,
    }
    return Starlette(routes=[Route(path, handler) for path, handler in paths.items()])


class OriginCA:
    """A throwaway CA (trustme) and a server certificate for 127.0.0.1 and localhost, written to `out`."""

    def __init__(self, out: Path) -> None:
        import trustme

        out.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1", "localhost")
        self.ca_file = out / "ca.pem"
        self.cert_file = out / "cert.pem"
        self.key_file = out / "key.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        cert.private_key_pem.write_to_path(str(self.key_file))
        for i, pem in enumerate(cert.cert_chain_pems):
            pem.write_to_path(str(self.cert_file), append=i > 0)


class HostileOrigin(ServerThread):
    """The hostile HTTPS origin: uvicorn on 127.0.0.1 in a background thread of the test process."""

    def __init__(self, ca: OriginCA, drip_every_s: float) -> None:
        super().__init__(
            origin_app(drip_every_s), ssl_certfile=str(ca.cert_file), ssl_keyfile=str(ca.key_file)
        )

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"


# ---------------------------------------------------------------------------------------------- TCP


class StallingProxy:
    """A TCP proxy on 127.0.0.1 to `upstream` (host, port) that can be made to hang: while `hung`, it
    accepts connections and swallows what clients send without ever answering, like a server that is
    stopped or wedged. With no upstream it is hung for ever (a black hole)."""

    def __init__(self, upstream: tuple[str, int] | None = None) -> None:
        self.upstream = upstream
        self.hung = upstream is None
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])
        self._closed = False
        self._conns: list[socket.socket] = []

    def __enter__(self) -> StallingProxy:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed = True
        self.sock.close()
        for conn in self._conns:
            conn.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            self._conns.append(client)
            upstream = None
            if self.upstream is not None and not self.hung:
                try:
                    upstream = socket.create_connection(self.upstream, timeout=5)
                    upstream.settimeout(None)
                    self._conns.append(upstream)
                except OSError:
                    client.close()
                    continue
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            if upstream is not None:
                threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket | None) -> None:
        """Copy src to dst, dropping everything while hung (the peer then waits for ever)."""
        try:
            while data := src.recv(65536):
                if dst is not None and not self.hung:
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)


# ---------------------------------------------------------------------------------------------- intake


def intake_app(ca_file: str, timeout_s: float) -> Any:
    """`read_scan_upload` behind one route, answering in the API's envelope, as `POST /v1/scan` would
    up to the point where it hands the bytes to the scanner."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from catalog_api.scan.intake import read_scan_upload
    from catalog_api.scan.url_fetch import FetchPolicy
    from core.errors import APIError

    policy = FetchPolicy(
        timeout_s=timeout_s, allowed_networks=(ipaddress.ip_network("127.0.0.1/32"),), ca_file=ca_file
    )

    async def scan(request: Request) -> Response:
        try:
            data = await read_scan_upload(request, policy)
        except APIError as exc:
            error = {"code": exc.code, "message": exc.message}
            return JSONResponse({"data": None, "error": error}, status_code=exc.status)
        return JSONResponse({"data": {"bytes": len(data)}, "error": None})

    return Starlette(routes=[Route("/scan", scan, methods=["POST"])])


class IntakeServer:
    """The intake in its own process, so its memory is its own to measure."""

    def __init__(self, ca: OriginCA, timeout_s: float, log: Path) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        command = [
            sys.executable,
            "-m",
            "tests.hostile_peers",
            "intake",
            "--port",
            str(self.port),
            "--ca",
            str(ca.ca_file),
            "--timeout",
            str(timeout_s),
        ]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        self.log = log
        self._log_file = open(log, "wb")  # noqa: SIM115 (lives with the process)
        self.process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=self._log_file, stderr=subprocess.STDOUT
        )

    def __enter__(self) -> IntakeServer:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"intake server exited: {self.log.read_text()[-4000:]}")
            try:
                httpx.get(self.base_url + "/", timeout=1)
                return self
            except httpx.HTTPError:
                time.sleep(0.1)
        self.__exit__()
        raise AssertionError(f"intake server did not come up: {self.log.read_text()[-4000:]}")

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log_file.close()

    def scan_url(self, url: str, timeout: float = 60) -> httpx.Response:
        return httpx.post(f"{self.base_url}/scan", json={"url": url}, timeout=timeout, trust_env=False)

    def reset_peak_rss(self) -> None:
        """Make VmHWM start again from the current RSS (Linux: `5` to /proc/PID/clear_refs)."""
        Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")

    def peak_rss(self) -> int:
        """The highest RSS (bytes) since the last reset."""
        return _status_kib(self.process.pid, "VmHWM") * 1024

    def rss(self) -> int:
        return _status_kib(self.process.pid, "VmRSS") * 1024


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    intake = sub.add_parser("intake", help="serve POST /scan (the scan intake) on 127.0.0.1")
    intake.add_argument("--port", type=int, required=True)
    intake.add_argument("--ca", required=True, help="PEM file of the CA the origin's certificate is from")
    intake.add_argument("--timeout", type=float, default=10.0, help="FetchPolicy.timeout_s")
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(
        intake_app(args.ca, args.timeout),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        lifespan="off",
    )


if __name__ == "__main__":
    main()
