"""Scan batches on this machine (#44 item 8), as a table and JSON.

On a real scanner stack (`cardcat serve --scan --workers 2`, PostgreSQL, the shipped models, swsh10tg
and base1's faces), with standard phone photos from `training.synth` (seeds from 25,000,000; a set of
distinct photos sent round and round):

- `closed loop`: `POST /v1/scan` from `--concurrency` clients, nothing else running: photos/s;
- `batch`: one batch of `--photos` photos (uploaded 100 a request, then closed) and nothing else:
  photos/s from the first upload to `done`, and its ratio to the closed loop (#44: ≥ 0.8);
- `interactive`: p50 of single scans one after another with nothing else running, then while a batch of
  `--photos` still has photos waiting (#44: ≤ 2 × idle), the run with the median ratio of `--repeats`;
- `fairness`: two keys each open a batch of half the photos at once: each one's share of the answers
  when the first of them finishes (round-robin: about half each);
- `crash`: a batch of `--photos` photos with a 10 s lease; a uvicorn worker SIGKILLed twice while it
  runs (uvicorn starts a new one); then every photo's answers are counted: lost (none), doubled (more
  than one), and the photo files left on disk after `done` (#44: 0, 0, 0);
- `outages`: the same count for a batch on a stack of its own whose PostgreSQL (a private server,
  `cardcat.outages.PrivatePostgres`) is stopped for 5 s and started again a third of the way through,
  and whose Detector replica is SIGKILLed two thirds of the way through (Ray Serve starts another).

The throughput runs are repeated `--repeats` times (medians reported).

    .venv/bin/python benchmarks/scan_batches.py [--photos 1000] [--repeats 3] [--concurrency 8] \\
        [--out benchmarks/results/scan_batches.json]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cardcat.stack import REPO, Service, launch_scanner

BATCHES = "/v1/scan/batches"
EXPANSIONS = ("swsh10tg", "base1")
SEED = 25_000_000
DISTINCT = 40  # distinct photos, sent round and round
UPLOAD = 100


def photos(count: int = DISTINCT) -> list[bytes]:
    """Standard phone photos of swsh10tg and base1 cards (unique and reprinted artworks)."""
    from training.renders import DEFAULT_CACHE
    from training.synth import make_photo

    cards = [f"swsh10tg-TG{n:02d}" for n in range(1, 21)] + [f"base1-{n}" for n in range(1, 21)]
    out = []
    for index, card in enumerate(cards[:count]):
        face = np.asarray(Image.open(DEFAULT_CACHE / "catalog" / card / "high.jpg").convert("RGB"))
        buffer = io.BytesIO()
        Image.fromarray(make_photo(face, SEED + index, "standard").image).save(
            buffer, format="JPEG", quality=90
        )
        out.append(buffer.getvalue())
    return out


def client(service: Service, key: str | None = None) -> httpx.Client:
    made = service.client(key)
    made.timeout = httpx.Timeout(120)
    return made


def closed_loop(service: Service, bodies: list[bytes], total: int, concurrency: int) -> float:
    """Photos/s of `POST /v1/scan` from `concurrency` clients, `total` scans in all."""
    counter = iter(range(total))
    lock = threading.Lock()

    def worker() -> None:
        with client(service) as c:
            while True:
                with lock:
                    index = next(counter, None)
                if index is None:
                    return
                response = c.post(
                    "/v1/scan", files={"image": ("p.jpg", bodies[index % len(bodies)], "image/jpeg")}
                )
                assert response.status_code == 200, response.text

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        for future in [pool.submit(worker) for _ in range(concurrency)]:
            future.result()
    return total / (time.perf_counter() - started)


def run_batch(c: httpx.Client, bodies: list[bytes], total: int) -> str:
    """Opens a batch, uploads `total` photos 100 a request, closes it; returns its id."""
    batch_id: str = c.post(BATCHES).json()["data"]["id"]
    for start in range(0, total, UPLOAD):
        files = [
            ("image", (f"{n}.jpg", bodies[n % len(bodies)], "image/jpeg"))
            for n in range(start, min(total, start + UPLOAD))
        ]
        response = c.post(f"{BATCHES}/{batch_id}/photos", files=files)
        assert response.status_code == 202, response.text
    assert c.post(f"{BATCHES}/{batch_id}/close").status_code == 202
    return batch_id


def wait_done(c: httpx.Client, batch_id: str, timeout: float = 3600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch: dict[str, Any] = c.get(f"{BATCHES}/{batch_id}").json()["data"]
        if batch["status"] in ("done", "cancelled", "expired"):
            return batch
        time.sleep(0.25)
    raise TimeoutError(batch_id)


def batch_alone(service: Service, bodies: list[bytes], total: int) -> dict[str, float]:
    """Photos/s from the first upload to `done`, and the seconds the uploads took (scanning starts as
    photos arrive, so the two overlap)."""
    with client(service) as c:
        started = time.perf_counter()
        batch_id = run_batch(c, bodies, total)
        uploaded = time.perf_counter() - started
        wait_done(c, batch_id)
        took = time.perf_counter() - started
        return {"photos_s": total / took, "seconds": took, "upload_s": uploaded}


def single_scans(service: Service, bodies: list[bytes], count: int) -> list[float]:
    latencies = []
    with client(service) as c:
        for n in range(count):
            started = time.perf_counter()
            response = c.post("/v1/scan", files={"image": ("p.jpg", bodies[n % len(bodies)], "image/jpeg")})
            latencies.append(time.perf_counter() - started)
            assert response.status_code == 200, response.text
    return latencies


def interactive(service: Service, bodies: list[bytes], total: int, count: int = 40) -> dict[str, Any]:
    """p50 of single scans with nothing else running, then of single scans sent while a batch still has
    photos waiting (each scan is counted only when the batch was still waiting after it); the batch is
    cancelled once `count` scans are measured."""
    idle = statistics.median(single_scans(service, bodies, count))
    busy: list[float] = []
    with client(service) as c, client(service) as scans:
        batch_id = run_batch(c, bodies, total)
        while len(busy) < count:
            started = time.perf_counter()
            response = scans.post(
                "/v1/scan", files={"image": ("p.jpg", bodies[len(busy) % len(bodies)], "image/jpeg")}
            )
            took = time.perf_counter() - started
            assert response.status_code == 200, response.text
            view = c.get(f"{BATCHES}/{batch_id}").json()["data"]
            if view["photos"]["waiting"] == 0:
                break
            busy.append(took)
        answered = view["photos"]["answered"]
        c.delete(f"{BATCHES}/{batch_id}")
        wait_done(c, batch_id)
    during = statistics.median(busy)
    return {
        "idle_p50_ms": idle * 1000,
        "during_batch_p50_ms": during * 1000,
        "ratio": during / idle,
        "scans_during_batch": len(busy),
        "batch_photos_answered_meanwhile": answered,
    }


def fairness(service: Service, bodies: list[bytes], total: int) -> dict[str, Any]:
    half = total // 2
    first, second = client(service), client(service)
    with first, second, ThreadPoolExecutor(2) as pool:
        ids = list(pool.map(lambda c: run_batch(c, bodies, half), (first, second)))
        while True:
            views = [
                c.get(f"{BATCHES}/{batch_id}").json()["data"]
                for c, batch_id in zip((first, second), ids, strict=True)
            ]
            if any(view["status"] == "done" for view in views):
                break
            time.sleep(0.2)
        answered = [view["photos"]["answered"] for view in views]
        wait_done(first, ids[0])
        wait_done(second, ids[1])
    return {
        "answered_when_the_first_finished": answered,
        "share_of_the_slower": min(answered) / max(answered),
    }


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _uvicorn_workers(service: Service) -> list[int]:
    """The uvicorn worker processes under the child `cardcat serve --workers 2 --no-scan`."""
    workers = []
    for proc in service.processes:
        for child in _children(proc.pid):
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"--no-scan" in cmdline:
                workers += [
                    pid
                    for pid in _children(child)
                    if b"multiprocessing" in Path(f"/proc/{pid}/cmdline").read_bytes()
                ]
    return workers


def crash(service: Service, bodies: list[bytes], total: int, kills: int = 2) -> dict[str, Any]:
    killed: list[int] = []
    with client(service) as c:
        batch_id = run_batch(c, bodies, total)
        for _ in range(kills):
            while _answered(c, batch_id) < total * (len(killed) + 1) // (kills + 2):
                time.sleep(0.2)
            workers = _uvicorn_workers(service)
            if workers:
                os.kill(workers[0], signal.SIGKILL)
                killed.append(workers[0])
            time.sleep(3)
        return {"workers_killed": len(killed), **count_answers(service, c, batch_id, total)}


def count_answers(service: Service, c: httpx.Client, batch_id: str, total: int) -> dict[str, Any]:
    """Every photo's answers once the batch is finished: lost, doubled, and photo files left on disk."""
    done = wait_done(c, batch_id)
    results, cursor = [], None
    while True:
        page = c.get(
            f"{BATCHES}/{batch_id}/results", params={"limit": 200} | ({"cursor": cursor} if cursor else {})
        ).json()["data"]
        results += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    seen: dict[int, int] = {}
    for result in results:
        seen[result["index"]] = seen.get(result["index"], 0) + 1
    folder = service.data_dir / "batches" / batch_id
    return {
        "photos": total, "status": done["status"],
        "lost": sum(1 for index in range(total) if index not in seen),
        "doubled": sum(1 for count in seen.values() if count > 1),
        "files_left": len(list(folder.glob("*"))) if folder.exists() else 0,
        "errors": done["outcomes"]["error"],
    }  # fmt: skip


