"""Train the card-face embedder: `python -m training.embedder.train --config training/embedder/config.yaml`.

Contrastive (InfoNCE) between each degraded photo and the clean faces of the batch, plus a memory of
recent clean embeddings for more negatives than one CPU batch can hold. Cards that share an artwork are
masked out of each other's negatives: they are reprints, and the embedding should keep them together.
With `train.teacher` (e.g. the shipped weights), photos are matched against the teacher's embeddings of
the clean faces and the network's own clean faces are held to the teacher's (`train.distill`), so a run
that teaches harder photos leaves the index's geometry, and the fusion's cosine bounds, where they were.

The run lives in runs/embedder/<name>/ (resolved config, git SHA, metrics.jsonl, curves.png, last.pt) and
resumes from last.pt by default; `--init models/weights/embedder.pt` starts a new run from shipped weights
(a fresh schedule). `train.device: auto` trains on CUDA when there is one (raise `data.workers` there:
the photos are made on the CPU; see gpu.yaml). The schedule follows max(step / max_steps, elapsed / budget),
so a run on a busy machine still finishes its cosine decay inside the wall-clock budget.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import cv2
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader
from tqdm import tqdm

from core.devices import resolve_device
from models.checkpoints import atomic_save, fp16_state, load_weights
from models.embedder import prepare
from models.embedder_net import build_net, to_tensor
from models.geometry import read_face
from training.curves import Panel, Series
from training.embedder import export_onnx
from training.embedder.data import (
    EVAL_SEED_BASE,
    HardBatchSampler,
    PairDataset,
    PhotoMix,
    collate,
    degrade,
    describe,
    load_cards,
    split_cards,
)
from training.run import Run, manifest_of, warmup_cosine
from training.runconfig import git_sha, resolve_config

REPO = Path(__file__).resolve().parents[2]
DEFAULTS: dict[str, Any] = {
    "name": "default",
    "seed": 0,
    "data": {
        "render_dir": "~/.cache/cardcat/renders/catalog",
        "held_out_percent": 5.0,
        "both_degraded_p": 0.2,
        "photo_p": 0.0,  # share of pairs made from a whole synthetic photo (PhotoMix)
        "photo_hard_p": 0.5,
        "photo_scale": 0.5,
        "corner_error": 0.02,
        "photo_hard_v1_p": 0.0,  # share of the hard photos from hard-v1 (PhotoMix.hard_v1_p)
        "photo_harsh_p": 0.0,  # share of the hard photos from #43's harsh bucket (PhotoMix.harsh_p)
        "photo_foil_p": 0.0,  # share of the photos' cards printed on foil (PhotoMix.foil_p)
        "photo_holder_p": 0.0,  # share of the harsh photos with the card in a holder (PhotoMix.holder_p)
        "workers": 1,
    },
    "model": {"dim": 128, "widths": [16, 32, 64, 128, 192], "grid": [4, 3], "input_size": [96, 134]},
    "train": {
        "batch_size": 128,
        "hard_fraction": 0.5,
        "lr": 3e-3,
        "weight_decay": 5e-4,
        "warmup_steps": 30,
        "temperature": 0.05,
        "memory_size": 2048,
        "memory_start": 0.25,
        "budget_minutes": 20.0,
        "max_steps": 100_000,
        "log_every": 10,
        "val_every": 60,
        "val_cards": 512,
        "ckpt_every": 30,
        # A teacher (exported weights, e.g. the shipped embedder): photos are contrasted against its
        # embeddings of the clean faces instead of the network's own, and the network's own clean faces
        # are held to the teacher's (`distill`: weight of 2 - 2 cos). The index's geometry, and so how
        # close wrong artworks sit, stays the teacher's while photos learn to land on their faces. "": off.
        "teacher": "",
        "distill": 1.0,
        "device": "cpu",  # auto: cuda when there is one
        "threads": 1,  # torch threads on the CPU (two shared cores: one for the net, one for a worker)
    },
    "export": {"enabled": True, "weights": "models/weights/embedder.pt"},
}


def info_nce(
    q: torch.Tensor,
    k: torch.Tensor,
    arts: torch.Tensor,
    memory: tuple[torch.Tensor, torch.Tensor] | None,
    temperature: float,
) -> torch.Tensor:
    """Photos (q) against clean faces (k, plus memory); the other direction in-batch. Same artwork, other
    card: neither positive nor negative."""
    keys, key_arts = k, arts
    if memory is not None and len(memory[0]):
        keys, key_arts = torch.cat([k, memory[0]]), torch.cat([arts, memory[1]])
    eye = torch.zeros(len(q), len(keys), dtype=torch.bool, device=q.device)
    eye[:, : len(q)] = torch.eye(len(q), dtype=torch.bool, device=q.device)
    same = (arts[:, None] == key_arts[None, :]) & ~eye
    logits = (q @ keys.T / temperature).masked_fill(same, float("-inf"))
    target = torch.arange(len(q), device=q.device)
    back = (k @ q.T / temperature).masked_fill(same[:, : len(q)], float("-inf"))
    return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(back, target))


def load_teacher(path: str, model: dict[str, Any], device: torch.device) -> torch.nn.Module | None:
    """The frozen network whose clean-face embeddings the photos are matched against (None: no teacher)."""
    if not path:
        return None
    teacher = build_net(model)
    load_weights(teacher, torch.load(REPO / path, map_location="cpu", weights_only=False))
    teacher = teacher.to(device).to(memory_format=torch.channels_last).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


def distill_loss(k: torch.Tensor, teacher_k: torch.Tensor) -> torch.Tensor:
    """Squared distance of unit vectors (2 - 2 cos): how far the network's clean faces moved off the
    teacher's."""
    return (2 - 2 * (k * teacher_k).sum(1)).mean()


