"""Every card in one photo (#48): `POST /v1/scan/page` through the real ingress, accuracy and cost.

Renders the faces, starts `cardcat serve --scan` (PostgreSQL, Ray Serve, the shipped models, the index of
every card of the chosen expansions: all of them by default), then sends 12 MP photos from
`training.pages` on benchmark seeds (10,000,000 + 6 or 7 million, never trained or tuned on; with
`--validation` on validation seeds, 990,000 + 6 or 7 million, where a setting is chosen):

- binder pages of 3x3 pockets (standard light, and hard with `--hard`), some pockets empty or holding a
  card face down; and table spreads of 2-16 cards at any angle;
- for each: cards found (an answer whose corners are within 5% of the card's height), top-1 per card,
  the true card among the matches, cards reported where there is none (share of photos), pockets right
  (of the cards found on a page), and empty pockets and backs named as such;
- cost: the server's CPU per page and per card, and p50 latency at concurrency 1 and 4 (`--repeat` runs,
  medians), beside `POST /v1/scan` on single-card photos of the same size, which a 9-card page should cost
  at most 5 times.

    .venv/bin/python benchmarks/scan_page.py [--pages 40 --spreads 30 --hard 20] [--expansion ID]
        [--repeat 3] [--out benchmarks/results/scan_page.json]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `cardcat.stack` when run as a script

from benchmarks import host
from benchmarks.scan_load import cpu_seconds, make_photos, process_tree, used_between
from cardcat.stack import REPO, SHARED_CATALOG, launch_scanner
from catalog_api.ingest.feed import feed_path, read_jsonl
from models.geometry import read_face
from training.detector.evaluate_pages import FOUND_PCT, LAYOUT_OFFSETS, corner_gap_pct, on_a_card
from training.pages import PagePhoto, make_page_photo, make_spread_photo
from training.renders import DEFAULT_CACHE, read_manifest, render_catalog
from training.synth import BENCH_SEED_BASE, VAL_SEED_BASE

BENCH_RATE_LIMIT = 100_000_000
SINGLE_SEED = 14_500_000  # the single-card photos the cost is compared with


@dataclass
class Sent:
    """One photo and what it is of."""

    bucket: str
    photo: PagePhoto
    body: bytes


@dataclass
class Tally:
    photos: int = 0
    cards: int = 0
    found: int = 0
    top1: int = 0
    among: int = 0
    slots: int = 0
    slots_judged: int = 0
    places: int = 0  # empty pockets and backs
    places_named: int = 0
    photos_with_false: int = 0
    photos_with_misplaced: int = 0
    errors: int = 0
    misses: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        def pct(n: int, d: int) -> float | None:
            return round(100 * n / d, 2) if d else None

        return {
            "photos": self.photos,
            "cards": self.cards,
            "found_pct": pct(self.found, self.cards),
            "top1_pct": pct(self.top1, self.cards),
            "true_card_among_matches_pct": pct(self.among, self.cards),
            "false_card_photos_pct": pct(self.photos_with_false, self.photos),
            "misplaced_card_photos_pct": pct(self.photos_with_misplaced, self.photos),
            "slots_right_pct": pct(self.slots, self.slots_judged),
            "empty_and_backs_named_pct": pct(self.places_named, self.places),
            "errors": self.errors,
            "misses": dict(self.misses.most_common(12)),
        }


def jpeg(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def layout_of(bucket: str) -> str:
    """A bucket's `training.pages` layout: "spread" or "page" (standard and hard)."""
    return "spread" if bucket == "spread" else "page"


def photo_seed(bucket: str, k: int, seed_base: int = BENCH_SEED_BASE) -> int:
    """The seed of a bucket's k-th photo: `training.detector.evaluate_pages`' layout offsets above the
    seed base, hard pages 500,000 further."""
    hard = 500_000 if bucket == "page-hard" else 0
    return seed_base + LAYOUT_OFFSETS[layout_of(bucket)] * 1_000_000 + hard + k


def make_sets(card_ids: list[str], counts: dict[str, int], seed_base: int = BENCH_SEED_BASE) -> list[Sent]:
    """Benchmark photos of each bucket (validation photos with `VAL_SEED_BASE`); faces drawn from every
    indexed card."""
    out = []
    for bucket, count in counts.items():
        layout = layout_of(bucket)
        for k in range(count):
            seed = photo_seed(bucket, k, seed_base)
            rng = np.random.default_rng(seed)
            chosen = rng.choice(card_ids, size=16, replace=len(card_ids) < 16)
            faces = [(str(c), read_face(DEFAULT_CACHE / "catalog" / str(c) / "high.jpg")) for c in chosen]
            if layout == "page":
                difficulty: Literal["standard", "hard"] = "hard" if bucket == "page-hard" else "standard"
                photo = make_page_photo(faces, seed, (3, 3), difficulty)
            else:
                photo = make_spread_photo(faces, seed)
            out.append(Sent(bucket, photo, photo.jpeg or jpeg(photo.image)))
    return out


