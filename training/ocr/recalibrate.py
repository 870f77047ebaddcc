"""Re-estimate the print reader's BatchNorm statistics: `python -m training.ocr.recalibrate [--weights W]`.

Training sends a name batch and then a footer batch through one backbone, so BatchNorm's running averages
(momentum 0.1) lean towards whichever line type came last, and the eval-mode statistics swing from step
to step: on the GPU box the in-training name accuracy moved between 28% and 65% across checkpoints of one
run while its loss fell smoothly. This pass replaces those statistics with the plain average over
`--batches` name and footer batches of training samples (no weight changes), reports the validation
before and after, and writes the weights back with a note in their manifest. `--config` averages over a
training config's data mix (e.g. training/ocr/cpu-hard.yaml's phone photos) instead of the defaults'.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import cv2
import torch

from models.checkpoints import fp16_state, load_weights, read_weights
from models.ocr import WEIGHTS
from models.ocr_net import Recognizer, build_model
from training.ocr.data import VOCAB, LineBatches, LineSampler, collate
from training.ocr.train import DEFAULTS, VAL_SEED_BASE, line_samplers, validate
from training.renders import DEFAULT_CACHE, SHARED
from training.runconfig import resolve_config

SEED_OFFSET = 120_000  # in 64-sample steps: seeds 7,680,000+, past every training run so far


def recalibrate(model: Recognizer, sampler: LineSampler, batches: int, workers: int) -> None:
    """Cumulative (equal-weight) BatchNorm averages over name and footer batches, in train mode."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for module in norms:
        module.reset_running_stats()
        module.momentum = None
    data = LineBatches(sampler, 64, range(batches), 1, (model.cfg["mean"], model.cfg["std"]), SEED_OFFSET)
    loader = torch.utils.data.DataLoader(data, batch_size=None, num_workers=workers)
    model.train()
    with torch.no_grad():
        for batch in loader:
            model.feat_extractor(batch["name"])
            model.feat_extractor(batch["footer"])
    model.eval()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", type=Path, default=WEIGHTS)
    parser.add_argument("--out", type=Path, help="where to write (default: over --weights)")
    parser.add_argument("--batches", type=int, default=48)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--faces", type=Path, default=DEFAULT_CACHE / "catalog")
    parser.add_argument("--catalog", type=Path, default=SHARED / "catalog")
    parser.add_argument("--config", type=Path, help="a training config whose `data` mix to average over")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    cv2.setNumThreads(0)  # OpenCV's thread pool does not survive the fork into the data workers
    blob = read_weights(args.weights)
    vocab = blob.get("vocab", VOCAB)
    model = build_model(blob.get("arch", DEFAULTS["arch"]), vocab, **blob.get("model_kwargs", {}))
    load_weights(model, blob)

    data = DEFAULTS["data"] | {"p_coded": 0.4}
    if args.config:
        data = resolve_config(DEFAULTS, args.config, [])["data"]
    sampler, val_sampler = line_samplers(args.faces, args.catalog, data)
    norm = (model.cfg["mean"], model.cfg["std"])
    val = collate([val_sampler(VAL_SEED_BASE + i) for i in range(256)], norm)
    before = validate(model.eval(), val, vocab)
    recalibrate(model, sampler, args.batches, args.workers)
    after = validate(model, val, vocab)
    print(json.dumps({"before": before, "after": after}, indent=1))

    out = args.out or args.weights
    torch.save({**blob, "state_dict": fp16_state(model)}, out)
    manifest_path = args.weights.with_suffix(".json")
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        manifest["file"], manifest["size_bytes"] = out.name, out.stat().st_size
        manifest["bn_recalibration"] = {
            "data": data,
            "batches": args.batches,
            "samples": args.batches * 64 * 2,
            "seeds": f"{SEED_OFFSET * 64:,}+",
            "val_before": before,
            "val_after": after,
        }
        out.with_suffix(".json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
