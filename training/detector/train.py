"""Train the card detector: `python -m training.detector.train --config training/detector/config.yaml`.

Photos are synthesised on the fly (`training.synth`, seeds < 1_000_000) from the cached catalog faces; each
gives one whole-photo view and zoomed views (see `data.py`). Loss: BCE with extra weight near the card's
edges (corner precision comes from there) + soft Dice, on the card mask and on the top/bottom bands.

The run lives in runs/detector/<name>/ (resolved config, git SHA, metrics.jsonl, curves.png, last.pt) and
resumes from last.pt by default. The schedule follows max(step / steps, elapsed / budget), so a run on a
busy machine still finishes its cosine decay inside the wall-clock budget.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
import yaml
from torch.nn import functional as F
from torch.utils.data import DataLoader
from tqdm import tqdm

from models.detector import CardDetector, DetectorConfig, build_net
from serve_app.config import resolve_device
from training.detector.data import PhotoBatches, face_paths, fixed_batch
from training.detector.evaluate import make_photos, score
from training.runconfig import git_sha, resolve_config
from training.synth import VAL_SEED_BASE, Photo

REPO = Path(__file__).resolve().parents[2]
DEFAULTS: dict[str, Any] = {
    "name": "default",
    "data": {
        "manifest": "~/.cache/cardcat/renders/catalog/manifest.jsonl",
        "photos_per_batch": 4,
        "zooms": 4,
        "p_crop": 0.5,
        "p_nocard": 0.12,
        "p_hard": 0.4,
        "zoom_jitter": 0.05,
        "zoom_roll90": 0.1,
        "seed_base": 0,
        "workers": 1,
    },
    "model": {
        "input_size": 224,
        "zoom_fill": 0.78,
        "widths": [16, 32, 64, 96, 128],
        "decoder": [64, 48, 24, 16],
    },
    "train": {
        "lr": 3e-3,
        "weight_decay": 1e-4,
        "warmup_steps": 40,
        "steps": 100_000,
        "budget_minutes": 22.0,
        "edge_weight": 4.0,
        "band_weight": 0.5,
        "dice_weight": 0.5,
        "log_every": 10,
        "val_every": 150,
        "val_photos": 20,
        "ckpt_every": 50,
        "device": "auto",  # cuda when there is one (then raise data.workers: photos are made on the CPU)
    },
}


def detector_loss(logits: torch.Tensor, target: torch.Tensor, cfg: dict[str, Any]) -> torch.Tensor:
    """Edge-weighted BCE + batch Dice; the edge band is where a pixel of error becomes corner error."""
    mask = target[:, :1]
    edge = (F.max_pool2d(mask, 5, 1, 2) + F.max_pool2d(-mask, 5, 1, 2)) > 0.01
    weight = 1 + cfg["edge_weight"] * edge.float()
    bce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
    mask_bce = (bce[:, :1] * weight).sum() / weight.sum()
    prob = torch.sigmoid(logits)
    inter = (prob * target).sum((0, 2, 3))
    dice = 1 - (2 * inter + 1) / (prob.sum((0, 2, 3)) + target.sum((0, 2, 3)) + 1)
    band = bce[:, 1:].mean() + dice[1:].mean()
    return mask_bce + cfg["dice_weight"] * dice[0] + cfg["band_weight"] * band


def plot_curves(metrics: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [m for m in metrics if "loss" in m]
    val = [m for m in metrics if "val_loss" in m]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    if train:
        steps, loss = [m["step"] for m in train], np.array([m["loss"] for m in train])
        k = max(1, len(loss) // 30)
        axes[0].plot(steps, loss, alpha=0.3, label="train")
        axes[0].plot(steps[k - 1 :], np.convolve(loss, np.ones(k) / k, "valid"), label="train (smoothed)")
    if val:
        vs = [m["step"] for m in val]
        axes[0].plot(vs, [m["val_loss"] for m in val], "o-", label="val")
        for key in ("standard", "hard"):
            axes[1].plot(vs, [m[f"{key}_err_pct"] for m in val], "o-", label=f"{key} mean corner err %")
            axes[2].plot(vs, [m[f"{key}_found"] for m in val], "o-", label=f"{key} found")
        axes[2].plot(vs, [m["nocard_false"] for m in val], "o-", label="no-card false detections")
    for ax, title in zip(axes, ("loss", "corner error (% card height)", "rates"), strict=True):
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def validate(
    net: torch.nn.Module,
    cfg: dict[str, Any],
    batch: tuple[torch.Tensor, torch.Tensor],
    photos: dict[str, list[Photo]],
) -> dict[str, Any]:
    """Loss on a fixed batch, then the serving path on the cached validation photos."""
    net.eval()
    device = next(net.parameters()).device
    views, target = (t.to(device) for t in batch)
    with torch.inference_mode():
        x = ((views.permute(0, 3, 1, 2).float() - 127.5) / 64.0).contiguous(memory_format=torch.channels_last)
        loss = float(detector_loss(net(x), target, cfg["train"]))
    detector = CardDetector.from_net(net, DetectorConfig.from_dict(cfg["model"]), str(device))
    out: dict[str, Any] = {"val_loss": round(loss, 4)}
    for kind in ("standard", "hard"):
        res = score(detector, photos[kind])
        out[f"{kind}_found"], out[f"{kind}_err_pct"] = res["found"], res["corner_err_pct_mean"]
    out["nocard_false"] = score(detector, photos["nocard"])["false_detections"]
    net.train()
    return out


def set_threads(current: int = 0) -> int:
    """Two torch threads on the 2-core box, one while another training (OCR) shares it."""
    try:
        busy = subprocess.run(["pgrep", "-f", "training.ocr.train"], capture_output=True).returncode == 0
    except OSError:
        busy = False
    want = 1 if busy else 2
    if want != current:
        torch.set_num_threads(want)
        if current:
            tqdm.write(f"torch threads {current} -> {want}")
    return want


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--fresh", action="store_true", help="ignore last.pt and start over")
    parser.add_argument(
        "--init", type=Path, help="start a new run from this checkpoint's weights and optimizer state"
    )
    args = parser.parse_args(argv)
    cfg = resolve_config(DEFAULTS, args.config, args.set)
    tc = cfg["train"]
    device = torch.device(resolve_device(tc["device"]))
    threads = set_threads() if device.type == "cpu" else 0
    cv2.setNumThreads(1)
    torch.manual_seed(0)
    run = REPO / "runs" / "detector" / cfg["name"]
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    (run / "git_sha.txt").write_text(git_sha() + "\n")
    data_cfg = {**cfg["data"], **cfg["model"]}
    manifest = Path(cfg["data"]["manifest"]).expanduser()
    faces, held = face_paths(manifest), face_paths(manifest, holdout=True)
    print(f"{len(faces)} training faces, {len(held)} held out; run dir {run}")

    net = build_net(DetectorConfig.from_dict(cfg["model"])).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(net.parameters(), lr=tc["lr"], weight_decay=tc["weight_decay"])
    step, elapsed = 0, 0.0
    ckpt = run / "last.pt"
    if ckpt.exists() and not args.fresh:
        state = torch.load(ckpt, map_location=device, weights_only=False)
        net.load_state_dict(state["net"])
        opt.load_state_dict(state["opt"])
        step, elapsed = state["step"], state["elapsed"]
        print(f"resumed at step {step} ({elapsed / 60:.1f} min in)")
    else:
        if (run / "metrics.jsonl").exists():
            (run / "metrics.jsonl").unlink()
        if args.init:
            state = torch.load(args.init, map_location=device, weights_only=False)
            if "opt" in state:  # a run's checkpoint: weights and optimizer state
                net.load_state_dict(state["net"])
                opt.load_state_dict(state["opt"])
                done = (state["step"], state["elapsed"] / 60)
            else:  # exported weights (models/weights/detector.pt); their manifest says how they were made
                net.load_state_dict({k: v.float() for k, v in state["state_dict"].items()})
                facts = json.loads(args.init.with_suffix(".json").read_text())["training"]
                done = facts.get("total_steps", facts["steps"]), facts.get("total_minutes", facts["minutes"])
            (run / "init.txt").write_text(f"{args.init} (step {done[0]}, {done[1]:.1f} min)\n")
            print(f"initialised from {args.init} (its step {done[0]}); schedule starts over")

    val_batch = fixed_batch(range(VAL_SEED_BASE, VAL_SEED_BASE + 8), held, data_cfg)
    n_val = tc["val_photos"]
    val_photos = {
        kind: make_photos(held, kind, n_val, VAL_SEED_BASE + 1000 * (i + 1))
        for i, kind in enumerate(("standard", "hard", "nocard"))
    }
    workers = int(cfg["data"]["workers"])
    loader = DataLoader(
        PhotoBatches(faces, data_cfg, start=step),
        batch_size=None,
        num_workers=workers,
        prefetch_factor=4 if workers else None,
        persistent_workers=bool(workers),
        pin_memory=device.type == "cuda",
    )
    budget = tc["budget_minutes"] * 60
    metrics_path = run / "metrics.jsonl"

    def progress() -> float:
        return max(step / tc["steps"], elapsed / budget)

    def save() -> None:
        torch.save(
            {
                "net": net.state_dict(),
                "opt": opt.state_dict(),
                "step": step,
                "elapsed": elapsed,
                "config": cfg,
            },
            run / "last.tmp",
        )
        (run / "last.tmp").replace(ckpt)

    def log(entry: dict[str, Any]) -> None:
        with metrics_path.open("a") as fh:
            fh.write(json.dumps(entry) + "\n")

    net.train()
    bar = tqdm(total=100, desc="train", unit="%", initial=int(100 * progress()))
    t0, running = time.time() - elapsed, []
    for views, target in loader:
        if progress() >= 1:
            break
        p = progress()
        lr = tc["lr"] * min(1.0, (step + 1) / tc["warmup_steps"]) * 0.5 * (1 + math.cos(math.pi * p))
        for group in opt.param_groups:
            group["lr"] = lr
        views, target = views.to(device, non_blocking=True), target.to(device, non_blocking=True)
        x = ((views.permute(0, 3, 1, 2).float() - 127.5) / 64.0).contiguous(memory_format=torch.channels_last)
        loss = detector_loss(net(x), target, tc)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        elapsed = time.time() - t0
        running.append(loss.item())
        if step % tc["log_every"] == 0:
            log(
                {
                    "step": step,
                    "loss": round(float(np.mean(running)), 4),
                    "lr": lr,
                    "min": round(elapsed / 60, 2),
                    "threads": threads,
                }
            )
            bar.set_postfix(step=step, loss=f"{np.mean(running):.3f}")
            running = []
        bar.n = min(100, int(100 * progress()))
        bar.refresh()
        if step % tc["val_every"] == 0:
            entry = {"step": step, "min": round(elapsed / 60, 2), **validate(net, cfg, val_batch, val_photos)}
            log(entry)
            tqdm.write(json.dumps(entry))
        if step % tc["ckpt_every"] == 0:
            if device.type == "cpu":
                threads = set_threads(threads)
            save()
            plot_curves(
                [json.loads(line) for line in metrics_path.read_text().splitlines()], run / "curves.png"
            )
    bar.close()
    entry = {
        "step": step,
        "min": round(elapsed / 60, 2),
        "final": True,
        **validate(net, cfg, val_batch, val_photos),
    }
    log(entry)
    print(json.dumps(entry))
    save()
    plot_curves([json.loads(line) for line in metrics_path.read_text().splitlines()], run / "curves.png")
    print(
        f"done: {step} steps in {elapsed / 60:.1f} min; export with "
        f"python -m training.detector.export --run {run.relative_to(REPO)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