def validation_set(
    cards: list[Any], n: int, size: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Held-out faces and one evaluation-seeded photo of each, made once so every check sees the same set."""
    chosen = cards[:: max(1, len(cards) // n)][:n]
    clean, photos = [], []
    for i, card in enumerate(chosen):
        face = read_face(card.low)
        clean.append(prepare(face, size))
        photos.append(prepare(degrade(face, EVAL_SEED_BASE + 900_000 + i), size))
    keys = sorted({c.artwork_key for c in chosen})
    arts = torch.tensor([keys.index(c.artwork_key) for c in chosen])
    return to_tensor(clean), to_tensor(photos), arts


@torch.inference_mode()
def validate(net: torch.nn.Module, val: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> dict[str, float]:
    net.eval()
    device = next(net.parameters()).device
    clean = torch.cat([net(c.to(device)).cpu() for c in val[0].split(128)])
    photos = torch.cat([net(p.to(device)).cpu() for p in val[1].split(128)])
    net.train()
    sims = photos @ clean.T
    top = sims.topk(5, dim=1).indices
    hit = val[2][top] == val[2][:, None]
    return {"val_top1": float(hit[:, 0].float().mean()), "val_top5": float(hit.any(1).float().mean())}


CURVES = (
    Panel("training loss", (Series("loss"),), ylabel="InfoNCE loss"),
    Panel(
        "held-out artwork retrieval (512 faces)",
        tuple(Series(key, marker="o") for key in ("val_top1", "val_top5")),
        ylabel="accuracy",
    ),
)


def export(net: torch.nn.Module, config: dict[str, Any], run: Path, summary: dict[str, Any]) -> Path:
    """fp16 weights + a manifest (what it was trained on, how, and how well) + the ONNX export: what the
    service reads."""
    target = REPO / config["export"]["weights"]
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_save({"model": config["model"], "state_dict": fp16_state(net)}, target)
    from models.embedder import CardEmbedder

    version = CardEmbedder(target).version
    manifest = {
        "version": version,
        "file": target.name,
        "size_bytes": target.stat().st_size,
        "params": sum(p.numel() for p in net.parameters()),
        "dim": config["model"]["dim"],
        "input_size": config["model"]["input_size"],
        "dtype": "float16",
        "git_sha": git_sha(),
        "run": str(run.relative_to(REPO)) if run.is_relative_to(REPO) else str(run),
        "config": config,
        **summary,
    }
    target.with_suffix(".json").write_text(json.dumps(manifest, indent=2) + "\n")
    export_onnx.export(target)  # a replica running ONNX Runtime refuses a stale export
    return target


def _worker_init(_: int) -> None:
    torch.set_num_threads(1)
    cv2.setNumThreads(1)


def _load_init(net: torch.nn.Module, path: Path, run: Run) -> None:
    """Start from exported weights (fp16 state_dict + manifest); the optimizer and schedule start over."""
    run.start_from(net, path)
    manifest = manifest_of(path)
    facts = manifest.get("training", {})
    steps, minutes = facts.get("steps"), facts.get("wall_minutes")
    run.note_init(f"{path} (version {manifest.get('version')}, step {steps}, {minutes} min)")
    print(f"initialised from {path} (its step {steps}); schedule starts over", file=sys.stderr)


def train(config: dict[str, Any], init: Path | None = None) -> Path:
    tc = config["train"]
    device = torch.device(resolve_device(tc["device"]))
    torch.set_num_threads(int(tc["threads"]))
    cv2.setNumThreads(1)
    torch.manual_seed(config["seed"])
    run = Run.start(REPO / "runs" / "embedder" / config["name"], config)
    render_dir = Path(os.path.expanduser(config["data"]["render_dir"]))
    train_cards, held = split_cards(load_cards(render_dir), config["data"]["held_out_percent"])
    size = (int(config["model"]["input_size"][0]), int(config["model"]["input_size"][1]))
    dc = config["data"]
    mix = PhotoMix(
        dc["photo_p"],
        dc["photo_hard_p"],
        dc["photo_scale"],
        dc["corner_error"],
        dc["photo_hard_v1_p"],
        dc["photo_harsh_p"],
        dc["photo_foil_p"],
        dc["photo_holder_p"],
    )
    dataset = PairDataset(train_cards, size, dc["both_degraded_p"], mix)
    net = build_net(config["model"])
    step, elapsed = 0, 0.0
    state = run.resume()
    if state is not None:
        net.load_state_dict(state["net"])
        step, elapsed = state["step"], state["elapsed"]
        print(f"resuming {run.directory.name} at step {step} ({elapsed / 60:.1f} min in)", file=sys.stderr)
    elif init is not None:
        run.clear_metrics()
        _load_init(net, init, run)
    net = net.to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(net.parameters(), lr=tc["lr"], weight_decay=tc["weight_decay"])
    if state is not None:
        opt.load_state_dict(state["opt"])
    val = validation_set(held, tc["val_cards"], size)
    teacher = load_teacher(tc.get("teacher", ""), config["model"], device)
    sampler = HardBatchSampler(
        dataset, tc["batch_size"], tc["hard_fraction"], config["seed"], start_step=step
    )
    loader = DataLoader(
        dataset,
        batch_sampler=sampler,
        collate_fn=collate,
        num_workers=dc["workers"],
        worker_init_fn=_worker_init,
        persistent_workers=dc["workers"] > 0,
        prefetch_factor=4 if dc["workers"] > 0 else None,
        pin_memory=device.type == "cuda",
    )
    budget = tc["budget_minutes"] * 60
    mem_q: list[tuple[torch.Tensor, torch.Tensor]] = []
    bar = tqdm(total=100, desc=f"train {run.directory.name}", unit="%", initial=0)
    started, progress, last = time.monotonic() - elapsed, 0.0, {}
    net.train()
    for anchors, photos, arts in loader:
        progress = max(step / tc["max_steps"], (time.monotonic() - started) / budget)
        if progress >= 1:
            break
        lr = warmup_cosine(tc["lr"], step, tc["warmup_steps"], progress)
        for group in opt.param_groups:
            group["lr"] = lr
        x = torch.cat([anchors, photos]).to(device, non_blocking=True)
        arts = arts.to(device, non_blocking=True)
        z = net(x.contiguous(memory_format=torch.channels_last))
        k, q = z[: len(anchors)], z[len(anchors) :]
        memory = None
        if progress >= tc["memory_start"] and mem_q:
            memory = (torch.cat([m[0] for m in mem_q]), torch.cat([m[1] for m in mem_q]))
        if teacher is None:
            loss = info_nce(q, k, arts, memory, tc["temperature"])
        else:
            with torch.no_grad():
                clean = x[: len(anchors)].contiguous(memory_format=torch.channels_last)
                teacher_k = teacher(clean)
            loss = info_nce(q, teacher_k, arts, memory, tc["temperature"])
            loss = loss + tc["distill"] * distill_loss(k, teacher_k)
            k = teacher_k  # the memory holds the keys photos are matched against
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        mem_q.append((k.detach(), arts))
        while sum(len(m[1]) for m in mem_q) > tc["memory_size"]:
            mem_q.pop(0)
        step += 1
        bar.update(int(progress * 100) - bar.n)
        if step % tc["log_every"] == 0:
            last = {
                "step": step,
                "loss": round(loss.item(), 4),
                "lr": lr,
                "elapsed_s": round(time.monotonic() - started, 1),
            }
            run.log(last)
            bar.set_postfix(loss=last["loss"], step=step)
        if step % tc["val_every"] == 0:
            run.log({"step": step, **validate(net, val)})
        if step % tc["ckpt_every"] == 0:
            elapsed = time.monotonic() - started
            run.save({"net": net.state_dict(), "opt": opt.state_dict(), "step": step, "elapsed": elapsed})
    bar.close()
    final = {"step": step, **validate(net, val)}
    run.log(final)
    total = time.monotonic() - started
    run.save({"net": net.state_dict(), "opt": opt.state_dict(), "step": step, "elapsed": total})
    run.plot(CURVES)
    summary = {
        "data": {**describe(train_cards), "held_out": describe(held), "source": "low.jpg renders"},
        "training": {
            "steps": step,
            "wall_minutes": round(total / 60, 2),
            "pairs_seen": step * tc["batch_size"],
            "final_loss": last.get("loss"),
            "device": device.type,
            "init": run.init_note(),
        },
        "metrics": {"validation": final},
    }
    (run.directory / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if config["export"]["enabled"]:
        path = export(net.eval(), config, run.directory, summary)
        print(f"exported {path}", file=sys.stderr)
    print(json.dumps(final), file=sys.stderr)
    return run.directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=None)
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override, e.g. train.lr=1e-3"
    )
    parser.add_argument("--init", type=Path, default=None, help="start a new run from exported weights")
    args = parser.parse_args(argv)
    train(resolve_config(DEFAULTS, args.config, args.set), args.init)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
