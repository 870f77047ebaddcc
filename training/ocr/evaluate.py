"""Evaluate the print reader end to end on held-out cards: `python -m training.ocr.evaluate --count 500`.

Each held-out card (never trained on: `is_eval_card`) is read twice through `PrintReader.read_batch`: the
clean rendered face, and a degraded one (misaligned by up to 2%, then colour cast, glare, blur, lost
resolution, noise and JPEG), with augment seeds from `--seed-base` (>= 10,000,000; training stays below
9,000,000). Reports exact-match accuracy for name, number and set code, their character error rates, how
often a field was left unread versus read wrong (worse: the matcher trusts a read), and ms per face.

`--photos standard,hard,hard-v1` adds the scanner's rectified view of `training.synth` phone photos of
the same cards (12 MP, each corner off by up to 1% of the card's height, about what the detector
leaves). For every face whose artwork is printed on more than one card, it also scores the footer lines
of all those reprints, as fusion does (`serve_app.fusion.footer_posterior`): how often the true line is
likeliest, and how often the footer alone would answer (posterior >= `Thresholds.footer_accept`, legible
per `Thresholds.footer_floor`) right and wrong.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

from models.geometry import read_face
from models.ocr import SURE_LINE, WEIGHTS, PrintRead, PrintReader
from serve_app.fusion import CardPrint, Thresholds, footer_odds, footer_posterior
from training.ocr.data import (
    EVAL_SEED_BASE,
    CardText,
    catalog_texts,
    degrade,
    is_eval_card,
    misalign_face,
)
from training.renders import DEFAULT_CACHE, SHARED, read_manifest
from training.synth import DIFFICULTIES, Difficulty, photo_view

REPO = Path(__file__).resolve().parents[2]
_TOTAL = re.compile(r"^(.*?)(?:/(\d+))?$")
# Of the card's height, per corner coordinate: a mean error of ~0.35%, as the detector leaves (0.2-0.6%).
PHOTO_CORNER_ERROR = 0.01
# Each photo kind's seeds start this far past `--seed-base`, so kinds never share a photo's draws.
KIND_OFFSETS = {"standard": 100_000, "hard": 200_000, "hard-v1": 300_000}


def truth(card: CardText) -> dict[str, str | None]:
    """What the reader should return for a card."""
    m = _TOTAL.match(card.number)
    head, total = (m.group(1), m.group(2)) if m else (card.number, None)
    return {"name": card.name, "number": head, "printed_total": total, "set_code": card.set_code}


def score(reads: list[PrintRead], cards: list[CardText]) -> dict[str, Any]:
    """Exact match, CER, unread and wrong rates per field (a symbol card's right code is None)."""
    out: dict[str, Any] = {"faces": len(cards)}
    for field in ("name", "number", "set_code"):
        exact = errors = chars = unread = wrong = 0
        for read, card in zip(reads, cards, strict=True):
            want = truth(card)[field]
            got = getattr(read, field)
            if field == "number":  # the whole printed number: both sides of the slash
                want = card.number
                got = (
                    None
                    if read.number is None
                    else read.number + (f"/{read.printed_total}" if read.printed_total else "")
                )
            exact += got == want
            errors += Levenshtein.distance(got or "", want or "")
            chars += len(want or "")
            unread += got is None and want is not None
            wrong += got is not None and got != want
        n = max(1, len(cards))
        out[field] = {
            "exact": exact / n,
            "cer": errors / max(1, chars),
            "unread": unread / n,
            "wrong": wrong / n,
        }
    coded = [(r, c) for r, c in zip(reads, cards, strict=True) if c.set_code]
    out["set_code"]["exact_on_coded_cards"] = float(
        np.mean([r.set_code == c.set_code for r, c in coded] or [False])
    )
    out["name"]["fuzzy90"] = float(
        np.mean(
            [fuzz.ratio(r.name or "", c.name) >= 90 for r, c in zip(reads, cards, strict=True)] or [False]
        )
    )
    return out


def footer_choice(
    reads: list[PrintRead], cards: list[CardText], groups: list[list[CardPrint]]
) -> dict[str, Any]:
    """Telling reprints apart by their footers as fusion does (`groups`: each card's artwork's reprints, its
    own included), over the faces whose artwork has more than one distinct footer line: the share where the
    true line is alone the likeliest, and where the footer alone would answer (`footer_odds`, legible and
    holding `footer_accept`) the right card and a wrong one."""
    t = Thresholds()
    n = likeliest = sure_right = sure_wrong = 0
    for read, card, group in zip(reads, cards, groups, strict=True):
        if len({reprint.footer for reprint in group}) < 2:
            continue
        n += 1
        posterior = footer_posterior(group, read.footer_scores)
        if not posterior:
            continue
        best = max(posterior.values())
        tops = [reprint for reprint in group if posterior[reprint.id] == best]
        likeliest += len(tops) == 1 and tops[0].footer == card.footer_line
        odds = footer_odds(group, read.footer_scores, t)
        if odds is not None and odds.sure and odds.posterior[odds.likeliest] >= t.footer_accept:
            right = next(r.footer for r in group if r.id == odds.likeliest) == card.footer_line
            sure_right += right
            sure_wrong += not right
    k = max(1, n)
    return {
        "faces": n,
        "likeliest_right": likeliest / k,
        "sure_right": sure_right / k,
        "sure_wrong": sure_wrong / k,
    }


def run(
    reader: PrintReader, faces: list[np.ndarray], batch: int, footers: list[list[str]] | None = None
) -> tuple[list[PrintRead], float]:
    """Reads and wall-clock ms per face (after one warm-up batch); `footers`: lines to score per face."""
    reader.read_batch(faces[:batch])
    start = time.perf_counter()
    reads: list[PrintRead] = []
    for i in range(0, len(faces), batch):
        reads += reader.read_batch(faces[i : i + batch], footers[i : i + batch] if footers else None)
    return reads, 1000 * (time.perf_counter() - start) / max(1, len(faces))


def photo_faces(kind: Difficulty, faces: list[np.ndarray], seed_base: int) -> list[np.ndarray]:
    """The scanner's rectified views of `kind` phone photos of these faces."""
    seed = seed_base + KIND_OFFSETS[kind]
    return [photo_view(face, seed + k, kind, 1.0, PHOTO_CORNER_ERROR) for k, face in enumerate(faces)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--seed-base", type=int, default=EVAL_SEED_BASE)
    parser.add_argument("--weights", type=Path, default=WEIGHTS)
    parser.add_argument("--catalog", type=Path, default=SHARED / "catalog")
    parser.add_argument("--faces", type=Path, default=DEFAULT_CACHE / "catalog")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--sure-line", type=float, default=SURE_LINE, help="read outer offsets below this (above 1: always)"
    )
    parser.add_argument("--out", type=Path, help="JSON report (default: runs/ocr/eval-<seed base>.json)")
    parser.add_argument(
        "--photos", default="", help=f"comma-separated photo kinds to add: {','.join(DIFFICULTIES)}"
    )
    args = parser.parse_args(argv)
    kinds = [cast(Difficulty, k) for k in args.photos.split(",") if k]
    if unknown := set(kinds) - set(DIFFICULTIES):
        parser.error(f"unknown photo kinds: {sorted(unknown)}")
    if args.seed_base < EVAL_SEED_BASE:
        parser.error(f"evaluation seeds start at {EVAL_SEED_BASE:,}: lower ones are training's")
    torch.set_num_threads(args.threads)
    texts = catalog_texts(args.catalog)
    rendered = read_manifest(args.faces / "manifest.jsonl")
    held_out = sorted(i for i in rendered if i in texts and is_eval_card(i))
    rng = np.random.default_rng(args.seed_base)
    picked = sorted(rng.choice(held_out, size=min(args.count, len(held_out)), replace=False).tolist())
    cards = [texts[i] for i in picked]
    clean = [read_face(args.faces / i / "high.jpg") for i in picked]
    degraded = []
    for k, face in enumerate(clean):
        face_rng = np.random.default_rng(args.seed_base + k)
        degraded.append(degrade(misalign_face(face, face_rng), face_rng, glare_peak=0.8))
    views = {"clean": clean, "degraded": degraded}
    views |= {kind: photo_faces(kind, clean, args.seed_base) for kind in kinds}
    by_artwork: dict[str, list[CardPrint]] = {}
    for card_id, row in rendered.items():
        if card_id in texts:
            text = texts[card_id]
            reprint = CardPrint(card_id, text.name, text.number, text.set_code, None, row["artwork_key"])
            by_artwork.setdefault(reprint.artwork, []).append(reprint)
    groups = [by_artwork[rendered[i]["artwork_key"]] for i in picked]
    footers = [[reprint.footer for reprint in group] for group in groups]
    reader = PrintReader(weights=args.weights, device=args.device, sure_line=args.sure_line)
    report: dict[str, Any] = {
        "weights": str(args.weights),
        "sure_line": args.sure_line,
        "count": len(cards),
        "seed_base": args.seed_base,
        "threads": args.threads,
        "device": args.device,
        "photos": kinds,
    }
    for label, faces in views.items():
        reads, ms = run(reader, faces, args.batch, footers)
        report[label] = {**score(reads, cards), "ms_per_face": round(ms, 1)}
        report[label]["reprint_footer"] = footer_choice(reads, cards, groups)
        report[label]["examples_wrong"] = [
            {"id": c.card_id, "want": truth(c), "got": {k: getattr(r, k) for k in truth(c)}}
            for r, c in zip(reads, cards, strict=True)
            if r.number != truth(c)["number"] or r.set_code != c.set_code or r.name != c.name
        ][:15]
    out = args.out or REPO / "runs" / "ocr" / f"eval-{args.seed_base}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    manifest = args.weights.with_suffix(".json")
    if manifest.exists() and args.count >= 500:  # the shipped weights carry their full-size numbers
        info = json.loads(manifest.read_text())
        info["size_bytes"] = args.weights.stat().st_size
        info["evaluation"] = {k: v for k, v in report.items() if k != "weights"}
        for label in views:
            info["evaluation"][label] = {k: v for k, v in report[label].items() if k != "examples_wrong"}
        manifest.write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n")
    print(table(report))
    print(f"wrote {out}")
    return 0


def table(report: dict[str, Any]) -> str:
    """The report as a small Markdown table."""
    labels = ["clean", "degraded", *report.get("photos", [])]
    lines = ["| faces | field | exact | CER | unread | wrong |", "|---|---|---|---|---|---|"]
    for label in labels:
        for field in ("name", "number", "set_code"):
            r = report[label][field]
            cells = " | ".join(f"{r[k]:.3f}" for k in ("exact", "cer", "unread", "wrong"))
            lines.append(f"| {label} | {field} | {cells} |")
    head = "| faces | reprint faces | footer likeliest right | footer alone right | footer alone wrong |"
    lines += ["", head, "|---" * 5 + "|"]
    for label in labels:
        r = report[label]["reprint_footer"]
        cells = " | ".join(f"{r[k]:.3f}" for k in ("likeliest_right", "sure_right", "sure_wrong"))
        lines.append(f"| {label} | {r['faces']} | {cells} |")
    lines.append("ms/face: " + ", ".join(f"{label} {report[label]['ms_per_face']}" for label in labels))
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
