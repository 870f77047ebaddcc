"""Retrieval accuracy of an embedder: `python -m training.embedder.evaluate --cards 2000 --queries 1000`.

Indexes N catalog faces (high.jpg, as the service does; `--cards 0` = the whole catalog), then searches
with synthetic rectified photos of held-out cards made with evaluation seeds (>= 10_000_000, never used
in training): degraded faces (`--photos degrade`, the default), or the scanner's view of whole phone
photos from `training.synth` (`--photos standard|hard|hard-v1|harsh|held|foil`: rectified from the true
corners moved by up to 2% of the card's height, what the detector leaves). Reports top-1/top-5 at the
artwork level (what the embedding is for; OCR splits reprints) and at the card level, with and without
the 180-degree search the caller does, the similarity of the right artwork vs the best wrong one (for an
acceptance threshold), and ms per face.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, cast

import cv2
import numpy as np
import torch

from models.embedder import CardEmbedder
from models.geometry import half_turn, read_face
from models.index import CardIndex
from training.embedder.data import (
    EVAL_SEED_BASE,
    Card,
    PhotoMix,
    degrade,
    load_cards,
    split_cards,
)
from training.synth import DIFFICULTIES, FOIL_SALT, Difficulty, held_look, holofoil, photo_view

# `held` and `foil` as the detector's evaluation draws them (#43): harsh photos of a card in a toploader or a
# binder pocket, alternately; standard photos of a card printed on foil.
PHOTO_KINDS = ("degrade", *DIFFICULTIES, "held", "foil")

PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)


def pick(
    cards: list[Card], n_cards: int, n_queries: int, pool: str, seed: int
) -> tuple[list[Card], list[Card]]:
    """(indexed cards, query cards): queries come from the pool, the index is them plus random others."""
    rng = np.random.default_rng(seed)
    train, held = split_cards(cards)
    source = {"held_out": held, "train": train, "all": cards}[pool]
    queries = [source[i] for i in rng.permutation(len(source))[:n_queries]]
    if n_cards <= 0 or n_cards >= len(cards):
        return cards, queries
    chosen = {c.id for c in queries}
    others = [c for c in (cards[i] for i in rng.permutation(len(cards))) if c.id not in chosen]
    return queries + others[: max(0, n_cards - len(queries))], queries


def _pcts(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    qs = np.percentile(np.array(values), PERCENTILES)
    return {f"p{p}": round(float(q), 4) for p, q in zip(PERCENTILES, qs, strict=True)} | {
        "mean": round(float(np.mean(values)), 4)
    }


def _top_and_margin(row: list[tuple[str, float]], art: dict[str, str]) -> tuple[str, float, float]:
    """(top-1 artwork, its cosine, its lead over the best other artwork) for one result row."""
    top_art, top_sim = art[row[0][0]], row[0][1]
    other = next((s for cid, s in row if art[cid] != top_art), row[-1][1])
    return top_art, top_sim, top_sim - other


def score(hits: list[list[tuple[str, float]]], queries: list[Card], art: dict[str, str]) -> dict[str, Any]:
    """Top-k accuracy at both levels, the right-vs-best-wrong similarity of every query, and what the
    search would have said had the card's artwork been missing from the index (the same row without it)."""
    top1_art = top5_art = top1_card = top5_card = 0
    right: list[float] = []
    wrong: list[float] = []
    top_ok: list[float] = []
    top_bad: list[float] = []
    decisions: list[tuple[float, float, bool]] = []
    unknown: list[tuple[float, float]] = []
    for query, row in zip(queries, hits, strict=True):
        arts = [art[cid] for cid, _ in row]
        top1_art += arts[0] == query.artwork_key
        top5_art += query.artwork_key in arts[:5]
        top1_card += row[0][0] == query.id
        top5_card += query.id in [cid for cid, _ in row[:5]]
        ok = [s for a, (_, s) in zip(arts, row, strict=True) if a == query.artwork_key]
        bad = [(cid, s) for a, (cid, s) in zip(arts, row, strict=True) if a != query.artwork_key]
        if ok:
            right.append(ok[0])
        if bad:
            wrong.append(bad[0][1])
            unknown.append(_top_and_margin(bad, art)[1:])
        top_art, top_sim, margin = _top_and_margin(row, art)
        (top_ok if top_art == query.artwork_key else top_bad).append(top_sim)
        decisions.append((top_sim, margin, top_art == query.artwork_key))
    n = len(queries)
    return {
        "artwork_top1": round(top1_art / n, 4),
        "artwork_top5": round(top5_art / n, 4),
        "card_top1": round(top1_card / n, 4),
        "card_top5": round(top5_card / n, 4),
        "sim_right_artwork": _pcts(right),
        "sim_best_wrong_artwork": _pcts(wrong),
        "top1_sim_when_right": _pcts(top_ok),
        "top1_sim_when_wrong": _pcts(top_bad),
        "margin_when_right": _pcts([m for _, m, ok in decisions if ok]),
        "margin_when_wrong": _pcts([m for _, m, ok in decisions if not ok]),
        "margin_if_artwork_missing": _pcts([m for _, m in unknown]),
        "_decisions": decisions,
        "_unknown": unknown,
    }


