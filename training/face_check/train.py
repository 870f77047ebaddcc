"""Train the face check (`models.face_check`), choose its bound on validation cuts, export it for OpenCV.

    python -m training.face_check.train --out models/weights/face_check.onnx

Cuts (`training.face_check.data`) are built once in worker processes and kept under `--data` (a rerun with
the same sizes trains on them again). Training cuts come from training seeds, validation cuts from the
kept validation seeds (990,000+, never trained on). A first bound is chosen on validation cuts only: the
highest score under which at most `--refuse` of every card kind's faces fall (pooled over the kinds,
and never more than twice that in one kind), so that refusing a find costs a card almost never; what
it then refuses of the backs and empty holders is reported. The bound that ships is chosen through the
whole pipeline on validation photos (`benchmarks/fusion_sweep.py --face-check --grid check`, with the close
bound it lets down) and given with `--bound`; the manifest keeps both. Writes the ONNX graph (checked
against torch through OpenCV's DNN module, what serving runs) and its manifest beside it.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
from torch import nn

from models.checkpoints import weights_version
from models.face_check import INPUT_SIZE, MEAN, STD, FaceCheck
from training.detector.data import face_paths
from training.face_check.data import CARD_KINDS, chunks, cut_chunk
from training.runconfig import git_sha
from training.synth import TRAIN_SEED_LIMIT, VAL_SEED_BASE

DEFAULT_MANIFEST = Path("~/.cache/cardcat/renders/catalog/manifest.jsonl")
TRAIN_SEEDS = 500_000  # training seeds of their own (< TRAIN_SEED_LIMIT); every kind 10,000 apart
VAL_SEEDS = VAL_SEED_BASE  # the kept validation seeds: 990,000 .. 999,999 (kinds 1,000 apart)


class FaceCheckNet(nn.Module):
    """Four strided 3x3 stages (16-32-64-96 channels) and a global average: ~80k parameters, ~10 MFLOPs a
    cut, so a Detector replica pays well under a millisecond for it."""

    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = 3
        for out in (16, 32, 64, 96):
            layers += [nn.Conv2d(width, out, 3, 2, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU(inplace=True)]
            layers += [nn.Conv2d(out, out, 3, 1, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU(inplace=True)]
            width = out
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, 3, H, W) normalised cuts -> (N, 1) logits of 'a face'."""
        return self.head(torch.flatten(self.pool(self.features(x)), 1))


def build_set(
    faces: list[Path], seed_base: int, per_kind: int, empty: int, workers: int, spacing: int
) -> dict[str, np.ndarray]:
    """Cuts, labels and each cut's kind index (`CARD_KINDS`, then len(CARD_KINDS) for empty scenes)."""
    pieces = chunks(seed_base, per_kind, empty, spacing=spacing)
    kinds = (*CARD_KINDS, "empty")
    # Spawned, not forked: a process that has run torch (a test worker, a notebook) deadlocks a forked
    # child in its thread pool's first call.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        made = list(pool.map(partial(_cut_piece, faces), pieces))
    cuts = np.concatenate([c for c, _ in made])
    labels = np.concatenate([lab for _, lab in made])
    kind = np.concatenate(
        [np.full(len(lab), kinds.index(k), np.uint8) for (k, _), (_, lab) in zip(pieces, made, strict=True)]
    )
    return {"cuts": cuts, "labels": labels, "kinds": kind}


def _cut_piece(faces: list[Path], piece: tuple[str, range]) -> tuple[np.ndarray, np.ndarray]:
    return cut_chunk(faces, *piece)


def cached_set(path: Path, make: Any) -> dict[str, np.ndarray]:
    """The cut set kept at `path`, built by `make()` the first time."""
    if path.exists():
        with np.load(path) as kept:
            return {k: kept[k] for k in kept.files}
    started = time.perf_counter()
    made = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **made)
    print(f"built {path} ({len(made['labels'])} cuts) in {time.perf_counter() - started:.0f} s", flush=True)
    return made


def normalise(cuts: torch.Tensor) -> torch.Tensor:
    """uint8 (N, H, W, 3) -> the network's float (N, 3, H, W), as `models.face_check` feeds OpenCV."""
    return (cuts.permute(0, 3, 1, 2).float() / 255.0 - MEAN) / STD


