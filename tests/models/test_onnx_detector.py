"""The detector's network in ONNX Runtime (`Backend(kind="onnx")`, `models/weights/detector.onnx`): torch's
probabilities to float rounding, torch's corners on real photos, the inference knobs of the weights it was
exported from, an export from other weights refused, and a process that decodes, locates and rectifies
this way (what a Detector replica does) without ever importing torch."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from PIL import Image

from cardcat.stack import REPO
from models.checkpoints import weights_version
from models.detector import INPUT, OUTPUT, WEIGHTS, CardDetector
from models.sessions import Backend, onnx_path
from tests.faces import base1_faces
from training.detector.evaluate import corner_error_pct
from training.detector.export_onnx import TOLERANCE, export
from training.renders import SHARED
from training.synth import BENCH_SEED_BASE, make_photo

ONNX = Backend(kind="onnx")
# Corners from the two runtimes, in % of the card's height. The probabilities differ by ~1e-7, but a
# sub-pixel edge fit can still move a little where a mask value sits at a threshold: on 40 benchmark photos
# (standard and hard) the worst was 2.3 px of a 12 MP photo, ~0.1%, as large as torch's own change between
# one and two threads. The detector's corner errors are ~0.2-0.5% (mean); a corner 5% off is a miss.
MAX_CORNER_SHIFT_PCT = 0.5

needs_shared = pytest.mark.skipif(
    not (SHARED / "catalog").exists(), reason=f"{SHARED}/catalog absent: no real card faces"
)


@pytest.fixture(scope="module")
def detectors() -> tuple[CardDetector, CardDetector]:
    return CardDetector(), CardDetector(backend=ONNX)


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> list[np.ndarray]:
    """Four base1 faces (held out of training)."""
    return base1_faces(4, tmp_path_factory.mktemp("renders"))


def test_the_shipped_export_gives_torchs_probabilities(detectors: tuple[CardDetector, CardDetector]) -> None:
    by_torch, by_onnx = detectors
    assert by_onnx.version == by_torch.version
    size = by_torch.cfg.input_size
    views = np.random.default_rng(3).integers(0, 256, (5, size, size, 3), np.uint8)
    expected = by_torch.session.run({INPUT: views})[OUTPUT]
    got = by_onnx.session.run({INPUT: views})[OUTPUT]
    assert got.shape == expected.shape == (5, 3, size, size)
    assert np.abs(got - expected).max() < TOLERANCE


def test_the_shipped_export_upsamples_by_constant_scales() -> None:
    """Every resize in the export has a constant scale, none a size computed from the tensor's shape: ONNX
    Runtime then keeps the decoder in its blocked-channel layout (~10% of a view's time); an export traced
    with `size=skip.shape` has Shape/Gather arithmetic feeding its resizes instead."""
    graph = onnx.load(str(onnx_path(WEIGHTS))).graph
    constants = {t.name for t in graph.initializer} | {
        n.output[0] for n in graph.node if n.op_type == "Constant"
    }
    resizes = [n for n in graph.node if n.op_type == "Resize"]
    assert len(resizes) == 5  # four decoder stages and the head
    for node in resizes:
        scales = node.input[2] if len(node.input) > 2 else ""
        assert scales in constants and (len(node.input) < 4 or not node.input[3]), node
    assert not [n for n in graph.node if n.op_type == "Shape"]


def test_the_export_carries_the_weights_inference_knobs(detectors: tuple[CardDetector, CardDetector]) -> None:
    by_torch, by_onnx = detectors
    assert by_onnx.cfg == by_torch.cfg


@needs_shared
def test_the_shipped_export_finds_torchs_corners(
    detectors: tuple[CardDetector, CardDetector], faces: list[np.ndarray]
) -> None:
    by_torch, by_onnx = detectors
    photos = [
        make_photo(face, BENCH_SEED_BASE + 7_000 + n, kind).image
        for n, face in enumerate(faces)
        for kind in ("standard", "hard")
    ]
    expected, got = by_torch.locate_batch(photos), by_onnx.locate_batch(photos)
    assert sum(q is not None for q in expected) >= len(photos) - 1  # the photos are ones it finds
    for mine, theirs in zip(got, expected, strict=True):
        assert (mine is None) == (theirs is None)
        if mine is not None and theirs is not None:
            assert corner_error_pct(mine, theirs) < MAX_CORNER_SHIFT_PCT


def test_an_export_from_other_weights_or_none_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "detector.pt"
    other.write_bytes(WEIGHTS.read_bytes() + b"\0")  # another file, so another version
    with pytest.raises(FileNotFoundError, match="export_onnx"):
        CardDetector(other, backend=ONNX)
    shutil.copy(onnx_path(WEIGHTS), onnx_path(other))
    with pytest.raises(ValueError, match="exported from weights"):
        CardDetector(other, backend=ONNX)


def test_the_exporter_writes_what_the_detector_loads(tmp_path: Path) -> None:
    weights = tmp_path / "detector.pt"
    shutil.copy(WEIGHTS, weights)
    out = export(weights)
    assert out == onnx_path(weights)
    meta = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    assert meta["cardcat_version"] == weights_version(WEIGHTS)
    fresh = CardDetector(weights, backend=ONNX)
    assert json.loads(meta["cardcat_model"]) == json.loads(json.dumps(dataclasses.asdict(fresh.cfg)))
    views = np.random.default_rng(4).integers(0, 256, (2, 224, 224, 3), np.uint8)
    shipped = CardDetector(backend=ONNX).session.run({INPUT: views})[OUTPUT]
    assert np.abs(fresh.session.run({INPUT: views})[OUTPUT] - shipped).max() < TOLERANCE


def test_a_process_that_locates_in_onnx_runtime_never_imports_torch(tmp_path: Path) -> None:
    """What the Detector replica imports (the app module, the model, the face check run by OpenCV) and
    does with a photo's bytes: decode at working scale, locate, check, rectify
    (`serve_app.stages.locate_photos`)."""
    photo = np.full((1200, 900, 3), 90, np.uint8)
    photo[200:1000, 200:770] = 230  # a pale card-shaped block: found or not, every stage runs
    buffer = io.BytesIO()
    Image.fromarray(photo).save(buffer, format="JPEG", quality=90)
    (tmp_path / "photo.jpg").write_bytes(buffer.getvalue())
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "import serve_app.app\n"
        "from serve_app.app import _limit_threads\n"
        "from serve_app.stages import locate_photos\n"
        "from models.detector import CardDetector\n"
        "from models.face_check import FaceCheck\n"
        "from models.sessions import Backend\n"
        "_limit_threads('cpu', 1, torch_too=False)\n"
        "detector = CardDetector(backend=Backend(kind='onnx'), check=FaceCheck())\n"
        f"found = locate_photos(detector, [Path({str(tmp_path / 'photo.jpg')!r}).read_bytes()], False)\n"
        "print(len(found), 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[-2] == "1 False", done.stdout + done.stderr


def test_shipping_new_weights_writes_their_onnx_export(tmp_path: Path) -> None:
    """`training.detector.export` (new weights from a run) writes the export beside them, so a replica
    that runs ONNX Runtime serves the new network rather than refusing a stale file."""
    import torch
    import yaml

    from models.detector_net import read_net
    from training.detector import export as ship

    run = tmp_path / "run"
    run.mkdir()
    config = yaml.safe_load((REPO / "training" / "detector" / "config.yaml").read_text())
    config["model"] = {"widths": [16, 32, 64, 96, 128], "decoder": [64, 48, 24, 16]}
    state = {"config": config, "net": read_net(WEIGHTS).state_dict(), "step": 1, "elapsed": 60.0}
    torch.save(state, run / "last.pt")
    (tmp_path / "eval.json").write_text("{}")
    out = tmp_path / "detector.pt"
    assert ship.main(["--run", str(run), "--out", str(out), "--eval", str(tmp_path / "eval.json")]) == 0
    assert onnx_path(out).exists()
    fresh = CardDetector(out, backend=ONNX)  # refused were the export not made from these weights
    assert fresh.version == weights_version(out) != weights_version(WEIGHTS)  # another file