def _sweep(values: np.ndarray, rule: int, decisions: np.ndarray, unknown: np.ndarray) -> dict[str, Any]:
    """Accept when column `rule` (0: top-1 cosine, 1: margin) >= t, for each t in `values`."""
    table: list[dict[str, Any]] = []
    for t in values:
        accepted = decisions[decisions[:, rule] >= t]
        table.append(
            {
                "t": round(float(t), 3),
                "accept_rate": round(len(accepted) / len(decisions), 4),
                "precision": round(float(accepted[:, 2].mean()), 4) if len(accepted) else None,
                "unknown_card_accept": round(float((unknown[:, rule] >= t).mean()), 4),
            }
        )
    safe = [row for row in table if row["unknown_card_accept"] <= 0.01]
    return {"suggested": safe[0] if safe else None, "table": table}


def thresholds(result: dict[str, Any]) -> dict[str, Any]:
    """Two acceptance rules, swept: top-1 cosine >= t, and top-1 lead over the best other artwork >= t.
    Per t: share of photos accepted, share of accepted that are right, and share of photos of a card
    missing from the index that would be accepted anyway (the row with the right artwork taken out)."""
    decisions = np.array(result["_decisions"], np.float64)
    unknown = np.array(result["_unknown"], np.float64)
    return {
        "rule": "suggested = lowest t at which at most 1% of missing-card photos are accepted",
        "cosine": _sweep(np.arange(0.70, 0.995, 0.01), 0, decisions, unknown),
        "margin": _sweep(np.arange(0.0, 0.205, 0.01), 1, decisions, unknown),
    }


