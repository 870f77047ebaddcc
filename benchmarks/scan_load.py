"""Scanner load: closed-loop scans through the real `/v1/scan` ingress, with the server's CPU and memory.

Starts a scanner deployment like a user would (PostgreSQL, rendered faces, FAISS index over the chosen
expansions, default the whole catalog, `cardcat serve --scan`), makes every photo before timing (phone
photos from `training/synth.py`, composed at three sizes: ~12 MP, ~2 MP, ~0.5 MP; JPEG quality 90), then
for each photo size and concurrency runs a closed loop: `c` clients, each sending its next photo as soon as
its last answer came back.

Per row: scans/s, p50/p95/p99 latency, errors by status, top-1 on the load's own photos, and the server's
cost: **CPU-ms per scan** is the user+system time of every process under `cardcat serve` (uvicorn, Ray's
GCS and raylet, every replica worker) read from `/proc/<pid>/stat` before and after the timed window,
divided by the scans answered; PostgreSQL's own processes are counted apart. **RSS** is the sum of VmRSS
over the same processes at the end of the window (shared pages such as Ray's object store count once per
process that maps them, as `ps` would add them up); **PSS** splits shared pages fairly and is the honest
total. **Stage ms** are the scanner's own mean stage times over the window (`cardcat_scan_stage_seconds`
from `/metrics`: decode and locate in the Detector replica; search and read as the ingress waits for
them, queueing and batch waits included), each over the scans that went through it (**stage counts**:
fewer `read` than `search`, since a face is read only where the print could change the answer); the
client's latency less `total` is the ingress and HTTP. **sys ms** is the kernel's part of the CPU; each
row's JSON also has minor page faults and RSS by process (which process a change comes from).
Before any load, the server's CPU over `--idle-seconds` with nothing in flight (Ray's own loops) goes
into the JSON's meta. The headline rows (`--headline`, default concurrency 16 on the mixed photos; several
may be named) are each run `--repeat` times and their medians reported. **quick** is the share of
answers the scan cascade's first look gave (`analysis.path`, #47); `--no-first-look` serves every photo
through the full pipeline, as before the cascade. `--hard` adds a row of training.synth's hard photos.

    .venv/bin/python benchmarks/scan_load.py [--expansion ID ...] [--concurrency 1,4,16,32]
        [--sizes 12mp,2mp,0.5mp] [--photos 24] [--scans 64] [--repeat 3] [--database postgresql|sqlite]
        [--headline mixed:16,2mp:16] [--hard] [--no-first-look]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `cardcat.stack` when run as a script

from benchmarks import host
from benchmarks.metrics_text import Scrape
from cardcat.stack import REPO, SHARED_CATALOG, launch_scanner
from catalog_api.ingest.feed import feed_path, read_jsonl
from catalog_api.kit.metrics import SCAN_STAGES
from training.renders import DEFAULT_CACHE, read_manifest, render_catalog
from training.synth import Difficulty

# One key sends every photo: the 300/60 s budget would answer most of them 429.
BENCH_RATE_LIMIT = 100_000_000
SEED_BASE = 14_000_000
# The scanner's model replicas, each with a `CARDCAT_SCAN_<MODEL>_RUNTIME` setting (`--<model>-runtime`).
RUNTIME_MODELS = ("detector", "embedder", "reader")
# synth.make_photo composes 960x1280 (80%) or 720x960 photos; these scales give the three sizes.
SIZES = {"12mp": 3.15, "2mp": 1.275, "0.5mp": 0.64}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Photo:
    card_id: str
    body: bytes
    megapixels: float


# ------------------------------------------------------------------------------------ process accounting
def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def process_tree(root: int) -> list[int]:
    """`root` and every process under it (Ray's daemons and workers are children of the server)."""
    tree, out, stack = _children(), [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(tree.get(pid, []))
    return out


def postgres_pids() -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() in ("postgres", "postmaster"):
                    pids.append(int(entry))
            except OSError:
                continue
    return pids


def stat_counters(pids: list[int], fields: tuple[int, ...], scale: float = 1.0) -> dict[int, float]:
    """The sum of the given fields of `/proc/<pid>/stat` (numbered as proc(5) numbers them) per live
    process, times `scale`; a process gone since is left out."""
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                after_name = f.read().rsplit(")", 1)[1].split()  # field 3 onwards: the name may hold spaces
        except OSError:
            continue
        out[pid] = sum(int(after_name[n - 3]) for n in fields) * scale
    return out


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """user+system seconds per live process, its reaped children's included (fields 14-17 of stat)."""
    return stat_counters(pids, (14, 15, 16, 17), 1 / CLOCK_TICKS)


def system_seconds(pids: list[int]) -> dict[int, float]:
    """The kernel's share of `cpu_seconds` (fields 15 and 17 of stat)."""
    return stat_counters(pids, (15, 17), 1 / CLOCK_TICKS)


def minor_faults(pids: list[int]) -> dict[int, float]:
    """Minor page faults per live process, its reaped children's included (fields 10 and 11 of stat): the
    kernel's work where a process keeps giving memory back and asking for it again."""
    return stat_counters(pids, (10, 11))


def memory_kib(pids: list[int]) -> tuple[int, int]:
    """(sum of VmRSS, sum of Pss) in KiB over `pids`."""
    rss = pss = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except OSError:
            continue
    return rss, pss


def rss_by_role(pids: list[int]) -> dict[str, float]:
    """VmRSS in MiB by process role, largest first: which process a change in the total comes from."""
    out: dict[str, float] = {}
    for pid in pids:
        rss, _ = memory_kib([pid])
        out[role(pid)] = out.get(role(pid), 0.0) + rss / 1024
    return {name: round(mib) for name, mib in sorted(out.items(), key=lambda kv: -kv[1])}


def used_between(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds spent in the window; a process born inside it counts from zero."""
    return sum(t - before.get(pid, 0.0) for pid, t in after.items())


ROLES = ("Detector", "Reader", "Embedder", "ScanService", "ServeController", "raylet", "gcs_server")


def role(pid: int) -> str:
    """What a server process is, from its command line: a replica, a Ray daemon, or the ingress."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if "cardcat.cli" in cmdline:
        return "ingress (uvicorn)"
    return next((name for name in ROLES if name in cmdline), "other Ray daemons")


def by_role(before: dict[int, float], after: dict[int, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for pid, t in after.items():
        out[role(pid)] = out.get(role(pid), 0.0) + t - before.get(pid, 0.0)
    return out


def idle_cost(server_pid: int, seconds: float) -> dict[str, Any]:
    """CPU milliseconds a second the server spends with no request in flight (Ray's control loops,
    heartbeats and metrics), in all and by process: at n scans/s it adds total/n ms to every scan."""
    pids = process_tree(server_pid)
    before = cpu_seconds(pids)
    time.sleep(seconds)
    after = cpu_seconds(process_tree(server_pid))
    per_s = {name: round(1000 * t / seconds, 1) for name, t in by_role(before, after).items()}
    return {"seconds": seconds, "total": round(sum(per_s.values()), 1), "by_process": per_s}


# ------------------------------------------------------------------------------------------- photos
def make_photos(
    card_ids: list[str], size: str, count: int, seed: int, difficulty: Difficulty = "standard"
) -> list[Photo]:
    from training.synth import make_photo

    rng = np.random.default_rng(seed)
    out = []
    for i, card_id in enumerate(rng.choice(card_ids, size=count, replace=len(card_ids) < count)):
        face = np.asarray(Image.open(DEFAULT_CACHE / "catalog" / str(card_id) / "high.jpg").convert("RGB"))
        image = make_photo(face, seed + i, difficulty, scale=SIZES[size]).image
        buffer = io.BytesIO()
        Image.fromarray(image).save(buffer, format="JPEG", quality=90)
        out.append(Photo(str(card_id), buffer.getvalue(), image.shape[0] * image.shape[1] / 1e6))
    return out


# ----------------------------------------------------------------------------------------- the loop
@dataclass
class Row:
    photos: str
    concurrency: int
    scans: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    right: int = 0
    misses: Counter[str] = field(default_factory=Counter)  # "true card -> answer" of wrong or empty answers
    paths: Counter[str] = field(default_factory=Counter)  # answers by `analysis.path` (#47's cascade)
    server_cpu_s: float = 0.0
    cpu_by_role: dict[str, float] = field(default_factory=dict)
    postgres_cpu_s: float = 0.0
    server_sys_s: float = 0.0
    faults_by_role: dict[str, float] = field(default_factory=dict)
    stage_ms: dict[str, float] = field(default_factory=dict)
    stage_counts: dict[str, int] = field(default_factory=dict)
    rss_kib: int = 0
    rss_mib_by_role: dict[str, float] = field(default_factory=dict)
    pss_kib: int = 0

    def summary(self) -> dict[str, Any]:
        answered = self.statuses.get(200, 0)
        lat = self.latencies_ms or [float("nan")]
        return {
            "photos": self.photos,
            "concurrency": self.concurrency,
            "scans": self.scans,
            "scans_per_s": self.scans / self.seconds if self.seconds else 0.0,
            "p50_ms": float(np.percentile(lat, 50)),
            "p95_ms": float(np.percentile(lat, 95)),
            "p99_ms": float(np.percentile(lat, 99)),
            "errors": {str(s): n for s, n in sorted(self.statuses.items()) if s != 200},
            "top1": self.right / answered if answered else 0.0,
            "misses": dict(self.misses),
            "server_cpu_ms_per_scan": 1000 * self.server_cpu_s / max(answered, 1),
            "cpu_ms_per_scan_by_process": {
                name: round(1000 * t / max(answered, 1), 1)
                for name, t in sorted(self.cpu_by_role.items(), key=lambda kv: -kv[1])
            },
            "postgres_cpu_ms_per_scan": 1000 * self.postgres_cpu_s / max(answered, 1),
            # The kernel's part of server_cpu_ms_per_scan, and the minor page faults behind most of it.
            "server_sys_cpu_ms_per_scan": 1000 * self.server_sys_s / max(answered, 1),
            "server_minor_faults_per_scan": sum(self.faults_by_role.values()) / max(answered, 1),
            "minor_faults_per_scan_by_process": {
                name: round(n / max(answered, 1))
                for name, n in sorted(self.faults_by_role.items(), key=lambda kv: -kv[1])
            },
            # Answers by how the card was found: `quick` (the cascade's first look) or `full`.
            "paths": dict(self.paths),
            "quick_share": self.paths["quick"] / max(1, sum(self.paths.values())),
            "stage_ms_mean": self.stage_ms,
            # How many scans passed through each stage: fewer `read` than `search` where the picture alone
            # answered a unique artwork (`fusion.picture_answer`).
            "stage_counts": self.stage_counts,
            "server_rss_gib": self.rss_kib / 2**20,
            "rss_mib_by_process": self.rss_mib_by_role,
            "server_pss_gib": self.pss_kib / 2**20,
        }


async def stage_totals(client: httpx.AsyncClient) -> dict[str, tuple[float, float]]:
    """(seconds, count) so far of each scanner stage, from the ingress's `/metrics`."""
    response = await client.get("/metrics")
    response.raise_for_status()
    scrape, name = Scrape.parse(response.text), "cardcat_scan_stage_seconds"
    seen = scrape.labels(f"{name}_count", "stage")
    return {
        stage: (scrape.sum(f"{name}_sum", stage=stage), scrape.sum(f"{name}_count", stage=stage))
        for stage in SCAN_STAGES  # in the pipeline's order
        if stage in seen
    }


def stage_means(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
) -> dict[str, float]:
    """Mean milliseconds of each stage between two `stage_totals` readings."""
    means = {}
    for stage, (seconds, count) in after.items():
        was = before.get(stage, (0.0, 0.0))
        if count > was[1]:
            means[stage] = round(1000 * (seconds - was[0]) / (count - was[1]), 1)
    return means


def stage_counts(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
) -> dict[str, int]:
    """How many scans went through each stage between two `stage_totals` readings."""
    return {stage: round(count - before.get(stage, (0.0, 0.0))[1]) for stage, (_, count) in after.items()}


async def closed_loop(
    client: httpx.AsyncClient, photos: list[Photo], concurrency: int, scans: int, server_pid: int, label: str
) -> Row:
    row = Row(label, concurrency)
    next_photo = 0

    async def one(photo: Photo) -> None:
        started = time.perf_counter()
        try:
            response = await client.post("/v1/scan", files={"image": ("photo.jpg", photo.body, "image/jpeg")})
        except httpx.HTTPError:
            row.statuses[0] += 1  # no response at all
            return
        row.latencies_ms.append((time.perf_counter() - started) * 1000)
        row.statuses[response.status_code] += 1
        if response.status_code == 200:
            data = response.json()["data"]
            row.paths[data["analysis"].get("path", "full")] += 1
            answer = [m["card"]["id"] for m in data["matches"]]
            if answer[:1] == [photo.card_id]:
                row.right += 1
            else:
                row.misses[f"{photo.card_id} -> {','.join(answer) or 'unidentified'}"] += 1

    async def worker() -> None:
        nonlocal next_photo
        while next_photo < scans:
            photo = photos[next_photo % len(photos)]
            next_photo += 1
            await one(photo)

    for photo in photos[: min(len(photos), concurrency, 4)]:  # warm every path once, untimed
        await client.post("/v1/scan", files={"image": ("photo.jpg", photo.body, "image/jpeg")})
    pids = process_tree(server_pid)
    pg = postgres_pids()
    stages_before = await stage_totals(client)
    cpu_before, pg_before = cpu_seconds(pids), cpu_seconds(pg)
    sys_before, faults_before = system_seconds(pids), minor_faults(pids)
    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    row.seconds = time.perf_counter() - started
    pids = process_tree(server_pid)
    cpu_after = cpu_seconds(pids)
    row.server_sys_s = used_between(sys_before, system_seconds(pids))
    row.faults_by_role = by_role(faults_before, minor_faults(pids))
    row.server_cpu_s = used_between(cpu_before, cpu_after)
    row.cpu_by_role = by_role(cpu_before, cpu_after)
    row.postgres_cpu_s = used_between(pg_before, cpu_seconds(pg))
    row.rss_kib, row.pss_kib = memory_kib(pids)
    row.rss_mib_by_role = rss_by_role(pids)
    stages_after = await stage_totals(client)
    row.stage_ms = stage_means(stages_before, stages_after)
    row.stage_counts = stage_counts(stages_before, stages_after)
    row.scans = sum(row.statuses.values())
    return row


async def run_all(
    base_url: str, key: str, server_pid: int, sets: dict[str, list[Photo]], args: argparse.Namespace
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    levels = [int(c) for c in args.concurrency.split(",")]
    rows = []
    limits = httpx.Limits(max_connections=max(levels) + 4, max_keepalive_connections=max(levels) + 4)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=120, limits=limits) as client:
        for label, photos in sets.items():
            for c in levels:
                row = await closed_loop(client, photos, c, max(args.scans, 4 * c), server_pid, label)
                rows.append(row.summary())
                print_row(rows[-1], flush=True)
        repeats: dict[str, list[Row]] = {}
        for entry in args.headline.split(","):
            head_label, head_c = entry.split(":")
            repeats[entry] = [
                await closed_loop(client, sets[head_label], int(head_c), args.scans, server_pid, head_label)
                for _ in range(args.repeat)
            ]
    headlines = {entry: median_row([r.summary() for r in runs]) for entry, runs in repeats.items()}
    return rows, headlines


def median_row(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Repeated runs of one row: the median of each figure, and the runs."""
    median = {
        key: statistics.median(s[key] for s in summaries)
        for key in summaries[0]
        if isinstance(summaries[0][key], float | int) and not isinstance(summaries[0][key], bool)
    }
    median.update(
        photos=summaries[0]["photos"],
        concurrency=summaries[0]["concurrency"],
        runs=len(summaries),
        errors=sum(sum(s["errors"].values()) for s in summaries),
    )
    return {"median": median, "runs": summaries}


HEADER = (
    f"{'photos':>6} {'conc':>4} {'scans':>5} {'scans/s':>7} {'p50':>6} {'p95':>6} {'p99':>6} "
    f"{'errors':>8} {'top-1':>6} {'quick':>6} {'CPU ms/scan':>11} {'sys ms':>6} {'PG ms':>6} {'RSS GiB':>7} "
    f"{'PSS GiB':>7}"
)


def print_row(r: dict[str, Any], flush: bool = False) -> None:
    errors = ",".join(f"{s}:{n}" for s, n in r["errors"].items()) if isinstance(r["errors"], dict) else ""
    errors = errors if isinstance(r["errors"], dict) else str(r["errors"])
    print(
        f"{r['photos']:>6} {r['concurrency']:>4} {r.get('scans', 0):>5} {r['scans_per_s']:>7.1f} "
        f"{r['p50_ms']:>6.0f} {r['p95_ms']:>6.0f} {r['p99_ms']:>6.0f} {errors or '0':>8} "
        f"{100 * r['top1']:>5.1f}% {100 * r.get('quick_share', 0.0):>5.1f}% "
        f"{r['server_cpu_ms_per_scan']:>11.1f} "
        f"{r['server_sys_cpu_ms_per_scan']:>6.1f} {r['postgres_cpu_ms_per_scan']:>6.1f} "
        f"{r['server_rss_gib']:>7.2f} {r['server_pss_gib']:>7.2f}",
        flush=flush,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--expansion", action="append", help="index only these (default: every card)")
    parser.add_argument("--concurrency", default="1,4,16,32")
    parser.add_argument("--sizes", default="12mp,2mp,0.5mp")
    parser.add_argument("--photos", type=int, default=24, help="distinct photos per size")
    parser.add_argument("--scans", type=int, default=64, help="scans per row (at least 4 x concurrency)")
    parser.add_argument(
        "--headline",
        default="mixed:16",
        help="PHOTOS:CONCURRENCY[,PHOTOS:CONCURRENCY] run --repeat times each",
    )
    parser.add_argument("--hard", action="store_true", help="a row of hard photos (~2 MP) too")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--detector-precision", choices=("auto", "fp32", "bf16"), default="fp32")
    parser.add_argument("--threads", type=int, default=1, help="torch/OpenCV threads per model replica")
    for model in RUNTIME_MODELS:
        parser.add_argument(
            f"--{model}-runtime",
            choices=("torch", "onnx"),
            help=f"CARDCAT_SCAN_{model.upper()}_RUNTIME (default: the setting's)",
        )
    parser.add_argument(
        "--batch-wait-ms", type=float, default=0.0, help="each model batch's wait for company"
    )
    parser.add_argument(
        "--first-look",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the scan cascade's first look (CARDCAT_SCAN_FIRST_LOOK); --no-first-look: the full pipeline",
    )
    parser.add_argument("--idle-seconds", type=float, default=20, help="server CPU read idle first")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scan_load.json")
    args = parser.parse_args()
    machine = host.describe()  # before the server starts: the yardstick times a quiet machine
    print(f"machine: {host.summary(machine)}")

    expansions = args.expansion or [e["id"] for e in read_jsonl(feed_path(SHARED_CATALOG, "expansions"))]
    manifest = read_manifest(render_catalog(SHARED_CATALOG, DEFAULT_CACHE / "catalog", expansions))
    wanted = set(expansions)
    records = read_jsonl(feed_path(SHARED_CATALOG, "cards"))
    card_ids = sorted(c["id"] for c in records if c["expansion_id"] in wanted and c["id"] in manifest)
    sizes = args.sizes.split(",")
    print(f"making {args.photos} photos of each size ({', '.join(sizes)}) from {len(card_ids)} cards")
    sets = {
        size: make_photos(card_ids, size, args.photos, SEED_BASE + 1000 * n) for n, size in enumerate(sizes)
    }
    sets["mixed"] = [p for group in zip(*sets.values(), strict=True) for p in group]
    if args.hard:  # training.synth's hard photos (glare, sleeves, small and steep cards) at ~2 MP
        sets["hard"] = make_photos(card_ids, "2mp", args.photos, SEED_BASE + 9000, "hard")
    with tempfile.TemporaryDirectory(prefix="cardcat-scan-load-") as tmp:
        service = launch_scanner(
            Path(tmp),
            tuple(expansions),
            backend=args.database,
            CARDCAT_RATE_LIMIT=str(BENCH_RATE_LIMIT),
            CARDCAT_SCAN_DETECTOR_PRECISION=args.detector_precision,
            CARDCAT_SCAN_THREADS=str(args.threads),
            CARDCAT_SCAN_BATCH_WAIT_MS=str(args.batch_wait_ms),
            CARDCAT_SCAN_FIRST_LOOK=str(args.first_look).lower(),
            **{
                f"CARDCAT_SCAN_{model.upper()}_RUNTIME": getattr(args, f"{model}_runtime")
                for model in RUNTIME_MODELS
                if getattr(args, f"{model}_runtime") is not None
            },
        )
        try:
            server_pid = service.processes[0].pid
            idle = memory_kib(process_tree(server_pid))
            count = len(process_tree(server_pid))
            print(
                f"server up: {count} processes, RSS {idle[0] / 2**20:.2f} GiB, PSS {idle[1] / 2**20:.2f} GiB"
            )
            print(f"RSS by process, MiB: {rss_by_role(process_tree(server_pid))}")
            idle_cpu = idle_cost(server_pid, args.idle_seconds)
            print(f"idle: {idle_cpu['total']} ms of CPU a second ({idle_cpu['by_process']})")
            print(HEADER)
            rows, headlines = asyncio.run(run_all(service.base_url, service.key, server_pid, sets, args))
        finally:
            service.stop()
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU x{os.cpu_count()}"
    print(f"\nheadline: median of {args.repeat} runs each, {args.headline}, on {device}")
    print(HEADER)
    for headline in headlines.values():
        print_row(headline["median"])
    for entry, headline in headlines.items():
        roles = headline["runs"][len(headline["runs"]) // 2]["cpu_ms_per_scan_by_process"]
        print(
            f"CPU ms per scan by process ({entry}, middle run): "
            + ", ".join(f"{k} {v}" for k, v in roles.items())
        )
    for r in rows:
        stages = ", ".join(f"{k} {v}" for k, v in r["stage_ms_mean"].items())
        counts = r["stage_counts"]
        read = f"; read {counts.get('read', 0)} of {counts.get('search', 0)} searched"
        print(f"stage ms ({r['photos']}, c{r['concurrency']}, p50 {r['p50_ms']:.0f}): {stages}{read}")
    meta = {
        "device": device,
        "host": machine,
        "cards_indexed": len(card_ids),
        "database": args.database,
        "python": platform.python_version(),
        "photo_megapixels": {k: round(float(np.mean([p.megapixels for p in v])), 2) for k, v in sets.items()},
        "photo_mb": {k: round(float(np.mean([len(p.body) for p in v])) / 1e6, 2) for k, v in sets.items()},
        "args": {k: v for k, v in vars(args).items() if k != "out"},
        "idle_rss_gib": idle[0] / 2**20,
        "idle_cpu_ms_per_s": idle_cpu,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # `headline` is the first --headline entry's (as before several could be asked for); `headlines` all.
    first = next(iter(headlines.values()))
    report = {"meta": meta, "rows": rows, "headline": first, "headlines": headlines}
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
