"""Train the card detector: `python -m training.detector.train --config training/detector/config.yaml`.

Photos are synthesised on the fly (`training.synth`, seeds < 1_000_000) from the cached catalog faces; each
gives one whole-photo view and zoomed views (see `data.py`). Loss: BCE with extra weight near the card's
edges (corner precision comes from there) + soft Dice, on the card mask and on the top/bottom bands. With
`train.teacher` (a trained detector's weights) the same loss against its probabilities is mixed in: how a
narrower network cut from it (`training.detector.slim`, `--init`) is distilled.

The run lives in runs/detector/<name>/ (resolved config, git SHA, metrics.jsonl, curves.png, last.pt) and
resumes from last.pt by default. The schedule follows max(step / steps, elapsed / budget), so a run on a
busy machine still finishes its cosine decay inside the wall-clock budget.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader
from tqdm import tqdm

from core.devices import resolve_device
from models.detector import CardDetector, DetectorConfig
from models.detector_net import build_net, read_net
from training.curves import Panel, Series
from training.detector.data import PhotoBatches, face_paths, fixed_batch
from training.detector.evaluate import make_photos, score
from training.run import Run, manifest_of, warmup_cosine
from training.runconfig import resolve_config
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
        # Distillation (`training.detector.slim`): a trained detector's weights file whose probabilities
        # the network also learns, with this share of the loss ("": none).
        "teacher": "",
        "distill_weight": 0.5,
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


def load_teacher(path: str, device: torch.device) -> torch.nn.Module | None:
    """The frozen network a distillation run learns from (None without `train.teacher`)."""
    if not path:
        return None
    net = read_net(Path(path).expanduser()).to(device)
    return net.to(memory_format=torch.channels_last).requires_grad_(False)


def trained_so_far(weights: Path) -> tuple[int, float]:
    """Steps and minutes of training behind exported weights, all runs since the first: their manifest."""
    facts = manifest_of(weights)["training"]
    return facts.get("total_steps", facts["steps"]), facts.get("total_minutes", facts["minutes"])


def training_loss(
    logits: torch.Tensor,
    target: torch.Tensor,
    x: torch.Tensor,
    teacher: torch.nn.Module | None,
    tc: dict[str, Any],
) -> torch.Tensor:
    """The detector loss against the photo's truth, mixed with the same loss against the teacher's
    probabilities when there is one: its soft edges carry where it puts a side, which the corners need."""
    loss = detector_loss(logits, target, tc)
    if teacher is None:
        return loss
    with torch.no_grad():
        soft = torch.sigmoid(teacher(x))
    weight = tc["distill_weight"]
    return (1 - weight) * loss + weight * detector_loss(logits, soft, tc)


# The card-photo kinds validation scores (found, corner error); no-card photos count false detections.
SCORED_KINDS = ("standard", "hard", "harsh")
CURVES = (
    Panel("loss", (Series("loss", "train", smooth=True), Series("val_loss", "val", "o-"))),
    Panel(
        "corner error (% card height)",
        tuple(Series(f"{k}_err_pct", f"{k} mean corner err %", "o-") for k in SCORED_KINDS),
    ),
    Panel(
        "rates",
        (
            *(Series(f"{k}_found", f"{k} found", "o-") for k in SCORED_KINDS),
            Series("nocard_false", "no-card false detections", "o-"),
            Series("empty_false", "card backs / empty holders: false detections", "o-"),
        ),
    ),
)


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
    for kind in SCORED_KINDS:
        res = score(detector, photos[kind])
        out[f"{kind}_found"], out[f"{kind}_err_pct"] = res["found"], res["corner_err_pct_mean"]
    out["nocard_false"] = score(detector, photos["nocard"])["false_detections"]
    if "empty" in photos:
        out["empty_false"] = score(detector, photos["empty"])["false_detections"]
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
    run = Run.start(REPO / "runs" / "detector" / cfg["name"], cfg)
    data_cfg = {**cfg["data"], **cfg["model"]}
    manifest = Path(cfg["data"]["manifest"]).expanduser()
    faces, held = face_paths(manifest), face_paths(manifest, holdout=True)
    print(f"{len(faces)} training faces, {len(held)} held out; run dir {run.directory}")

    net = build_net(DetectorConfig.from_dict(cfg["model"])).to(device).to(memory_format=torch.channels_last)
    teacher = load_teacher(tc["teacher"], device)
    opt = torch.optim.AdamW(net.parameters(), lr=tc["lr"], weight_decay=tc["weight_decay"])
    step, elapsed = 0, 0.0
    state = run.resume(args.fresh, map_location=device)
    if state is not None:
        net.load_state_dict(state["net"])
        opt.load_state_dict(state["opt"])
        step, elapsed = state["step"], state["elapsed"]
        print(f"resumed at step {step} ({elapsed / 60:.1f} min in)")
    else:
        run.clear_metrics()
        if args.init:
            state = run.start_from(net, args.init, opt, map_location=device)
            origin = str(args.init)
            if "slimmed_from" in state:  # a narrower cut of a trained detector (`training.detector.slim`)
                done = trained_so_far(Path(state["slimmed_from"]))
                origin = f"{args.init}, cut from {state['slimmed_from']}"
            elif "opt" in state:  # a run's checkpoint: weights and optimizer state
                done = (state["step"], state["elapsed"] / 60)
            else:  # exported weights (models/weights/detector.pt)
                done = trained_so_far(args.init)
            run.note_init(f"{origin} (step {done[0]}, {done[1]:.1f} min)")
            print(f"initialised from {args.init} (its step {done[0]}); schedule starts over")

    val_batch = fixed_batch(range(VAL_SEED_BASE, VAL_SEED_BASE + 8), held, data_cfg)
    n_val = tc["val_photos"]
    val_photos = {
        kind: make_photos(held, kind, n_val, VAL_SEED_BASE + 1000 * (i + 1))
        for i, kind in enumerate(("standard", "hard", "nocard", "harsh", "empty"))
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

    def progress() -> float:
        return max(step / tc["steps"], elapsed / budget)

    def save() -> None:
        run.save(
            {
                "net": net.state_dict(),
                "opt": opt.state_dict(),
                "step": step,
                "elapsed": elapsed,
                "config": cfg,
            }
        )

    net.train()
    bar = tqdm(total=100, desc="train", unit="%", initial=int(100 * progress()))
    t0, running = time.time() - elapsed, []
    for views, target in loader:
        if progress() >= 1:
            break
        p = progress()
        lr = warmup_cosine(tc["lr"], step, tc["warmup_steps"], p)
        for group in opt.param_groups:
            group["lr"] = lr
        views, target = views.to(device, non_blocking=True), target.to(device, non_blocking=True)
        x = ((views.permute(0, 3, 1, 2).float() - 127.5) / 64.0).contiguous(memory_format=torch.channels_last)
        loss = training_loss(net(x), target, x, teacher, tc)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        elapsed = time.time() - t0
        running.append(loss.item())
        if step % tc["log_every"] == 0:
            run.log(
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
            run.log(entry)
            tqdm.write(json.dumps(entry))
        if step % tc["ckpt_every"] == 0:
            if device.type == "cpu":
                threads = set_threads(threads)
            save()
            run.plot(CURVES)
    bar.close()
    entry = {
        "step": step,
        "min": round(elapsed / 60, 2),
        "final": True,
        **validate(net, cfg, val_batch, val_photos),
    }
    run.log(entry)
    print(json.dumps(entry))
    save()
    run.plot(CURVES)
    print(
        f"done: {step} steps in {elapsed / 60:.1f} min; export with "
        f"python -m training.detector.export --run {run.directory.relative_to(REPO)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