def augment(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Light changes the cuts do not already span: exposure and contrast per cut, a mirror half the time
    (a mirrored face is no less a face, a mirrored back no more one)."""
    n = x.shape[0]
    gain = torch.empty(n, 1, 1, 1).uniform_(0.75, 1.25, generator=gen)
    shift = torch.empty(n, 1, 1, 1).uniform_(-0.4, 0.4, generator=gen)
    x = x * gain + shift
    flip = torch.rand(n, generator=gen) < 0.5
    x[flip] = x[flip].flip(3)
    return x


def train(
    data: dict[str, np.ndarray], epochs: int, batch: int, seed: int
) -> tuple[FaceCheckNet, list[float]]:
    """AdamW on a one-cycle schedule, the two classes weighted to count alike; returns the net and each
    epoch's mean loss."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    net = FaceCheckNet()
    cuts = torch.from_numpy(data["cuts"])
    labels = torch.from_numpy(data["labels"].astype(np.float32))
    positive = float(labels.mean())
    weights = torch.where(labels > 0.5, 0.5 / positive, 0.5 / (1 - positive))
    steps = epochs * ((len(labels) + batch - 1) // batch)
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.15)
    losses = []
    net.train()
    for _ in range(epochs):
        order = torch.randperm(len(labels), generator=gen)
        total = 0.0
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            logits = net(augment(normalise(cuts[idx]), gen)).squeeze(1)
            loss = nn.functional.binary_cross_entropy_with_logits(logits, labels[idx], weight=weights[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
        losses.append(round(total / len(order), 4))
        print(f"epoch {len(losses)}: loss {losses[-1]}", flush=True)
    return net.eval(), losses


def scores(net: nn.Module, cuts: np.ndarray) -> np.ndarray:
    """P(face) per cut, in torch."""
    with torch.inference_mode():
        parts = [net(normalise(torch.from_numpy(cuts[s : s + 512]))) for s in range(0, len(cuts), 512)]
    return torch.sigmoid(torch.cat(parts).squeeze(1)).numpy()


def choose_bound(face_scores: dict[str, np.ndarray], refuse: float) -> float:
    """The highest bound refusing at most `refuse` of all faces and at most twice that of any one kind."""
    pooled = np.concatenate(list(face_scores.values()))
    candidates = np.unique(np.concatenate([pooled, [0.0]]))
    best = 0.0
    for bound in candidates:
        if (pooled < bound).mean() > refuse:
            break
        if all((s < bound).mean() <= 2 * refuse for s in face_scores.values()):
            best = float(bound)
    return math.floor(best * 1e4) / 1e4  # rounded down: a face scoring the bound itself still passes


def report(net: nn.Module, val: dict[str, np.ndarray], bound: float) -> dict[str, Any]:
    """Per kind: cuts, and the share the bound refuses (of faces: cards lost; of empty scenes: finds
    rightly refused)."""
    s = scores(net, val["cuts"])
    out: dict[str, Any] = {}
    for k, kind in enumerate((*CARD_KINDS, "empty")):
        these = s[val["kinds"] == k]
        refused = round(float((these < bound).mean()), 4) if len(these) else None
        out[kind] = {"cuts": len(these), "refused": refused}
    return out


def export(net: FaceCheckNet, out: Path, check: np.ndarray) -> None:
    """The network as ONNX (opset 13, a dynamic batch: what OpenCV's DNN module reads), written only when
    OpenCV's answer on `check` cuts matches torch's."""
    tmp = out.with_suffix(".onnx.tmp")
    example = normalise(torch.from_numpy(check))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch nudges towards its dynamo exporter; OpenCV reads this one
        torch.onnx.export(
            net.eval(), (example,), str(tmp), input_names=["cuts"], output_names=["logits"],
            dynamic_axes={"cuts": {0: "batch"}, "logits": {0: "batch"}}, opset_version=13, dynamo=False,
        )  # fmt: skip
    with torch.inference_mode():
        expected = net(example).numpy()
    cv_net = cv2.dnn.readNetFromONNX(str(tmp))
    cv_net.setInput(example.numpy())
    error = float(np.abs(cv_net.forward().reshape(-1) - expected.reshape(-1)).max())
    if error > 1e-3:
        tmp.unlink()
        raise ValueError(f"OpenCV's answer differs from torch's by {error:.2e}")
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--out", type=Path, default=Path("models/weights/face_check.onnx"))
    parser.add_argument(
        "--data", type=Path, default=Path("runs/face_check"), help="where the cut sets are kept"
    )
    parser.add_argument("--per-kind", type=int, default=600, help="training photos of each card kind")
    parser.add_argument("--empty", type=int, default=1500, help="training empty scenes")
    parser.add_argument("--val-per-kind", type=int, default=200)
    parser.add_argument("--val-empty", type=int, default=400)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--refuse", type=float, default=0.005, help="the share of validation faces the bound may refuse"
    )
    parser.add_argument(
        "--bound",
        type=float,
        default=None,
        help="the bound to ship when chosen through the whole pipeline on validation photos"
        " (`benchmarks/fusion_sweep.py --face-check --grid check`); default: the cuts' rule (--refuse)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if TRAIN_SEEDS + 7 * 10_000 > TRAIN_SEED_LIMIT or args.val_per_kind > 1_000 or args.val_empty > 1_000:
        parser.error("seed ranges would overlap")
    torch.set_num_threads(args.threads)
    manifest = args.manifest.expanduser()
    started = time.perf_counter()
    train_faces, val_faces = face_paths(manifest), face_paths(manifest, holdout=True)
    train_set = cached_set(
        args.data / f"train-{args.per_kind}-{args.empty}.npz",
        lambda: build_set(train_faces, TRAIN_SEEDS, args.per_kind, args.empty, args.workers, 10_000),
    )
    val_set = cached_set(
        args.data / f"val-{args.val_per_kind}-{args.val_empty}.npz",
        lambda: build_set(val_faces, VAL_SEEDS, args.val_per_kind, args.val_empty, args.workers, 1_000),
    )
    built_s = time.perf_counter() - started
    started = time.perf_counter()
    net, losses = train(train_set, args.epochs, args.batch, args.seed)
    trained_s = time.perf_counter() - started
    val_scores = scores(net, val_set["cuts"])
    faces = {kind: val_scores[val_set["kinds"] == k] for k, kind in enumerate(CARD_KINDS)}
    by_cuts = choose_bound(faces, args.refuse)
    bound = by_cuts if args.bound is None else args.bound
    figures = report(net, val_set, bound)
    print(json.dumps({"bound": bound, "bound_by_cuts": by_cuts, "validation": figures}, indent=1), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    export(net, args.out, val_set["cuts"][:16])
    manifest_out = {
        "model": "the face check (#43): is a found card-shaped quad a card's face, or a back or an empty "
        "holder? (models/face_check.py); off by default (CARDCAT_SCAN_FACE_CHECK)",
        "weights": str(args.out),
        "version": weights_version(args.out),
        "bytes": args.out.stat().st_size,
        "parameters": sum(p.numel() for p in net.parameters()),
        "input_size": list(INPUT_SIZE),
        "bound": bound,
        "bound_by_cuts": by_cuts,
        "bound_chosen": "by the cuts' rule (bound_rule)"
        if args.bound is None
        else "through the whole pipeline on validation photos (benchmarks/fusion_sweep.py --face-check --grid"
        " check), given with --bound",
        "git_sha": git_sha(),
        "data": {
            "train": {
                "seeds": f"{TRAIN_SEEDS}+ (kinds 10,000 apart)",
                "per_kind": args.per_kind,
                "empty": args.empty,
                "cuts": len(train_set["labels"]),
                "faces": int(train_set["labels"].sum()),
            },
            "validation": {
                "seeds": f"{VAL_SEEDS}+ (kinds 1,000 apart), held-out cards",
                "per_kind": args.val_per_kind,
                "empty": args.val_empty,
                "cuts": len(val_set["labels"]),
            },
            "kinds": list(CARD_KINDS),
        },
        "training": {
            "epochs": args.epochs,
            "batch": args.batch,
            "losses": losses,
            "build_s": round(built_s),
            "train_s": round(trained_s),
            "threads": args.threads,
        },
        "bound_rule": f"the highest refusing <= {args.refuse:.2%} of validation faces"
        f" (<= {2 * args.refuse:.2%} of a kind)",
        "validation": figures,
    }
    args.out.with_suffix(".json").write_text(json.dumps(manifest_out, indent=2) + "\n")
    FaceCheck(args.out).warm()  # what serving loads, loaded once: a broken file fails here, not in a replica
    print(f"wrote {args.out} and its manifest", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
