"""benchmarks/scan_gpu_stack.py's transport to a GPU box: which packages travel, a wheel unpacked with its
executables still executable, and a bundle cut into parts, staged one call at a time and joined whole
(a missing or altered part is refused)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import zipfile
from pathlib import Path

import pytest

from benchmarks import scan_gpu_stack
from benchmarks.scan_gpu_stack import locked_packages, split_bundle, unpack_wheels

REPO = Path(__file__).resolve().parents[1]


def test_the_lock_gives_what_the_gpu_box_lacks_and_nothing_it_has() -> None:
    packages = {spec.split("==")[0].lower(): spec for spec in locked_packages(REPO / "requirements.lock")}
    for needed in ("ray", "fastapi", "sqlalchemy", "faiss-cpu", "python-doctr", "pydantic", "uvicorn"):
        assert needed in packages, needed
    assert packages["ray"] == "ray==2.60.0"
    for present in ("torch", "torchvision", "numpy", "scipy", "pillow", "httpx", "grpcio"):
        assert present not in packages, present
    assert not [name for name in packages if name.startswith(("nvidia-", "cuda-"))]
    assert "tritonclient" not in packages and "opencv-python" not in packages


def test_a_wheel_unpacks_with_its_modes_and_without_rays_unused_parts(tmp_path: Path) -> None:
    wheel = tmp_path / "wheels" / "ray-0-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, mode in (
            ("ray/core/src/ray/raylet/raylet", 0o755),
            ("ray/__init__.py", 0o644),
            ("ray/jars/ray_dist.jar", 0o644),
            ("ray/rllib/algo.py", 0o644),
            ("ray-0.data/purelib/extra.py", 0o644),
            ("ray-0.data/scripts/ray", 0o755),
        ):
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            archive.writestr(info, b"x")
    site = tmp_path / "site"
    unpack_wheels([wheel], site)
    raylet = site / "ray/core/src/ray/raylet/raylet"
    assert raylet.exists() and os.access(raylet, os.X_OK)
    assert (site / "ray/__init__.py").exists() and not os.access(site / "ray/__init__.py", os.X_OK)
    assert (site / "extra.py").exists()
    assert not (site / "ray/jars").exists() and not (site / "ray/rllib").exists()
    assert not (site / "ray").joinpath("scripts").exists() and not (site / "ray-0.data").exists()


def _args(tmp_path: Path) -> argparse.Namespace:
    return argparse.Namespace(bundle=tmp_path / "bundle", stage_dir=tmp_path / "box")


def test_parts_staged_one_call_at_a_time_join_into_the_bundle(tmp_path: Path) -> None:
    args = _args(tmp_path)
    args.bundle.mkdir()
    payload = os.urandom(5 * 2**20 + 123)
    bundle = args.bundle / "bundle.tar.xz"
    bundle.write_bytes(payload)
    parts = split_bundle(bundle, 2.0)
    assert [p["bytes"] for p in parts] == [2 * 2**20, 2 * 2**20, 2**20 + 123]
    manifest = {"parts": parts, "sha256": hashlib.sha256(payload).hexdigest()}
    (args.bundle / "parts.json").write_text(json.dumps(manifest))
    carried = {p["name"]: (args.bundle / p["name"]).read_bytes() for p in parts}
    for part in parts:  # a call carries one part; the others are not in its tree
        (args.bundle / part["name"]).unlink()
    for name, body in carried.items():
        (args.bundle / name).write_bytes(body)
        assert scan_gpu_stack.stage(args) == 0
        (args.bundle / name).unlink()
    assert sorted(p.name for p in (args.stage_dir / "parts").iterdir()) == sorted(carried)
    joined = b"".join((args.stage_dir / "parts" / p["name"]).read_bytes() for p in parts)
    assert joined == payload


def test_an_altered_part_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _args(tmp_path)
    args.bundle.mkdir()
    bundle = args.bundle / "bundle.tar.xz"
    bundle.write_bytes(os.urandom(3 * 2**20))
    parts = split_bundle(bundle, 2.0)
    (args.bundle / "parts.json").write_text(json.dumps({"parts": parts, "sha256": "0"}))
    (args.bundle / parts[0]["name"]).write_bytes(b"not the part")
    assert scan_gpu_stack.stage(args) == 1
    assert "not the part parts.json names" in capsys.readouterr().err


def test_run_waits_for_every_part_and_refuses_a_bundle_that_is_not_the_one_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _args(tmp_path)
    args.bundle.mkdir()
    bundle = args.bundle / "bundle.tar.xz"
    bundle.write_bytes(os.urandom(3 * 2**20))
    parts = split_bundle(bundle, 2.0)
    (args.bundle / "parts.json").write_text(json.dumps({"parts": parts, "sha256": "0" * 64}))
    (args.bundle / parts[1]["name"]).unlink()
    assert scan_gpu_stack.stage(args) == 0
    assert scan_gpu_stack.run(args) == 1
    assert "parts not staged yet: part-02" in capsys.readouterr().err
    (args.stage_dir / "parts" / parts[1]["name"]).write_bytes(b"x")  # present, but not what was made
    assert scan_gpu_stack.run(args) == 1
    assert "not the bundle parts.json names" in capsys.readouterr().err
