"""Train the print reader: `python -m training.ocr.train --config training/ocr/config.yaml [--set k=v]`.

Config is layered (defaults -> YAML -> `--set` overrides). A run lives in `runs/ocr/<name>/`: the resolved
config and git SHA, periodic checkpoints (a run resumes from `last.pt` by default, so a stopped run loses
nothing), `metrics.jsonl` and `curves.png`. Training stops at `steps` or after `max_minutes` of wall time
(the machine is shared: one thread, one data worker), then exports fp16 weights to `models/weights/ocr.pt`.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
from rapidfuzz.distance import Levenshtein
from torch.nn import functional as F
from tqdm import tqdm

from core.devices import resolve_device
from models.checkpoints import fp16_state
from models.ocr import WEIGHTS
from models.ocr_net import build_model, crnn_features, crnn_logits
from models.ocr_text import ctc_greedy
from training.curves import Panel, Series
from training.ocr.data import IGNORE, VOCAB, LineBatches, LineSampler, catalog_texts, collate, is_eval_card
from training.renders import DEFAULT_CACHE, SHARED, read_manifest
from training.run import Run
from training.runconfig import git_sha, resolve_config

REPO = Path(__file__).resolve().parents[2]
VAL_SEED_BASE = 19_000_000  # in-training validation; evaluate.py uses 10,000,000 and up
DEFAULTS: dict[str, Any] = {
    "name": "crnn-mbv3s",
    "arch": "crnn_mobilenet_v3_small",
    "model_kwargs": {"rnn_units": 64},
    "vocab": VOCAB,
    "batch": 16,
    "steps": 900,
    "lr": 1e-3,
    "weight_decay": 1e-4,
    "warmup": 50,
    "ramp_steps": 400,
    "grad_clip": 5.0,
    "frame_weight": 1.0,
    "aux_weight": 1.0,
    "rnn_lr_mult": 10.0,
    "bn_momentum": 0.1,
    "data": {"p_negative": 0.15, "p_background": 0.03, "p_synthetic": 0.2, "p_degrade": 0.85},
    "log_every": 10,
    "val_every": 100,
    "val_size": 96,
    "checkpoint_every": 100,
    "max_minutes": 22.0,
    "threads": 1,
    "workers": 1,
    "device": "auto",  # cuda when there is one (then use many `workers`: the crops are made on the CPU)
    "catalog": str(SHARED / "catalog"),
    "faces": str(DEFAULT_CACHE / "catalog"),
    "runs": "runs/ocr",
    "export": str(WEIGHTS),
    "init": None,  # weights to start from (an exported ocr.pt or a run's last.pt) when not resuming
    "lr_clock": False,  # anneal by the wall clock too (see schedule), for runs capped by max_minutes
    "seed_offset": 0,  # in steps: set past the init weights' samples so a longer run sees new ones
}


def ctc_loss(logits: torch.Tensor, texts: list[str], vocab: str) -> torch.Tensor:
    """Mean per-glyph CTC loss; empty targets (nothing centred in the crop) are allowed."""
    index = {c: i for i, c in enumerate(vocab)}
    device = logits.device
    targets = torch.tensor([index[c] for t in texts for c in t], dtype=torch.long, device=device)
    lengths = torch.tensor([len(t) for t in texts], dtype=torch.long, device=device)
    log_probs = logits.log_softmax(-1).transpose(0, 1)  # T, B, C
    steps = torch.full((logits.shape[0],), logits.shape[1], dtype=torch.long, device=device)
    loss = F.ctc_loss(
        log_probs, targets, steps, lengths, blank=len(vocab), reduction="none", zero_infinity=True
    )
    return (loss / lengths.clamp(min=1)).mean()


def line_loss(
    model: torch.nn.Module, aux: torch.nn.Module, batch: dict[str, Any], key: str, cfg: dict[str, Any]
) -> tuple[torch.Tensor, torch.Tensor]:
    """CTC on the text, and cross-entropy on where each glyph is (see data.frame_targets).

    The glyph cross-entropy is applied twice: to the CRNN's output and, through a linear head used only in
    training, straight to the backbone's features. The backbone learns glyphs from that short path within
    ~100 steps, while the BiLSTM alone took far longer than our CPU budget to learn anything.
    """
    seq = crnn_features(model, batch[key])
    logits = crnn_logits(model, batch[key], seq)
    frames = batch[f"{key}_frames"]
    ce = F.cross_entropy(logits.transpose(1, 2), frames, ignore_index=IGNORE)
    ce_aux = F.cross_entropy(aux(seq).transpose(1, 2), frames, ignore_index=IGNORE)
    ctc = ctc_loss(logits, batch[f"{key}_text"], cfg["vocab"])
    return ctc, cfg["frame_weight"] * ce + cfg["aux_weight"] * ce_aux


def validate(model: torch.nn.Module, val: dict[str, Any], vocab: str) -> dict[str, float]:
    """Line exact-match and CER on fixed held-out crops."""
    model.eval()
    out: dict[str, float] = {}
    with torch.inference_mode():
        for region in ("name", "footer"):
            reads = ctc_greedy(crnn_logits(model, val[region]).softmax(-1).float().cpu().numpy(), vocab)
            truth = val[f"{region}_text"]
            out[f"val_{region}_acc"] = float(np.mean([r[0] == t for r, t in zip(reads, truth, strict=True)]))
            errors = sum(Levenshtein.distance(r[0], t) for r, t in zip(reads, truth, strict=True))
            out[f"val_{region}_cer"] = errors / max(1, sum(len(t) for t in truth))
    model.train()
    return out


# curves.png: losses and validation accuracy
CURVES = (
    Panel("CTC loss", tuple(Series(key) for key in ("loss_name", "loss_footer")), log=True),
    Panel(
        "validation",
        tuple(
            Series(k, marker=".")
            for k in ("val_name_acc", "val_footer_acc", "val_name_cer", "val_footer_cer")
        ),
    ),
)


def schedule(cfg: dict[str, Any], clock: Any = None) -> Any:
    """Linear warm-up, then cosine down to 5% of the peak at `steps`.

    With `clock` (the share of `max_minutes` spent, 0..1; config `lr_clock`) the cosine follows whichever
    runs out first, steps or minutes, so a run slowed by a busy machine still ends annealed.
    """

    def factor(step: int) -> float:
        if step < cfg["warmup"]:
            return (step + 1) / cfg["warmup"]
        t = min(1.0, (step - cfg["warmup"]) / max(1, cfg["steps"] - cfg["warmup"]))
        if clock is not None:
            t = max(t, min(1.0, clock()))
        return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * t))

    return factor


def export(cfg: dict[str, Any], model: torch.nn.Module, run: Path, summary: dict[str, Any]) -> Path:
    """fp16 state dict with arch, vocab and kwargs (what PrintReader needs), plus the JSON manifest."""
    path = Path(cfg["export"])
    path.parent.mkdir(parents=True, exist_ok=True)
    state = fp16_state(model)
    blob = {
        "arch": cfg["arch"],
        "vocab": cfg["vocab"],
        "model_kwargs": cfg["model_kwargs"],
        "state_dict": state,
    }
    torch.save(blob, path)
    manifest = {
        "file": path.name,
        "size_bytes": path.stat().st_size,
        "arch": cfg["arch"],
        "params": sum(p.numel() for p in model.parameters()),
        "git_sha": git_sha(),
        "run": str(run),
        "config": {k: v for k, v in cfg.items() if k != "vocab"},
        "vocab": cfg["vocab"],
        "data": summary["data"],
        "training": {k: v for k, v in summary.items() if k != "data"},
    }
    # evaluate.py adds "evaluation" for these weights
    path.with_suffix(".json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return path


def line_samplers(faces: Path, catalog: Path, data: dict[str, Any]) -> tuple[LineSampler, LineSampler]:
    """Training lines from the rendered cards outside the held-out split; validation lines from inside it,
    always from real faces (no backgrounds, synthetic bands or set-code boost)."""
    texts = catalog_texts(catalog)
    rendered = read_manifest(faces / "manifest.jsonl")
    train_ids = sorted(i for i in rendered if i in texts and not is_eval_card(i))
    eval_ids = sorted(i for i in rendered if i in texts and is_eval_card(i))
    clean = {**data, "p_background": 0.0, "p_synthetic": 0.0, "p_coded": 0.0}
    return LineSampler(faces, texts, train_ids, data), LineSampler(faces, texts, eval_ids, clean)


def to_device(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    return {k: v.to(device, non_blocking=True) if torch.is_tensor(v) else v for k, v in batch.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    parser.add_argument("--no-export", action="store_true")
    args = parser.parse_args(argv)
    cfg = resolve_config(DEFAULTS, args.config, args.set)
    torch.set_num_threads(cfg["threads"])
    device = torch.device(resolve_device(cfg["device"]))
    cv2.setNumThreads(0)  # OpenCV's thread pool does not survive the fork into the data worker (it hangs)
    torch.manual_seed(0)
    run = Run.start(REPO / cfg["runs"] / cfg["name"], cfg)

    faces = Path(cfg["faces"])
    sampler, val_sampler = line_samplers(faces, Path(cfg["catalog"]), cfg["data"])
    val_rows = [val_sampler(VAL_SEED_BASE + i) for i in range(cfg["val_size"])]

    model = build_model(cfg["arch"], cfg["vocab"], **cfg["model_kwargs"])
    mean, std = model.cfg["mean"], model.cfg["std"]
    val = to_device(collate(val_rows, (mean, std)), device)
    model.to(device)
    with torch.no_grad():
        width = crnn_features(model.eval(), val["footer"][:1]).shape[-1]
    aux = torch.nn.Linear(width, len(cfg["vocab"]) + 1).to(device)  # training-only glyph head
    for module in model.modules():  # docTR's 0.01 leaves eval-mode statistics stale for a short run
        if isinstance(module, torch.nn.BatchNorm2d):
            module.momentum = cfg["bn_momentum"]
    rnn = [*model.decoder.parameters(), *model.linear.parameters()]
    rest = [p for p in model.parameters() if all(p is not q for q in rnn)] + list(aux.parameters())
    params = rest + rnn
    groups = [{"params": rest}, {"params": rnn, "lr": cfg["lr"] * cfg["rnn_lr_mult"]}]
    opt = torch.optim.AdamW(groups, lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    started = time.time()

    def clock() -> float:
        return (time.time() - started) / 60 / cfg["max_minutes"]

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule(cfg, clock if cfg["lr_clock"] else None))
    start, trained_s = 0, 0.0
    state = run.resume(args.fresh, map_location=device)
    if state is not None:
        model.load_state_dict(state["model"])
        aux.load_state_dict(state["aux"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        start, trained_s = state["step"], state["trained_s"]
        print(f"resuming {run.directory} at step {start}")
    elif cfg["init"]:
        run.start_from(model, Path(cfg["init"]))
        print(f"initialised from {cfg['init']}")

    def save(step: int) -> None:
        blob = {"model": model.state_dict(), "aux": aux.state_dict(), "opt": opt.state_dict()}
        run.save({**blob, "sched": sched.state_dict(), "step": step, "trained_s": trained_s})

    batches = LineBatches(
        sampler, cfg["batch"], range(start, cfg["steps"]), cfg["ramp_steps"], (mean, std), cfg["seed_offset"]
    )
    loader = torch.utils.data.DataLoader(
        batches, batch_size=None, num_workers=cfg["workers"], pin_memory=device.type == "cuda"
    )
    model.train()
    session_start, last = time.time(), time.time()
    step = start
    bar = tqdm(loader, total=cfg["steps"] - start, desc=f"ocr {cfg['name']}", unit="step")
    for step, batch in enumerate(bar, start=start + 1):
        batch = to_device(batch, device)
        loss_name, frames_name = line_loss(model, aux, batch, "name", cfg)
        loss_footer, frames_footer = line_loss(model, aux, batch, "footer", cfg)
        opt.zero_grad(set_to_none=True)
        (loss_name + loss_footer + frames_name + frames_footer).backward()
        torch.nn.utils.clip_grad_norm_(params, cfg["grad_clip"])
        opt.step()
        sched.step()
        now = time.time()
        trained_s += now - last
        last = now
        bar.set_postfix(name=f"{loss_name.item():.3f}", footer=f"{loss_footer.item():.3f}")
        row: dict[str, Any] = {}
        if step % cfg["log_every"] == 0:
            row = {"loss_name": loss_name.item(), "loss_footer": loss_footer.item()}
            row |= {"frames_name": frames_name.item(), "frames_footer": frames_footer.item()}
            row |= {"lr": sched.get_last_lr()[0], "trained_s": round(trained_s, 1)}
        if step % cfg["val_every"] == 0 or step == cfg["steps"]:
            row |= validate(model, val, cfg["vocab"])
            bar.write(f"step {step}: {json.dumps({k: round(v, 4) for k, v in row.items()})}")
        if row:
            run.log({"step": step, **row})
        if step % cfg["checkpoint_every"] == 0:
            save(step)
            run.plot(CURVES, dpi=80)
        if (now - session_start) / 60 > cfg["max_minutes"]:
            bar.write(f"stopping at step {step}: {cfg['max_minutes']} min budget spent (resume to go on)")
            break
    save(step)
    run.plot(CURVES, dpi=80)
    final = validate(model, val, cfg["vocab"])
    first_seed = cfg["seed_offset"] * cfg["batch"]
    summary = {
        "steps": step,
        "trained_s": round(trained_s, 1),
        "final_validation": final,
        "data": {
            "faces": str(faces),
            "train_cards": len(sampler.ids),
            "held_out_cards": len(val_sampler.ids),
            "held_out_rule": "sha1(card id) % 10 == 0",
            "samples_seen": step * cfg["batch"],
            "train_seeds": f"[{first_seed}, {(step + cfg['seed_offset']) * cfg['batch']})",
            "synthetic_fraction": cfg["data"]["p_synthetic"],
            "coded_fraction_boost": cfg["data"].get("p_coded", 0.0),
            "init": cfg["init"],
        },
    }
    (run.directory / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if not args.no_export:
        print(f"exported {export(cfg, model, run.directory, summary)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
