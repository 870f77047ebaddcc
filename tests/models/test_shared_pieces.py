"""The small shared pieces the models, the trainers and the index build all use: the face reader, the
directory swap, the checkpoint rules and the conv block."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from models.checkpoints import as_float32, atomic_save, fp16_state, load_weights, state_dict_of
from models.files import swap_dir
from models.geometry import read_face
from models.layers import conv_bn_relu


def test_read_face_gives_rgb(tmp_path: Path) -> None:
    rgb = np.zeros((8, 6, 3), np.uint8)
    rgb[..., 0] = 200  # red
    cv2.imwrite(str(tmp_path / "face.png"), rgb[..., ::-1])  # OpenCV writes BGR
    face = read_face(tmp_path / "face.png")
    assert face.dtype == np.uint8 and face.shape == (8, 6, 3) and face.flags.c_contiguous
    np.testing.assert_array_equal(face, rgb)
    with pytest.raises(FileNotFoundError):
        read_face(tmp_path / "missing.jpg")


def test_swap_dir_replaces_a_tree_whole(tmp_path: Path) -> None:
    live = tmp_path / "index"
    for generation in ("first", "second"):
        built = tmp_path / f"index.new-{generation}"
        built.mkdir()
        (built / "meta.json").write_text(generation)
        swap_dir(built, live)
        assert (live / "meta.json").read_text() == generation and not built.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]  # the old tree is gone


def test_checkpoint_rules(tmp_path: Path) -> None:
    torch.manual_seed(0)
    block = conv_bn_relu(3, 4, 2)
    assert [type(m) for m in block] == [torch.nn.Conv2d, torch.nn.BatchNorm2d, torch.nn.ReLU]
    assert block[0].stride == (2, 2) and block[0].bias is None
    shipped = fp16_state(block)
    assert (
        shipped["0.weight"].dtype == torch.float16 and shipped["1.num_batches_tracked"].dtype == torch.int64
    )
    assert as_float32(shipped)["0.weight"].dtype == torch.float32
    assert as_float32(shipped)["1.num_batches_tracked"].dtype == torch.int64
    for wrap in ("state_dict", "model", "model_state_dict", "net"):
        assert state_dict_of({wrap: shipped, "config": {}}) is shipped
    assert state_dict_of(shipped) is shipped
    with pytest.raises(ValueError):
        state_dict_of([1, 2])
    atomic_save({"config": {"a": 1}, "state_dict": shipped}, tmp_path / "w.pt")
    assert [p.name for p in tmp_path.iterdir()] == ["w.pt"]
    again = load_weights(conv_bn_relu(3, 4, 2), torch.load(tmp_path / "w.pt", weights_only=True))
    torch.testing.assert_close(again[0].weight, block[0].weight, rtol=0, atol=1e-3)
    assert again[0].weight.dtype == torch.float32