def _answered(c: httpx.Client, batch_id: str) -> int:
    answered: int = c.get(f"{BATCHES}/{batch_id}").json()["data"]["photos"]["answered"]
    return answered


def outages(root: Path, bodies: list[bytes], total: int) -> dict[str, Any]:
    """A batch through a PostgreSQL restart and the loss of the Detector replica."""
    from benchmarks.replicas import replica_pids
    from cardcat.outages import PrivatePostgres
    from cardcat.stack import Database

    postgres = PrivatePostgres()
    service = launch_scanner(
        root,
        EXPANSIONS,
        serve_args=("--workers", "2"),
        database=Database(postgres.url, "postgresql"),
        CARDCAT_BATCH_LEASE_S="10",
    )
    try:
        with client(service) as c:
            batch_id = run_batch(c, bodies, total)
            while _answered(c, batch_id) < total // 3:
                time.sleep(0.2)
            postgres.stop()
            time.sleep(5)
            postgres.start()
            while True:  # the API answers again once its pool reconnects
                try:
                    if _answered(c, batch_id) >= 2 * total // 3:
                        break
                except (httpx.HTTPError, KeyError, TypeError, ValueError):
                    pass
                time.sleep(0.2)
            killed = replica_pids("Detector")[:1]
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
            return {
                "faults": ["PostgreSQL stopped 5 s", f"Detector replicas SIGKILLed: {len(killed)}"],
                **count_answers(service, c, batch_id, total),
            }
    finally:
        service.stop()
        postgres.close()


