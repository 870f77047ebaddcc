"""The Triton client path against a real Triton Inference Server.

`python -m deploy.triton.export` writes the model repository; `.venv-triton` (built by
`deploy/triton/setup_env.sh`, kept apart because Triton's wheel needs numpy<2) serves it from the Triton
bundled in nvidia-pytriton, on loopback; `TritonSession` must then give what `TorchSession` gives, on
synthetic photos and rendered faces of real cards, one at a time, in batches, and from several threads
at once (Triton's dynamic batcher joins those).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest

from cardcat.stack import REPO
from models import detector as det
from models import embedder as emb
from models.geometry import read_face, rectify
from models.quads import letterbox
from models.sessions import Backend, TritonSession
from training.renders import DEFAULT_CACHE, SHARED, read_manifest, render_catalog
from training.synth import BENCH_SEED_BASE, make_photo

TRITON_PYTHON = REPO / ".venv-triton" / "bin" / "python"
TRITON_READY = REPO / ".venv-triton" / ".ready"  # written by setup_env.sh once the env imports cleanly
N_FACES = 6
START_TIMEOUT_S = 180

pytestmark = [
    pytest.mark.skipif(
        not TRITON_READY.exists(),
        reason=f"{TRITON_PYTHON.parent.parent} absent: `bash deploy/triton/setup_env.sh` builds it "
        "(a real Triton server from nvidia-pytriton, kept out of .venv because it needs numpy<2)",
    ),
    pytest.mark.skipif(
        not (SHARED / "catalog").exists(), reason=f"{SHARED}/catalog absent: no real card faces"
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("triton") / "models"
    subprocess.run([sys.executable, "-m", "deploy.triton.export", "--out", str(out)], cwd=REPO, check=True)
    return out


@pytest.fixture(scope="module")
def triton(repository: Path) -> Iterator[str]:
    """A Triton server on loopback serving the exported repository; yields its HTTP host:port."""
    http, grpc, metrics = _free_port(), _free_port(), _free_port()
    log = repository.parent / "triton.log"
    command = [str(TRITON_PYTHON), "-m", "deploy.triton.serve_local", "--repository", str(repository)]
    ports = ["--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)]
    with log.open("w") as sink:
        process = subprocess.Popen(
            command + ports, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _ready(http, ("detector", "embedder")):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Triton did not start (exit {process.poll()}):\n{log.read_text()[-4000:]}")
            time.sleep(0.5)
        yield f"127.0.0.1:{http}"
    finally:
        process.terminate()  # pytriton stops tritonserver and its backend stubs on SIGTERM
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        with contextlib.suppress(ProcessLookupError):  # a server or stub left behind in its group
            os.killpg(process.pid, signal.SIGKILL)


def _ready(port: int, models: tuple[str, ...]) -> bool:
    try:
        return all(
            httpx.get(f"http://127.0.0.1:{port}/v2/models/{m}/ready", timeout=2).status_code == 200
            for m in models
        )
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    """The first base1 faces: from the render cache when it has them, else rendered here."""
    cache = DEFAULT_CACHE / "catalog"
    manifest = read_manifest(cache / "manifest.jsonl") if (cache / "manifest.jsonl").exists() else {}
    paths = [cache / info["high"] for cid, info in sorted(manifest.items()) if cid.startswith("base1-")]
    paths = [p for p in paths if p.exists()][:N_FACES]
    if len(paths) < N_FACES:
        out = tmp_path_factory.mktemp("renders")
        rendered = render_catalog(SHARED / "catalog", out, ["base1"], limit=N_FACES, progress=False)
        paths = [out / info["high"] for info in read_manifest(rendered).values()]
    return [read_face(Path(p)) for p in paths]


@pytest.fixture(scope="module")
def photos(faces: list[np.ndarray]) -> list[np.ndarray]:
    return [make_photo(face, BENCH_SEED_BASE + 300 + i).image for i, face in enumerate(faces)]


def test_served_models_have_the_exported_signature(triton: str) -> None:
    d, e = TritonSession(triton, "detector"), TritonSession(triton, "embedder")
    assert (d.input_names, d.output_names) == ((det.INPUT,), (det.OUTPUT,))
    assert (e.input_names, e.output_names) == ((emb.INPUT,), (emb.OUTPUT,))
    meta = httpx.get(f"http://{triton}/v2/models/embedder").json()
    assert meta["inputs"][0]["datatype"] == "UINT8" and meta["inputs"][0]["shape"] == [-1, 134, 96, 3]
    assert meta["outputs"][0]["datatype"] == "FP32" and meta["outputs"][0]["shape"] == [-1, 128]


def test_detector_maps_equal_torch(triton: str, photos: list[np.ndarray]) -> None:
    local, remote = det.CardDetector(), TritonSession(triton, "detector")
    views = np.stack([letterbox(p, local.cfg.input_size)[0] for p in photos])
    # One photo, all six in one request, and more views than the model's batch limit (the detector asks
    # for that many with a batch of photos: TritonSession splits them into requests Triton accepts).
    assert remote.max_batch_size == 32
    many = np.concatenate([views] * 6)[:37]
    for batch in (views[:1], views, many):
        want = local.session.run({det.INPUT: batch})[det.OUTPUT]
        got = remote.run({det.INPUT: batch})[det.OUTPUT]
        assert got.shape == want.shape == (len(batch), 3, 224, 224) and got.dtype == np.float32
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("pixels", ["numpy", "torch"])
def test_detector_corners_equal_torch(triton: str, photos: list[np.ndarray], pixels: str) -> None:
    """Through Triton as in-process, with the views cut by OpenCV or (a GPU replica's photos arrive as
    tensors) by torch, which then go to Triton as NumPy."""
    import torch

    inputs: list[det.Pixels] = list(photos)
    if pixels == "torch":
        inputs = [torch.from_numpy(p).permute(2, 0, 1) for p in photos]
    local = det.CardDetector().locate_batch(inputs)
    remote = det.CardDetector(backend=Backend("triton", triton)).locate_batch(inputs)
    assert sum(q is not None for q in local) >= len(photos) - 1
    for want, got in zip(local, remote, strict=True):
        assert (want is None) == (got is None)
        if want is not None and got is not None:
            np.testing.assert_allclose(got, want, atol=0.05)  # pixels in a phone photo


def test_embedder_vectors_equal_torch(triton: str, faces: list[np.ndarray], photos: list[np.ndarray]) -> None:
    local, remote = emb.CardEmbedder(), emb.CardEmbedder(backend=Backend("triton", triton))
    quads = det.CardDetector().locate_batch(photos)
    views = faces + [rectify(p, q) for p, q in zip(photos, quads, strict=True) if q is not None]
    want, got = local.embed_batch(views), remote.embed_batch(views)
    assert got.shape == (len(views), 128)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    assert remote.embed_batch(views[:1]).shape == (1, 128)
    # The scanner sends one face per request from several threads; Triton batches them back together.
    with ThreadPoolExecutor(4) as pool:
        singles = list(pool.map(lambda v: remote.embed_batch([v])[0], views))
    np.testing.assert_allclose(np.stack(singles), want, atol=1e-5, rtol=0)
