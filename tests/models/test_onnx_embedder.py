"""The embedder's network in ONNX Runtime (`Backend(kind="onnx")`, `models/weights/embedder.onnx`): the
same vectors as torch's to float rounding, an export refused when it came from other weights, and a
process that embeds this way without ever importing torch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F

from cardcat.stack import REPO
from models.checkpoints import weights_version
from models.embedder import WEIGHTS, CardEmbedder
from models.embedder_net import _windows, grid_pool
from models.sessions import Backend, onnx_path
from training.embedder.export_onnx import TOLERANCE, export

ONNX = Backend(kind="onnx")


def _faces(count: int, seed: int = 0) -> list[np.ndarray]:
    """Face-sized pictures with structure (bands and blocks of colour), not only noise."""
    rng = np.random.default_rng(seed)
    faces = []
    for _ in range(count):
        face = np.repeat(rng.integers(0, 256, (8, 6, 3), np.uint8), [105] * 7 + [103], axis=0)
        face = np.repeat(face, 100, axis=1)
        faces.append(np.clip(face + rng.integers(0, 40, face.shape), 0, 255).astype(np.uint8))
    return faces


def _nearest(vectors: np.ndarray) -> list[int]:
    similarity = vectors @ vectors.T - 2 * np.eye(len(vectors))
    return [int(i) for i in similarity.argmax(1)]


@pytest.mark.parametrize(("height", "width"), [(5, 3), (8, 6), (9, 3), (4, 3)])
def test_grid_pooling_is_adaptive_pooling_where_its_windows_are_alike(height: int, width: int) -> None:
    x = torch.randn(2, 7, height, width)
    assert _windows(height, 4) is not None and _windows(width, 3) is not None
    assert torch.equal(grid_pool(x, (4, 3)), F.adaptive_avg_pool2d(x, (4, 3)))


def test_unlike_windows_are_left_to_adaptive_pooling() -> None:
    assert _windows(7, 4) is None  # cells of 2, 3, 3 and 2 rows: no single average pool


def test_the_shipped_export_embeds_as_torch_does() -> None:
    faces = _faces(6)
    by_torch, by_onnx = CardEmbedder(), CardEmbedder(backend=ONNX)
    assert by_onnx.version == by_torch.version
    assert (by_onnx.input_size, by_onnx.dim) == (by_torch.input_size, by_torch.dim)
    expected, got = by_torch.embed_batch(faces), by_onnx.embed_batch(faces)
    assert np.abs(got - expected).max() < TOLERANCE
    # Each face's nearest other face is the same either way (what a search would rank).
    assert _nearest(got) == _nearest(expected)


def test_an_export_from_other_weights_or_none_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "embedder.pt"
    other.write_bytes(WEIGHTS.read_bytes() + b"\0")  # another file, so another version
    with pytest.raises(FileNotFoundError, match="export_onnx"):
        CardEmbedder(other, backend=ONNX)
    shutil.copy(onnx_path(WEIGHTS), onnx_path(other))
    with pytest.raises(ValueError, match="exported from weights"):
        CardEmbedder(other, backend=ONNX)


def test_the_exporter_writes_what_the_embedder_loads(tmp_path: Path) -> None:
    out = export(WEIGHTS, tmp_path / "embedder.onnx")
    meta = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    assert meta["cardcat_version"] == weights_version(WEIGHTS)
    assert json.loads(meta["cardcat_model"])["dim"] == 128
    weights = tmp_path / "embedder.pt"
    shutil.copy(WEIGHTS, weights)
    faces = _faces(3, seed=1)
    fresh = CardEmbedder(weights, backend=ONNX).embed_batch(faces)
    assert np.abs(fresh - CardEmbedder(backend=ONNX).embed_batch(faces)).max() < TOLERANCE


def test_a_process_that_embeds_in_onnx_runtime_never_imports_torch() -> None:
    """What the Embedder replica imports (the app module, the index bundle, the model) and does."""
    code = (
        "import sys\n"
        "import numpy as np\n"
        "import serve_app.app, serve_app.index_bundle\n"
        "from serve_app.app import _limit_threads\n"
        "from models.embedder import CardEmbedder\n"
        "from models.sessions import Backend\n"
        "_limit_threads('cpu', 1, torch_too=False)\n"
        "embedder = CardEmbedder(backend=Backend(kind='onnx'))\n"
        "vectors = embedder.embed_batch([np.zeros((838, 600, 3), np.uint8)])\n"
        "print(vectors.shape, 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[-2] == "(1, 128) False", done.stdout + done.stderr


def test_shipping_new_weights_writes_their_onnx_export(tmp_path: Path) -> None:
    """The embedder training's export (new weights from a run) writes the ONNX file beside them, so a
    replica that runs ONNX Runtime serves the new network rather than refusing a stale file."""
    from models.checkpoints import load_weights, read_weights
    from models.embedder_net import build_net
    from training.embedder.train import export as ship

    blob = read_weights(WEIGHTS)
    net = load_weights(build_net(blob["model"]), blob)
    target = tmp_path / "embedder.pt"
    config = {"model": blob["model"], "export": {"weights": str(target)}}
    assert ship(net, config, tmp_path, {}) == target
    assert onnx_path(target).exists()
    fresh = CardEmbedder(target, backend=ONNX)  # refused were the export not made from these weights
    assert fresh.version == weights_version(target)
