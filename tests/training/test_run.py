"""The training run harness (`training.run`): what a run records, how it resumes and starts from other
weights, its metrics log and curves, on real files and the shipped detector weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from models.checkpoints import read_weights
from models.detector import WEIGHTS, DetectorConfig
from models.detector_net import build_net
from training.curves import Panel, Series
from training.run import Run, manifest_of, warmup_cosine


def test_a_run_records_its_config_and_code(tmp_path: Path) -> None:
    config = {"name": "x", "train": {"lr": 0.001}, "vocab": "é★"}
    run = Run.start(tmp_path / "runs" / "x", config)
    assert yaml.safe_load((run.directory / "config.yaml").read_text()) == config
    sha = (run.directory / "git_sha.txt").read_text().strip()
    assert sha and sha != "unknown"


def test_checkpoints_resume_unless_fresh(tmp_path: Path) -> None:
    run = Run.start(tmp_path, {})
    assert run.resume() is None
    net = torch.nn.Linear(3, 2)
    run.save({"net": net.state_dict(), "step": 7, "elapsed": 1.5})
    assert [p.name for p in tmp_path.iterdir() if p.suffix in (".pt", ".tmp")] == ["last.pt"]
    state = run.resume()
    assert state is not None and state["step"] == 7 and state.keys() == {"net", "step", "elapsed"}
    torch.testing.assert_close(state["net"]["weight"], net.weight.detach())
    assert run.resume(fresh=True) is None


def test_metrics_log_and_curves(tmp_path: Path) -> None:
    run = Run.start(tmp_path, {})
    for step in range(1, 41):
        run.log({"step": step, "loss": 1 / step})
        if step % 10 == 0:
            run.log({"step": step, "val_acc": step / 40, "val_err": None})
    rows = run.metrics()
    assert len(rows) == 44 and rows[0] == {"step": 1, "loss": 1.0}
    run.plot(
        (
            Panel("loss", (Series("loss", "train", smooth=True),), log=True),
            Panel("validation", (Series("val_acc", marker="o"), Series("val_err"), Series("absent"))),
        )
    )
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    run.clear_metrics()
    assert run.metrics() == []


@pytest.mark.skipif(not WEIGHTS.exists(), reason=f"{WEIGHTS} absent")
def test_start_from_shipped_weights_or_another_runs_checkpoint(tmp_path: Path) -> None:
    blob = read_weights(WEIGHTS)
    cfg = DetectorConfig.from_dict(blob["config"])
    run = Run.start(tmp_path / "a", {})
    net = build_net(cfg)
    run.start_from(net, WEIGHTS)
    for key, value in net.state_dict().items():
        shipped = blob["state_dict"][key]
        assert value.dtype == (torch.float32 if shipped.is_floating_point() else shipped.dtype)
        assert torch.equal(value, shipped.to(value.dtype))
    facts = manifest_of(WEIGHTS)["training"]
    run.note_init(f"{WEIGHTS} (step {facts['steps']})")
    assert run.init_note() == f"{WEIGHTS} (step {facts['steps']})"

    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    net(torch.zeros(1, 3, 64, 64)).mean().backward()
    opt.step()
    run.save({"net": net.state_dict(), "opt": opt.state_dict(), "step": 1, "elapsed": 0.0})
    other = build_net(cfg)
    other_opt = torch.optim.AdamW(other.parameters(), lr=1e-3)
    state = Run.start(tmp_path / "b", {}).start_from(other, run.checkpoint, other_opt)
    assert state["step"] == 1 and other_opt.state_dict()["state"].keys() == opt.state_dict()["state"].keys()
    for key, value in other.state_dict().items():
        assert torch.equal(value, net.state_dict()[key])
    assert Run(tmp_path / "b").init_note() is None


def test_warmup_cosine() -> None:
    assert warmup_cosine(1.0, 0, 10, 0.0) == pytest.approx(0.1)
    assert warmup_cosine(1.0, 20, 10, 0.0) == 1.0
    assert warmup_cosine(1.0, 20, 10, 0.5) == pytest.approx(0.5)
    assert warmup_cosine(1.0, 20, 10, 1.0) == pytest.approx(0.0)