def table(report: dict[str, Any]) -> str:
    t, i, f, c = report["throughput"], report["interactive"], report["fairness"], report["crash"]
    o = report["outages"]
    runs = f"median of {report['repeats']}"
    rows = [
        (
            f"closed loop `/v1/scan`, c = {report['concurrency']} ({runs})",
            f"{t['closed_loop_photos_s']:.1f}/s",
            "",
        ),
        (f"one batch of {report['photos']} photos alone ({runs})", f"{t['batch_photos_s']:.1f}/s", ""),
        ("batch / closed loop", f"{t['ratio']:.2f}", "≥ 0.8"),
        (
            "interactive p50: idle → during a batch",
            f"{i['idle_p50_ms']:.0f} → {i['during_batch_p50_ms']:.0f} ms ({i['ratio']:.2f} ×)",
            "≤ 2 ×",
        ),
        (
            "two keys' batches: answered when the first finished",
            f"{f['answered_when_the_first_finished']} (share {f['share_of_the_slower']:.2f})",
            "even",
        ),
        (
            f"crash ({c['workers_killed']} workers SIGKILLed): lost, doubled, files left",
            f"{c['lost']}, {c['doubled']}, {c['files_left']}",
            "0, 0, 0",
        ),
        (
            f"outages ({'; '.join(o['faults'])}): lost, doubled, files left",
            f"{o['lost']}, {o['doubled']}, {o['files_left']}",
            "0, 0, 0",
        ),
    ]
    return "\n".join(
        ["| figure | value | target |", "|---|---|---|", *(f"| {a} | {b} | {c} |" for a, b, c in rows)]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--photos", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scan_batches.json")
    args = parser.parse_args()
    bodies = photos()
    with tempfile.TemporaryDirectory() as tmp:
        service = launch_scanner(
            Path(tmp), EXPANSIONS, serve_args=("--workers", "2"), CARDCAT_BATCH_LEASE_S="10"
        )
        try:
            closed_loop(service, bodies, 40, args.concurrency)  # warm every replica
            loops = [closed_loop(service, bodies, args.photos, args.concurrency) for _ in range(args.repeats)]
            alone_runs = [batch_alone(service, bodies, args.photos) for _ in range(args.repeats)]
            alone = [run["photos_s"] for run in alone_runs]
            interactive_runs = [interactive(service, bodies, args.photos) for _ in range(args.repeats)]
            ratios = [run["ratio"] for run in interactive_runs]
            median_run = interactive_runs[ratios.index(statistics.median_low(ratios))]
            report: dict[str, Any] = {
                "photos": args.photos, "repeats": args.repeats, "concurrency": args.concurrency,
                "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
                "command": " ".join(["benchmarks/scan_batches.py", *sys.argv[1:]]),
                "git_sha": subprocess.run(
                    ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO
                ).stdout.strip(),
                "throughput": {
                    "closed_loop_photos_s": statistics.median(loops), "closed_loop_runs": loops,
                    "batch_photos_s": statistics.median(alone), "batch_runs": alone_runs,
                    "ratio": statistics.median(alone) / statistics.median(loops),
                },
                "interactive": {**median_run, "runs": interactive_runs},
                "fairness": fairness(service, bodies, args.photos),
                "crash": crash(service, bodies, args.photos),
            }  # fmt: skip
        finally:
            service.stop()
    with tempfile.TemporaryDirectory() as tmp:
        report["outages"] = outages(Path(tmp), bodies, args.photos)
    print(table(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