def judge(sent: Sent, answer: dict[str, Any], tally: Tally) -> None:
    """Each true card against the answer's places: found (its corners within FOUND_PCT), named, in its
    pocket. Of the places left, one on no card at all (`training.detector.evaluate_pages.on_a_card`) is
    a false card, a card reported where there is none; one on a card whose corners it missed is a
    misplaced card (that card also counts as not found)."""
    tally.photos += 1
    places = answer["cards"]
    used: set[int] = set()
    for card in sent.photo.cards:
        gaps = [
            (corner_gap_pct(np.array(p["corners"], np.float32), card.corners), j)
            for j, p in enumerate(places)
            if j not in used
        ]
        gap, j = min(gaps, default=(np.inf, -1))
        if card.kind != "card":
            tally.places += 1
            if gap <= 3 * FOUND_PCT:
                used.add(j)
                wanted = "card_back" if card.kind == "back" else "empty_slot"
                reason = (places[j].get("unidentified") or {}).get("reason")
                tally.places_named += reason == wanted
                if reason != wanted:
                    tally.misses[f"{card.kind} -> {reason or 'a card'}"] += 1
            else:
                tally.misses[f"{card.kind} -> not listed"] += 1
            continue
        tally.cards += 1
        if gap > FOUND_PCT:
            tally.misses["card not found"] += 1
            continue
        used.add(j)
        tally.found += 1
        ids = [m["card"]["id"] for m in places[j]["matches"]]
        tally.top1 += bool(ids) and ids[0] == card.card_id
        tally.among += card.card_id in ids
        if not ids:
            tally.misses[f"unidentified: {places[j]['unidentified']['reason']}"] += 1
        elif card.card_id not in ids:
            tally.misses["wrong card"] += 1
        if card.slot is not None:
            tally.slots_judged += 1
            slot = places[j].get("slot")
            tally.slots += slot is not None and (slot["row"], slot["col"]) == card.slot
    left = [
        np.array(p["corners"], np.float32)
        for j, p in enumerate(places)
        if j not in used and (p.get("unidentified") or {}).get("reason") != "empty_slot"
    ]
    cards = [c.corners for c in sent.photo.cards if c.kind != "empty"]
    on_card = [on_a_card(q, cards) for q in left]
    tally.photos_with_false += not all(on_card)
    tally.photos_with_misplaced += any(on_card)


async def send(client: httpx.AsyncClient, path: str, body: bytes) -> tuple[int, dict[str, Any], float]:
    started = time.perf_counter()
    response = await client.post(path, files={"image": ("photo.jpg", body, "image/jpeg")})
    elapsed = time.perf_counter() - started
    return response.status_code, response.json(), elapsed


async def accuracy(base_url: str, key: str, sets: list[Sent]) -> dict[str, Any]:
    tallies: dict[str, Tally] = {}
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=300, trust_env=False) as client:
        for sent in sets:
            tally = tallies.setdefault(sent.bucket, Tally())
            status, body, _ = await send(client, "/v1/scan/page", sent.body)
            if status != 200:
                tally.errors += 1
                tally.photos += 1
                continue
            judge(sent, body["data"], tally)
    return {bucket: tally.as_dict() for bucket, tally in tallies.items()}


async def cost(
    base_url: str, key: str, server_pid: int, path: str, bodies: list[bytes], concurrency: int
) -> dict[str, Any]:
    """Server CPU a photo and latencies, every body sent once at `concurrency`."""
    headers = {"Authorization": f"Bearer {key}"}
    queue = list(bodies)
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    cards: list[int] = []
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=300, trust_env=False) as client:

        async def worker() -> None:
            while queue:
                status, body, elapsed = await send(client, path, queue.pop())
                statuses[status] += 1
                latencies.append(elapsed)
                if status == 200 and "cards" in body["data"]:
                    cards.append(sum(1 for c in body["data"]["cards"] if c["matches"]))

        before = cpu_seconds(process_tree(server_pid))
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - started
        after = cpu_seconds(process_tree(server_pid))
    used = used_between(before, after)
    return {
        "photos": len(bodies),
        "concurrency": concurrency,
        "statuses": dict(statuses),
        "server_cpu_ms_per_photo": round(1000 * used / len(bodies), 1),
        "server_cpu_ms_per_named_card": round(1000 * used / max(sum(cards), 1), 1) if cards else None,
        "p50_ms": round(1000 * statistics.median(latencies), 1),
        "photos_per_s": round(len(bodies) / seconds, 2),
    }


