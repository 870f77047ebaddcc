"""How long a scanner model's batch waits for company: `CARDCAT_SCAN_BATCH_WAIT_MS` (which reaches the scanner
config: tests/serve_app/test_scan_threads.py) to each model deployment, and a user_config's `batch_wait_ms`
(`serve_app.app._set_batching`)."""

from __future__ import annotations

import json
import subprocess
import sys

from cardcat.stack import REPO

# A deployment whose batched method answers each request with the size of the batch it ran in, batching as
# the scanner's models do (`_set_batching` from its user_config); two requests 0.1 s apart, once with a
# 2 s wait and once, after a user_config change, with none.
BATCHES = """
import asyncio, json, logging
import ray
from ray import serve
from serve_app.app import _set_batching

@serve.deployment(max_ongoing_requests=8)
class Batches:
    def reconfigure(self, config):
        _set_batching(self.size, config)

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.0)
    async def size(self, requests):
        return [len(requests)] * len(requests)

async def two_requests_apart(handle):
    async def later():
        await asyncio.sleep(0.1)
        return await handle.size.remote(2)
    return list(await asyncio.gather(handle.size.remote(1), later()))

ray.init(address="local", num_cpus=1, include_dashboard=False, logging_level=logging.WARNING)
sizes = {}
for wait in (2000, 0):
    handle = serve.run(Batches.options(user_config={"batch_wait_ms": wait}).bind(), name="batches")
    sizes[wait] = asyncio.run(two_requests_apart(handle))
serve.shutdown()
print(json.dumps(sizes))
"""


def test_a_user_config_wait_decides_whether_a_later_request_joins_the_batch():
    """In a real Serve replica: with 2 s of wait the request sent 0.1 s later joins the first one's batch;
    with none, after only a user_config change (no restart), each runs alone."""
    out = subprocess.run(
        [sys.executable, "-c", BATCHES], cwd=REPO, capture_output=True, text=True, timeout=300, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"2000": [2, 2], "0": [1, 1]}


def test_each_model_replica_batches_with_the_wait_it_is_given():
    """The three model deployments' classes, built as Ray Serve builds a replica (in a fresh process: they
    set the process's thread counts), with the real weights."""
    code = (
        "from serve_app.app import Detector, Reader, Embedder\n"
        "from serve_app.config import MODELS\n"
        "d = Detector.func_or_class(str(MODELS / 'detector.pt'), 'cpu', batch_wait_ms=7.0)\n"
        "r = Reader.func_or_class(str(MODELS / 'ocr.pt'), 'cpu', batch_wait_ms=0.0)\n"
        "print(d.locate_batch._get_batch_wait_timeout_s(), r.read._get_batch_wait_timeout_s())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0.007", "0.0"]
