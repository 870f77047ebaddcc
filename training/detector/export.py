"""Ship a trained detector: `python -m training.detector.export --run runs/detector/<name> [--eval JSON]`.

Writes models/weights/detector.pt (fp16 weights + the inference config, which is all `CardDetector` needs),
its ONNX export models/weights/detector.onnx (`training.detector.export_onnx`), and
models/weights/detector.json, the manifest: training data, resolved config, benchmark metrics, git SHA,
parameter count and file size. Without `--eval`, runs the benchmark (`evaluate.py`) on the exported file.
Inference knobs (e.g. `--set refine_passes=2`) are tuned on validation seeds, never on benchmark seeds.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import torch

from models.checkpoints import fp16_state
from models.detector import WEIGHTS, DetectorConfig
from models.detector_net import build_net
from training.detector import export_onnx
from training.detector.data import face_paths
from training.detector.evaluate import KIND_OFFSETS, settings
from training.detector.evaluate import main as evaluate_main
from training.detector.train import REPO
from training.runconfig import git_sha
from training.synth import BENCH_SEED_BASE, TRAIN_SEED_LIMIT, VAL_SEED_BASE


def export(run: Path, out: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    """fp16 state dict + inference config; returns facts for the manifest."""
    state = torch.load(run / "last.pt", map_location="cpu", weights_only=False)
    cfg = state["config"]
    model_cfg = DetectorConfig.from_dict({**cfg["model"], **overrides})
    net = build_net(model_cfg)
    net.load_state_dict(state["net"])
    half = fp16_state(net)
    cfg_dict = {k: (list(v) if isinstance(v, tuple) else v) for k, v in model_cfg.__dict__.items()}
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"config": cfg_dict, "state_dict": half}, out)
    return {
        "config": cfg,
        "inference": cfg_dict,
        "steps": state["step"],
        "train_minutes": round(state["elapsed"] / 60, 1),
        "photos_seen": state["step"] * cfg["data"]["photos_per_batch"],
        "parameters": sum(p.numel() for p in net.parameters()),
        "bytes": out.stat().st_size,
    }


def training_facts(run: Path, facts: dict[str, Any]) -> dict[str, Any]:
    """Steps, minutes and torch threads of this run, plus the run it was initialised from (`--init`)."""
    out: dict[str, Any] = {"steps": facts["steps"], "minutes": facts["train_minutes"]}
    metrics_path = run / "metrics.jsonl"
    lines = [json.loads(x) for x in metrics_path.read_text().splitlines()] if metrics_path.exists() else []
    threads = sorted({m["threads"] for m in lines if "threads" in m})
    out["threads"] = threads if len(threads) > 1 else (threads[0] if threads else 1)
    init = run / "init.txt"
    if init.exists():
        out["initialised_from"] = init.read_text().strip()
        found = re.search(r"\(step (\d+), ([\d.]+) min\)", out["initialised_from"])
        if found:
            out["total_steps"] = facts["steps"] + int(found[1])
            out["total_minutes"] = round(facts["train_minutes"] + float(found[2]), 1)
    return out


def judged_figures(report: dict[str, Any], weights: Path) -> dict[str, Any]:
    """The figures `benchmarks/detector_makers.py` measured for `weights` (its report is keyed by the
    path of each weights file it loaded; matched here after resolving both), with how to measure again."""
    for name, by_maker in report["results"].items():
        if Path(name).resolve() == weights.resolve():
            return {
                "command": "benchmarks/detector_makers.py (scan_accuracy.py's photos of both makers)",
                "counts": report["counts"],
                "good_means_corners_within_pct": report["miss_pct"],
                **by_maker,
            }
    raise SystemExit(f"{weights} is not among the judged weights: {sorted(report['results'])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=WEIGHTS)
    parser.add_argument("--eval", type=Path, default=None, help="an evaluate.py JSON for these weights")
    parser.add_argument(
        "--count", type=int, default=300, help="benchmark photos per kind when --eval is absent"
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="inference config")
    parser.add_argument(
        "--judged",
        type=Path,
        default=None,
        help="benchmarks/detector_makers.py's JSON for these weights: the held-out maker's figures, for"
        " the manifest (judged there, never chosen on; training/ never imports that maker)",
    )
    args = parser.parse_args(argv)
    overrides = settings(args.set)
    facts = export(args.run, args.out, overrides)
    report_path = args.eval or args.run / "benchmark.json"
    if args.eval is None:
        kinds = ",".join(KIND_OFFSETS)  # #13's hard photos and scenes, and the buckets before them
        args_eval = ["--weights", str(args.out), "--count", str(args.count), "--kinds", kinds]
        evaluate_main([*args_eval, "--out", str(report_path)])
    weights = str(args.out.relative_to(REPO)) if args.out.is_relative_to(REPO) else str(args.out)
    # The evaluation names the file it loaded (an absolute path here): the manifest names it as above.
    metrics = {**json.loads(report_path.read_text()), "weights": weights}
    manifest_path = Path(facts["config"]["data"]["manifest"]).expanduser()
    manifest = {
        "model": "card detector: U-Net mask + top/bottom bands, two passes (models/detector.py)",
        "weights": weights,
        "bytes": facts["bytes"],
        "parameters": facts["parameters"],
        "git_sha": git_sha(),
        "data": {
            "faces": "catalog renders (../shared/tools/cardrender.py) in "
            + str(facts["config"]["data"]["manifest"]),
            "train_faces": len(face_paths(manifest_path)) if manifest_path.exists() else None,
            "held_out_faces": "base1-* and crc32(card id) % 10 == 0",
            "photos": f"training.synth, seeds 0..{TRAIN_SEED_LIMIT - 1} (validation {VAL_SEED_BASE}+)",
            "benchmark_seeds": f">= {BENCH_SEED_BASE}",
            "photos_seen": facts["photos_seen"],
        },
        "training": training_facts(args.run, facts),
        "config": facts["config"],
        "inference": facts["inference"],
        "metrics": metrics,
    }
    if args.judged is not None:
        manifest["metrics_both_makers"] = judged_figures(json.loads(args.judged.read_text()), args.out)
    json_path = args.out.with_suffix(".json")
    json_path.write_text(json.dumps(manifest, indent=2) + "\n")
    exported = export_onnx.export(args.out)  # a replica running ONNX Runtime refuses a stale export
    size = f"{facts['bytes'] / 1e6:.2f} MB, {facts['parameters']:,} parameters"
    print(f"wrote {args.out} ({size}), {json_path} and {exported}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
