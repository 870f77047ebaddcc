"""A face the object store no longer has fails only its own scan (`serve_app.app.Reader.read`), not the
batch it came in with. (Why faces went missing, and the Detector's `FACES_HELD` that stopped it, is a race
measured by `benchmarks/scan_floor.py`: docs/scanner-performance.md, "The floor".)"""

from __future__ import annotations

import json
import subprocess
import sys

from cardcat.stack import REPO

# The real Reader deployment (shipped weights) in a real Serve replica, given one batch of two requests:
# a face sent inline, and a face whose owner, an actor standing where the Detector replica would, was
# killed before the Reader fetched it. A second's batch wait puts both in one batch.
LOST_FACE = """
import asyncio, json, logging, time
import numpy as np
import ray
from ray import serve
from serve_app.app import Reader
from serve_app.config import MODELS
from serve_app.pipeline import FACE_LOST

ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)

@ray.remote(num_cpus=0)
class Owner:
    def face(self):
        return [ray.put(np.full((838, 600, 3), 200, np.uint8))]

owner = Owner.remote()
[lost] = ray.get(owner.face.remote())
ray.kill(owner)
time.sleep(1.0)
app = Reader.options(name="Reader", ray_actor_options={"num_cpus": 0.5}).bind(
    str(MODELS / "ocr.pt"), "cpu", batch_wait_ms=1000.0
)
handle = serve.run(app, name="reader")
face = np.full((838, 600, 3), 200, np.uint8)

async def both():
    return await asyncio.gather(
        handle.read.remote((face, False, ["SSP 025/191"])), handle.read.remote((lost, False, ["SSP 026/191"]))
    )

kept, gone = asyncio.run(both())
serve.shutdown()
result = {"kept": sorted(kept), "scored": sorted(kept["footer_scores"]), "gone": gone, "key": FACE_LOST}
print(json.dumps(result))
"""


def test_a_lost_face_fails_its_own_read_and_not_its_batch():
    out = subprocess.run(
        [sys.executable, "-c", LOST_FACE], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert "footer_scores" in result["kept"] and result["scored"] == ["SSP 025/191"]
    assert list(result["gone"]) == [result["key"]]
    assert "Error" in result["gone"][result["key"]]  # says what Ray raised
