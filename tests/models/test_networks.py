"""The networks' contracts: what goes in and comes out (shapes, dtypes, ranges), determinism, BatchNorm
folding, and the shipped weights loading with the manifests shipped beside them."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from models import detector, detector_net, embedder, embedder_net
from models.checkpoints import load_weights, read_weights, state_dict_of
from models.sessions import fold_batchnorm
from tests.models.conftest import WEIGHTS, require_weights


def _params(net: torch.nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())


def test_detector_net_maps_views_to_three_maps_at_input_resolution() -> None:
    torch.manual_seed(0)
    net = detector_net.build_net(detector.DetectorConfig()).eval()
    views = torch.randint(0, 256, (2, 224, 224, 3), dtype=torch.uint8)
    with torch.inference_mode():
        logits = net(detector_net.to_tensor(list(views.numpy())))
        probs = detector_net.DetectorGraph(net)(views)
    assert logits.shape == probs.shape == (2, 3, 224, 224)
    assert logits.dtype == probs.dtype == torch.float32
    assert float(probs.min()) >= 0 and float(probs.max()) <= 1
    torch.testing.assert_close(probs, torch.sigmoid(logits), rtol=0, atol=1e-6)


@pytest.mark.parametrize("size", [224, 200])
def test_detector_net_upsamples_by_two_exactly_as_to_the_skips_size(
    size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decoder resizes each stage to its skip's size by `scale_factor=2` where that is twice the stage
    (a constant scale in the ONNX export); torch gives the same bits as resizing to the skip's size. A side
    that does not divide by 32 (200: the stages 7 -> 13 and 13 -> 25 px are not doubles) still reaches its
    skip's size."""
    torch.manual_seed(0)
    net = detector_net.build_net(detector.DetectorConfig()).eval()
    views = detector_net.to_tensor(list(torch.randint(0, 256, (2, size, size, 3), dtype=torch.uint8).numpy()))

    def by_size(x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.interpolate(x, size=skip.shape[-2:], mode="bilinear", align_corners=False)

    with torch.inference_mode():
        got = net(views)
        monkeypatch.setattr(detector_net, "_upsample_to", by_size)
        expected = net(views)
    assert got.shape == (2, 3, size, size)
    assert torch.equal(got, expected)


def test_embedder_net_maps_faces_to_unit_vectors() -> None:
    torch.manual_seed(0)
    net = embedder_net.build_net({"dim": 64}).eval()
    faces = torch.randint(0, 256, (3, embedder.INPUT_H, embedder.INPUT_W, 3), dtype=torch.uint8)
    with torch.inference_mode():
        vectors = embedder_net.EmbedderGraph(net)(faces)
    assert vectors.shape == (3, 64) and vectors.dtype == torch.float32
    torch.testing.assert_close(vectors.norm(dim=1), torch.ones(3), rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", ["detector", "embedder"])
def test_shipped_weights_are_deterministic_and_fold_to_the_same_outputs(name: str) -> None:
    """Eval mode answers the same input the same way twice; folding BatchNorm into the convs (what
    serving runs) changes outputs by float rounding only."""
    require_weights(f"{name}.pt")
    blob = read_weights(WEIGHTS / f"{name}.pt")
    if name == "detector":
        net: torch.nn.Module = detector_net.build_net(detector.DetectorConfig.from_dict(blob["config"]))
        x = torch.randint(
            0, 256, (2, 224, 224, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(1)
        )
        graph: torch.nn.Module = detector_net.DetectorGraph(load_weights(net, blob).eval())
    else:
        net = embedder_net.build_net(blob["model"])
        x = torch.randint(
            0, 256, (2, 134, 96, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(1)
        )
        graph = embedder_net.EmbedderGraph(load_weights(net, blob).eval())
    with torch.inference_mode():
        first, second = graph(x), graph(x)
        folded = fold_batchnorm(copy.deepcopy(graph))(x)
    assert torch.equal(first, second)
    torch.testing.assert_close(folded, first, rtol=0, atol=1e-4)
    assert not any(
        isinstance(m, torch.nn.BatchNorm2d) for m in fold_batchnorm(copy.deepcopy(graph)).modules()
    )


@pytest.mark.parametrize("name", ["detector", "detector_second"])
def test_detector_weights_match_their_manifest(name: str) -> None:
    """The detector and its second opinion (`models.detector.SECOND_WEIGHTS`)."""
    require_weights(f"{name}.pt", f"{name}.json")
    manifest = json.loads((WEIGHTS / f"{name}.json").read_text())
    blob = read_weights(WEIGHTS / f"{name}.pt")
    assert blob["config"] == manifest["inference"]
    assert (WEIGHTS / f"{name}.pt").stat().st_size == manifest["bytes"]
    net = load_weights(detector_net.build_net(detector.DetectorConfig.from_dict(blob["config"])), blob)
    assert _params(net) == manifest["parameters"]
    assert {v.dtype for v in state_dict_of(blob).values()} <= {torch.float16, torch.int64}
    model = detector.CardDetector(WEIGHTS / f"{name}.pt")
    assert model.cfg == detector.DetectorConfig.from_dict(manifest["inference"])
    assert model.version == hashlib.sha256((WEIGHTS / f"{name}.pt").read_bytes()).hexdigest()[:12]


def test_embedder_weights_match_their_manifest() -> None:
    require_weights("embedder.pt", "embedder.json")
    manifest = json.loads((WEIGHTS / "embedder.json").read_text())
    model = embedder.CardEmbedder()
    assert model.version == manifest["version"]  # the version every index records
    assert model.dim == manifest["dim"] and list(model.input_size) == manifest["input_size"]
    blob = read_weights(WEIGHTS / "embedder.pt")
    assert blob["model"] == manifest["config"]["model"]
    unfolded = load_weights(embedder_net.build_net(blob["model"]), blob)
    assert _params(unfolded) == manifest["params"]
    assert (WEIGHTS / "embedder.pt").stat().st_size == manifest["size_bytes"]


def test_reader_weights_match_their_manifest_and_compiled_network() -> None:
    require_weights("ocr.pt", "ocr.json", "ocr.ts")
    from models.ocr import PrintReader
    from models.ocr_net import build_model

    manifest = json.loads((WEIGHTS / "ocr.json").read_text())
    blob = read_weights(WEIGHTS / "ocr.pt")
    assert (blob["arch"], blob["vocab"]) == (manifest["arch"], manifest["vocab"])
    assert blob["model_kwargs"] == manifest["config"]["model_kwargs"]
    assert (WEIGHTS / "ocr.pt").stat().st_size == manifest["size_bytes"]
    net = load_weights(build_model(blob["arch"], blob["vocab"], **blob["model_kwargs"]), blob)
    assert _params(net) == manifest["params"]  # before folding
    docTR = PrintReader(compiled=None)
    compiled = PrintReader()
    assert compiled.model is None, "ocr.ts was not compiled from ocr.pt"
    assert (compiled.arch, compiled.vocab, compiled.is_ctc) == (docTR.arch, docTR.vocab, True)
    crops = [np.full((32, 288, 3), v, np.uint8) for v in (30, 200)]
    _, a = compiled.read_lines(crops)
    _, b = docTR.read_lines(crops)
    assert a is not None and b is not None and a.shape == b.shape and a.dtype == np.float32
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-3)


def test_the_compiled_reader_reads_the_same_without_the_jits_shape_specialisation() -> None:
    """A GPU replica runs the compiled reader without TorchScript's per-shape specialisation and fusion
    (`jit_optimize`, off by default on a GPU): on an H200 each new batch size the reader met cost a fusion
    compile, ~0.2 s of a core a face until every size had been seen, and a reader's batch sizes keep
    changing. The graph and its arithmetic stay: on this CPU, reads over changing batch sizes come out the
    same with the optimising executor and without."""
    require_weights("ocr.pt", "ocr.ts")
    from models.ocr import PrintReader

    assert PrintReader(load=False).jit_optimize  # a CPU replica keeps what it measured with
    assert not PrintReader(device="cuda", load=False).jit_optimize
    plain, tuned = PrintReader(jit_optimize=False), PrintReader()
    assert plain.model is None and tuned.model is None  # both the compiled network
    rng = np.random.default_rng(5)
    for n in (1, 4, 2, 6, 3):
        crops = [rng.integers(0, 256, (32, 288, 3), dtype=np.uint8) for _ in range(n)]
        _, a = plain.read_lines(crops)
        _, b = tuned.read_lines(crops)
        assert a is not None and b is not None
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)


def test_the_compiled_reader_runs_on_whatever_device_it_is_loaded_on(tmp_path: Path) -> None:
    """A trace records every tensor the network makes itself on the tracing device: the LSTM's zero state
    once came out as a constant `cpu` tensor, and the compiled reader compiled here failed on a GPU
    replica ("Input and hidden tensors are not at the same device", seen on an H200). The shipped file
    and a fresh compile must name no device at all."""
    require_weights("ocr.pt", "ocr.ts")
    from models.ocr import COMPILED
    from training.ocr.compile import compile_reader

    fresh = compile_reader(WEIGHTS / "ocr.pt", tmp_path / "fresh.ts")
    for path in (COMPILED, fresh):
        graph = str(torch.jit.load(str(path)).graph)
        assert "aten::lstm" in graph  # the part that makes its own state
        assert not re.findall(r'Device = prim::Constant\[value="[^"]*"\]', graph), path