def query_photo(card: Card, seed: int, kind: str, corner_error: float | None = None) -> np.ndarray:
    """One query of `kind` (`PHOTO_KINDS`) for `card`: a degraded face, or the rectified view of a phone
    photo of that difficulty, at the size the embedder's photo pairs use (`PhotoMix`) and their corner
    error unless `corner_error` is given (the detector's residue on glared and held photos reaches 5-8%
    of the card's height, far past the pairs' 0.02)."""
    face = read_face(card.high)
    if kind == "degrade":
        return degrade(face, seed)
    view = PhotoMix()
    error = view.corner_error if corner_error is None else corner_error
    if kind == "foil":
        face = holofoil(face, np.random.default_rng([seed, FOIL_SALT]))
        return photo_view(face, seed, "standard", view.scale, error)
    if kind == "held":
        return photo_view(face, seed, "harsh", view.scale, error, held_look(seed))
    return photo_view(face, seed, cast(Difficulty, kind), view.scale, error)


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    embedder = CardEmbedder(args.weights)
    cards = load_cards(Path(os.path.expanduser(args.render_dir)))
    indexed, queries = pick(cards, args.cards, args.queries, args.pool, args.seed_base)
    art = {c.id: c.artwork_key for c in cards}
    started = time.perf_counter()
    cached = args.cache_dir is not None and any(args.cache_dir.glob("batch-*.npz"))
    index = CardIndex.build(
        embedder,
        [(c.id, c.high) for c in indexed],
        batch_size=64,
        checkpoint_dir=args.cache_dir,
        progress=not args.quiet,
    )
    index_s = time.perf_counter() - started
    faces = [read_face(c.high) for c in indexed[:256]]
    started = time.perf_counter()
    embedder.embed_batch(faces)
    net_ms = (time.perf_counter() - started) / len(faces) * 1000
    corner_error = PhotoMix().corner_error if args.corner_error is None else args.corner_error
    photos = [query_photo(q, args.seed_base + i, args.photos, corner_error) for i, q in enumerate(queries)]
    upright = embedder.embed_batch(photos)
    flipped = embedder.embed_batch([half_turn(p) for p in photos])
    k = min(50, len(index))
    hits_up, hits_flip = index.search(upright, k), index.search(flipped, k)
    both = [u if u[0][1] >= f[0][1] else f for u, f in zip(hits_up, hits_flip, strict=True)]
    res_up, res_both = score(hits_up, queries, art), score(both, queries, art)
    report = {
        "weights_version": embedder.version,
        "index_size": len(index),
        "queries": len(queries),
        "query_pool": args.pool,
        "query_photos": args.photos,
        "seed_base": args.seed_base,
        "corner_error": corner_error,
        "threads": args.threads,
        "ms_per_face_index_build": None if cached else round(index_s / len(indexed) * 1000, 3),
        "ms_per_face_embed_only": round(net_ms, 3),
        "upright": {k: v for k, v in res_up.items() if not k.startswith("_")},
        "both_orientations": {k: v for k, v in res_both.items() if not k.startswith("_")},
        "wrong_orientation_won": sum(u[0][1] < f[0][1] for u, f in zip(hits_up, hits_flip, strict=True)),
        "threshold": thresholds(res_both),
    }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cards", type=int, default=2000, help="faces in the index (0: every rendered card)")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--seed-base", type=int, default=EVAL_SEED_BASE)
    parser.add_argument("--pool", choices=("held_out", "train", "all"), default="held_out")
    parser.add_argument("--photos", choices=PHOTO_KINDS, default="degrade", help="what the queries are")
    parser.add_argument(
        "--corner-error",
        type=float,
        default=None,
        help="the queries' corners moved by up to this share of the card's height (default: PhotoMix's)",
    )
    parser.add_argument("--weights", type=Path, default=None)
    parser.add_argument("--render-dir", default="~/.cache/cardcat/renders/catalog")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--cache-dir", type=Path, default=None, help="reuse index embeddings (same weights, same cards)"
    )
    parser.add_argument(
        "--manifest", type=Path, default=None, help="merge the result into this embedder.json"
    )
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.seed_base < EVAL_SEED_BASE:
        parser.error(f"evaluation seeds start at {EVAL_SEED_BASE}: lower ones are training photos")
    report = evaluate(args)
    photos = "" if args.photos == "degrade" else f"-{args.photos}"
    if args.corner_error is not None:
        photos += f"-corners{args.corner_error:g}"
    name = f"{report['weights_version']}-{args.pool}{photos}-{report['index_size']}x{report['queries']}"
    out = args.out or Path("runs/embedder/eval") / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    if args.manifest:
        manifest = json.loads(args.manifest.read_text())
        manifest.setdefault("metrics", {}).setdefault("evaluation", {})[name] = {
            k: report[k] for k in ("index_size", "queries", "query_pool", "ms_per_face_embed_only")
        } | {
            "upright": {
                k: v for k, v in report["upright"].items() if not k.startswith(("sim_", "top1_sim", "margin"))
            },
            "both_orientations": report["both_orientations"],
            "suggested_threshold": {k: report["threshold"][k]["suggested"] for k in ("cosine", "margin")},
        }
        args.manifest.write_text(json.dumps(manifest, indent=2) + "\n")
    summary = {
        k: report["both_orientations"][k] for k in ("artwork_top1", "artwork_top5", "card_top1", "card_top5")
    }
    print(
        json.dumps({"out": str(out), **summary, "cosine": report["threshold"]["cosine"]["suggested"]}),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
