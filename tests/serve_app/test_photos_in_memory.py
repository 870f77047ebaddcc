"""Photos are not stored (spec): a photo handed to the scanner travels as a Ray call argument, which Ray
puts in its object store, and Ray spills a full store to files on disk. Issue 45, item 11.

Reproduces a73d9a9's behaviour: the Ray instance `cardcat serve --scan` starts (`serve_app.local
.start_ray`) had a 256 MB store with Ray's default spilling to its session directory on disk, so 40
photos of 10 MB held by a replica at once (400 MB) were written to disk (Ray reported 360 MiB spilled).
Now spilling is off and the store's fallback files are on the memory filesystem: the same load spills
nothing and no store memory is mapped from the disk; the replica still gets every photo.
"""

from __future__ import annotations

import json
import subprocess
import sys

from cardcat.stack import REPO

# A Detector stand-in: a Serve deployment taking photos' bytes by handle, as `ScanPipeline` sends them,
# and holding each for a while, so that 40 of them are in the store at once.
HOLD = """
import asyncio, json, os, re
from pathlib import Path
import ray
from ray import serve
from ray._private.internal_api import memory_summary
from serve_app.local import start_ray

PHOTOS, HOLD_S, MIB = 40, 8.0, 1024 * 1024

@serve.deployment(max_ongoing_requests=PHOTOS)
class Holder:
    async def locate(self, photo):
        await asyncio.sleep(HOLD_S)
        return len(photo)

def spill_files(node):
    dirs = [Path(node.get_session_dir_path())]
    config = json.loads(node._object_spilling_config or "{}")
    path = config.get("params", {}).get("directory_path")
    dirs += [Path(p) for p in ([path] if isinstance(path, str) else path or [])]
    return sorted(str(f) for d in dirs for f in d.rglob("*") if f.is_file() and "spilled_objects" in str(f))

def store_maps(pid):
    # Memory the object store maps from files (its own, and fallback files when it is full).
    found = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith("/") and parts[5].endswith("(deleted)"):
            start, end = (int(x, 16) for x in parts[0].split("-"))
            found.append((parts[5], end - start))
    return found

async def main():
    serve.start(proxy_location="Disabled")  # as start_scanner, without Ray's HTTP proxy
    handle = serve.run(Holder.bind(), name="holder")
    photos = [os.urandom(MIB) * 10 for _ in range(PHOTOS)]  # 10 MB each, all different
    calls = [handle.locate.remote(photo) for photo in photos]
    del photos
    await asyncio.sleep(HOLD_S / 2)
    node = ray._private.worker._global_node
    raylet = node.all_processes["raylet"][0].process.pid
    maps = store_maps(raylet)
    files_held = spill_files(node)
    sizes = [await call for call in calls]
    summary = memory_summary(stats_only=True)
    spilled = re.search(r"Spilled (\\d+) MiB", summary)
    print(json.dumps({
        "sizes": sizes,
        "spilled_mib": int(spilled.group(1)) if spilled else 0,
        "spill_files": files_held + spill_files(node),
        "disk_maps": [(path, size) for path, size in maps if not path.startswith("/dev/shm/")],
        "shm_maps_mib": sum(size for path, size in maps if path.startswith("/dev/shm/")) // MIB,
    }))

start_ray()
asyncio.run(main())
serve.shutdown()
ray.shutdown()
"""


def test_photos_held_by_a_replica_past_the_store_never_reach_the_disk():
    out = subprocess.run([sys.executable, "-c", HOLD], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    found = json.loads(next(line for line in out.stdout.splitlines() if line.startswith('{"sizes"')))
    print(found)
    assert found["sizes"] == [10 * 1024 * 1024] * 40, "every photo reached the replica whole"
    assert found["spilled_mib"] == 0, found
    assert found["spill_files"] == [], found
    assert found["disk_maps"] == [], found
    assert found["shm_maps_mib"] >= 256, found  # the store (and its fallback) in memory


def test_the_store_holds_every_scan_the_ingress_workers_allow():
    """`cardcat serve` sizes the store for workers x `CARDCAT_SCAN_MAX_IN_FLIGHT` scans, each a photo at
    the spec's cap and its rectified face: the cap keeps the store from ever filling."""
    from catalog_api.kit.settings import Settings
    from core.photo import MAX_IMAGE_BYTES
    from serve_app.local import OBJECT_STORE_BYTES, object_store_bytes

    face = 600 * 838 * 3
    for workers in (1, 2, 4):
        photos = workers * Settings().scan_max_in_flight
        assert object_store_bytes(photos) >= photos * (MAX_IMAGE_BYTES + face)
    assert object_store_bytes(0) == OBJECT_STORE_BYTES