def median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose server CPU a photo is the median of `rows`, with every run's figures kept."""
    ordered = sorted(rows, key=lambda r: r["server_cpu_ms_per_photo"])
    return {**ordered[len(ordered) // 2], "runs": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=40, help="3x3 binder pages, standard light")
    parser.add_argument("--hard", type=int, default=20, help="3x3 binder pages, hard")
    parser.add_argument("--spreads", type=int, default=30, help="table spreads of 2-16 cards")
    parser.add_argument("--cost-photos", type=int, default=8, help="pages (and single scans) a cost row")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--expansion", action="append", help="index only these (default: every card)")
    parser.add_argument(
        "--validation", action="store_true", help="validation seeds: to choose a setting, never to report"
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scan_page.json")
    args = parser.parse_args()
    expansions = args.expansion or [e["id"] for e in read_jsonl(feed_path(SHARED_CATALOG, "expansions"))]
    manifest = read_manifest(render_catalog(SHARED_CATALOG, DEFAULT_CACHE / "catalog", expansions))
    wanted = set(expansions)
    card_ids = sorted(
        c["id"]
        for c in read_jsonl(feed_path(SHARED_CATALOG, "cards"))
        if c["expansion_id"] in wanted and c["id"] in manifest
    )
    counts = {"page": args.pages, "page-hard": args.hard, "spread": args.spreads}
    base = VAL_SEED_BASE if args.validation else BENCH_SEED_BASE
    sets = make_sets(card_ids, {k: v for k, v in counts.items() if v > 0}, base)
    singles = make_photos(card_ids, "12mp", args.cost_photos, SINGLE_SEED)
    pages_12mp = [s.body for s in sets if s.bucket == "page"][: args.cost_photos]
    print(f"{len(sets)} photos from {len(card_ids)} cards; cost on {len(pages_12mp)} pages", flush=True)
    with tempfile.TemporaryDirectory(prefix="cardcat-scan-page-") as tmp:
        service = launch_scanner(Path(tmp), tuple(expansions), CARDCAT_RATE_LIMIT=str(BENCH_RATE_LIMIT))
        try:
            pid = service.processes[0].pid
            found = asyncio.run(accuracy(service.base_url, service.key, sets))
            costs: dict[str, Any] = {}
            for name, path, bodies, concurrency in (
                ("page_c1", "/v1/scan/page", pages_12mp, 1),
                ("page_c4", "/v1/scan/page", pages_12mp, 4),
                ("single_12mp_c1", "/v1/scan", [p.body for p in singles], 1),
            ):
                rows = [
                    asyncio.run(cost(service.base_url, service.key, pid, path, bodies, concurrency))
                    for _ in range(args.repeat)
                ]
                costs[name] = median_row(rows)
        finally:
            service.stop()
    ratio = costs["page_c1"]["server_cpu_ms_per_photo"] / max(
        costs["single_12mp_c1"]["server_cpu_ms_per_photo"], 1e-9
    )
    report = {
        "host": host.describe(),
        "cards_indexed": len(card_ids),
        "seed_base": base,
        "accuracy": found,
        "cost": costs,
        "page_over_single_cpu": round(ratio, 2),
    }
    print(
        f"{'photos':12s} {'found':>7s} {'top-1':>7s} {'among':>7s} {'false':>7s} {'off':>7s} {'slots':>7s}"
        f" {'places':>7s}"
    )
    for bucket, r in found.items():
        keys = ("found_pct", "top1_pct", "true_card_among_matches_pct", "false_card_photos_pct")
        cells = [r[k] for k in (*keys, "misplaced_card_photos_pct")]
        cells += [r["slots_right_pct"], r["empty_and_backs_named_pct"]]
        print(f"{bucket:12s} " + " ".join(f"{'-' if c is None else c:>7}" for c in cells))
        print(f"{'':12s} misses: {r['misses']}")
    for name, row in costs.items():
        print(
            f"{name:16s} CPU {row['server_cpu_ms_per_photo']:>8.1f} ms/photo  p50 {row['p50_ms']:>8.1f} ms  "
            f"{row['photos_per_s']:.2f}/s  {row['statuses']}"
        )
    print(f"a page costs {ratio:.2f} x a single 12 MP scan's server CPU (target <= 5)")
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
